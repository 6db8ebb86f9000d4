package dsprom

import (
	"context"
	"fmt"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/delaystream/delaystream/internal/delay"
	"github.com/delaystream/delaystream/internal/group"
)

// watch is one watched queue and the consumers whose group figures are
// read with it.
type watch struct {
	q      *delay.Queue
	groups []*group.Consumer
}

// statDescs describe the gauges read from Redis at each scrape.
type statDescs struct {
	waiting, overdue, overdueAge, streamLen                    *prometheus.Desc // queue
	consumers, pending, oldest, lag, retryWaiting, deadLetters *prometheus.Desc // queue, group
}

func newStatDescs(ns string) statDescs {
	q, g := []string{"queue"}, []string{"queue", "group"}
	d := func(name, help string, labels []string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(ns, "", name), help, labels, nil)
	}
	return statDescs{
		waiting:      d("queue_waiting_messages", "Messages scheduled and not yet promoted.", q),
		overdue:      d("queue_overdue_messages", "Waiting messages whose due time has passed (a mover is late or absent).", q),
		overdueAge:   d("queue_overdue_seconds", "How long the earliest waiting message has been due (Redis clock); 0 when none is overdue.", q),
		streamLen:    d("queue_stream_entries", "Entries in the queue stream (read with the first watched group of the queue).", q),
		consumers:    d("group_consumers", "Consumers known to the group on the queue stream.", g),
		pending:      d("group_pending_messages", "Entries delivered to the group and not yet acknowledged (queue stream and retry lane).", g),
		oldest:       d("group_oldest_pending_seconds", "Age of the group's oldest pending entry (Redis clock); 0 when none.", g),
		lag:          d("group_lag_messages", "Queue stream entries not yet delivered to the group; absent when Redis cannot tell.", g),
		retryWaiting: d("group_retry_waiting_messages", "Messages waiting in the group's retry lane for their backoff.", g),
		deadLetters:  d("group_dead_letters", "Entries in the group's dead-letter stream.", g),
	}
}

func (s statDescs) describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{s.waiting, s.overdue, s.overdueAge, s.streamLen,
		s.consumers, s.pending, s.oldest, s.lag, s.retryWaiting, s.deadLetters} {
		ch <- d
	}
}

// Watch makes every scrape read, from Redis, the figures of queue q
// (delay.Queue.Stats: waiting, overdue) and of the group of each consumer
// (group.Consumer.Stats: pending and its oldest age, lag, retry lane, dead
// letters, consumers; the queue stream's length comes from the first of
// them). Use the parts of the front door: Watch(q.Producer(), billing,
// audit). Watching a queue again adds the consumers not yet watched;
// watch one consumer per group (two consumers of one group would report
// the same series twice, which the registry refuses). A nil q or consumer
// returns an error wrapping [ErrInvalidOption].
//
// A scrape reads the queues and groups one after another, all within
// [WithStatsTimeout]: with S shards, a queue costs one pipelined script
// call per shard and a group about seven commands per shard. Figures that
// fail or time out are left out of the scrape and counted in
// stats_errors_total. Every process that watches a queue reports the
// same figures: aggregate them with max, not sum.
func (m *Metrics) Watch(q *delay.Queue, groups ...*group.Consumer) error {
	if q == nil {
		return fmt.Errorf("%w: watch: nil queue", ErrInvalidOption)
	}
	if slices.Contains(groups, nil) {
		return fmt.Errorf("%w: watch %s: nil consumer", ErrInvalidOption, q.Name())
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	i := slices.IndexFunc(m.watched, func(w *watch) bool { return w.q.Name() == q.Name() && w.q.Keys() == q.Keys() })
	if i < 0 {
		m.watched = append(m.watched, &watch{q: q})
		i = len(m.watched) - 1
	}
	w := m.watched[i]
	for _, c := range groups {
		if !slices.Contains(w.groups, c) {
			w.groups = append(w.groups, c)
		}
	}
	return nil
}

// collectStats reads and sends the figures of every watched queue and
// group, within the stats timeout.
func (m *Metrics) collectStats(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	ws := make([]watch, len(m.watched))
	for i, w := range m.watched {
		ws[i] = watch{q: w.q, groups: slices.Clone(w.groups)}
	}
	m.mu.Unlock()
	if len(ws) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.statsTimeout)
	defer cancel()
	d := m.stats
	gauge := func(desc *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, labels...)
	}
	for _, w := range ws {
		queue := w.q.Name()
		if st, err := w.q.Stats(ctx); err != nil {
			m.statsErrors.WithLabelValues(queue).Inc()
		} else {
			gauge(d.waiting, float64(st.Waiting), queue)
			gauge(d.overdue, float64(st.Overdue), queue)
			age := 0.0
			if !st.NextDue.IsZero() && st.NextDue.Before(st.Now) {
				age = st.Now.Sub(st.NextDue).Seconds()
			}
			gauge(d.overdueAge, age, queue)
		}
		streamDone := false
		for _, c := range w.groups {
			st, err := c.Stats(ctx)
			if err != nil {
				m.statsErrors.WithLabelValues(queue).Inc()
				continue
			}
			if !streamDone {
				gauge(d.streamLen, float64(st.Queue.StreamLength), queue)
				streamDone = true
			}
			gauge(d.consumers, float64(st.Consumers), queue, st.Group)
			gauge(d.pending, float64(st.Pending), queue, st.Group)
			gauge(d.oldest, st.OldestPending.Seconds(), queue, st.Group)
			if st.Lag >= 0 {
				gauge(d.lag, float64(st.Lag), queue, st.Group)
			}
			gauge(d.retryWaiting, float64(st.RetryWaiting), queue, st.Group)
			gauge(d.deadLetters, float64(st.DeadLetters), queue, st.Group)
		}
	}
}
