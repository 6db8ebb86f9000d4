package dsprom

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/delaystream/delaystream/admin"
)

// flowDescs describe the flow-control gauges read at each scrape: pauses.
type flowDescs struct {
	queuePaused *prometheus.Desc // queue
	groupPaused *prometheus.Desc // queue, group
}

func newFlowDescs(d func(name, help string, labels []string) *prometheus.Desc) flowDescs {
	q, g := []string{"queue"}, []string{"queue", "group"}
	return flowDescs{
		queuePaused: d("queue_paused_seconds", "How long the queue's promotion has been paused (Redis clock); 0 when it is not.", q),
		groupPaused: d("group_paused_seconds", "How long the group has been paused (Redis clock); 0 when it is not.", g),
	}
}

func (s flowDescs) describe(ch chan<- *prometheus.Desc) {
	ch <- s.queuePaused
	ch <- s.groupPaused
}

// send sends the flow gauges of report r through gauge.
func (s flowDescs) send(gauge func(desc *prometheus.Desc, v float64, labels ...string), r admin.QueueReport) {
	gauge(s.queuePaused, pausedFor(r.Now, r.PausedSince), r.Queue)
	for _, g := range r.Groups {
		gauge(s.groupPaused, pausedFor(r.Now, g.PausedSince), r.Queue, g.Group)
	}
}

// pausedFor returns the seconds from since to now, 0 when since is zero
// (not paused); a pause never shows as less than a millisecond, so that
// "paused" is always > 0.
func pausedFor(now, since time.Time) float64 {
	if since.IsZero() {
		return 0
	}
	return max(now.Sub(since), time.Millisecond).Seconds()
}
