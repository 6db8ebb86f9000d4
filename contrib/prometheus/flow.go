package dsprom

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/delaystream/delaystream/admin"
)

// flowDescs describe the flow-control gauges read at each scrape: pauses
// and limits.
type flowDescs struct {
	queuePaused                                 *prometheus.Desc // queue
	groupPaused, concurrency, rate, burst, held *prometheus.Desc // queue, group
}

func newFlowDescs(d func(name, help string, labels []string) *prometheus.Desc) flowDescs {
	q, g := []string{"queue"}, []string{"queue", "group"}
	return flowDescs{
		queuePaused: d("queue_paused_seconds", "How long the queue's promotion has been paused (Redis clock); 0 when it is not.", q),
		groupPaused: d("group_paused_seconds", "How long the group has been paused (Redis clock); 0 when it is not.", g),
		concurrency: d("group_concurrency_limit", "The group's concurrency cap, as its consumer started last recorded it; absent when none.", g),
		rate:        d("group_rate_limit_per_second", "The group's rate limit in messages per second, as its consumer started last recorded it; absent when none.", g),
		burst:       d("group_rate_limit_burst", "The burst of the group's rate limit; absent when none.", g),
		held:        d("group_concurrency_slots_held", "Concurrency slots the group's live consumers hold; absent without a cap.", g),
	}
}

func (s flowDescs) describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{s.queuePaused, s.groupPaused, s.concurrency, s.rate, s.burst, s.held} {
		ch <- d
	}
}

// send sends the flow gauges of report r through gauge.
func (s flowDescs) send(gauge func(desc *prometheus.Desc, v float64, labels ...string), r admin.QueueReport) {
	gauge(s.queuePaused, pausedFor(r.Now, r.PausedSince), r.Queue)
	for _, g := range r.Groups {
		gauge(s.groupPaused, pausedFor(r.Now, g.PausedSince), r.Queue, g.Group)
		if g.ConcurrencyLimit > 0 {
			gauge(s.concurrency, float64(g.ConcurrencyLimit), r.Queue, g.Group)
			gauge(s.held, float64(g.SlotsHeld), r.Queue, g.Group)
		}
		if g.RatePerSecond > 0 {
			gauge(s.rate, g.RatePerSecond, r.Queue, g.Group)
			gauge(s.burst, float64(g.RateBurst), r.Queue, g.Group)
		}
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
