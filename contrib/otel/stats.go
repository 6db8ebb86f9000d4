package dsotel

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/delaystream/delaystream"
)

// watch is one watched queue and the groups whose figures are read with it.
type watch struct {
	q      *delaystream.Queue
	groups []*delaystream.Group
}

// gauges are the observable gauges read from Redis at each collection.
type gauges struct {
	waiting, overdue, evicting                         metric.Int64ObservableGauge // queue
	overdueAge                                         metric.Float64ObservableGauge
	consumers, pending, lag, retryWaiting, deadLetters metric.Int64ObservableGauge // queue, group
	oldestPending                                      metric.Float64ObservableGauge
	queuePaused, groupPaused                           metric.Float64ObservableGauge // queue; queue, group
}

func (g *gauges) create(mt metric.Meter) error {
	var errs []error
	i64 := func(name, desc, unit string) metric.Int64ObservableGauge {
		o, err := mt.Int64ObservableGauge(name, metric.WithDescription(desc), metric.WithUnit(unit))
		errs = append(errs, err)
		return o
	}
	f64 := func(name, desc string) metric.Float64ObservableGauge {
		o, err := mt.Float64ObservableGauge(name, metric.WithDescription(desc), metric.WithUnit("s"))
		errs = append(errs, err)
		return o
	}
	g.waiting = i64("delaystream.queue.waiting", "Messages scheduled and not yet promoted.", "{message}")
	g.overdue = i64("delaystream.queue.overdue", "Waiting messages whose due time has passed (a mover is late or absent).", "{message}")
	g.overdueAge = f64("delaystream.queue.overdue_age", "How long the earliest waiting message has been due (Redis clock); 0 when none is overdue.")
	g.evicting = i64("delaystream.queue.evicting_servers", "Redis servers holding the queue whose maxmemory-policy can evict its keys (messages can be lost): set maxmemory-policy noeviction.", "{server}")
	g.consumers = i64("delaystream.group.consumers", "Consumers known to the group on the queue stream.", "{consumer}")
	g.pending = i64("delaystream.group.pending", "Entries delivered to the group and not yet acknowledged (queue stream and retry lane).", "{message}")
	g.oldestPending = f64("delaystream.group.oldest_pending_age", "Time since the group's oldest pending entry was appended to its stream (Redis clock): waiting to be read, then held; 0 when none.")
	g.lag = i64("delaystream.group.lag", "Queue stream entries not yet delivered to the group; absent when Redis cannot tell.", "{message}")
	g.retryWaiting = i64("delaystream.group.retry_waiting", "Messages waiting in the group's retry lane for their backoff.", "{message}")
	g.deadLetters = i64("delaystream.group.dead_letters", "Entries in the group's dead-letter stream.", "{message}")
	g.queuePaused = f64("delaystream.queue.paused", "How long the queue's promotion has been paused (Redis clock); 0 when it is not.")
	g.groupPaused = f64("delaystream.group.paused", "How long the group has been paused; 0 when it is not.")
	return errors.Join(errs...)
}

func (g *gauges) all() []metric.Observable {
	return []metric.Observable{g.waiting, g.overdue, g.overdueAge, g.evicting,
		g.consumers, g.pending, g.oldestPending, g.lag, g.retryWaiting, g.deadLetters, g.queuePaused, g.groupPaused}
}

// Watch makes every collection read, from Redis, the figures of queue q
// (Queue.Stats: waiting, overdue) and of each of groups (Group.Stats:
// pending and its oldest age, lag, retry lane, dead letters, consumers).
// Watching a queue again adds the groups not yet watched. A nil q or group
// returns an error wrapping [ErrInvalidOption].
//
// A collection reads the queues and groups one after another, all within
// [WithStatsTimeout] (and the collection's own deadline): with S shards, a
// queue costs one pipelined script call per shard and a group about seven
// commands per shard. Figures that fail or time out are left out and
// counted in delaystream.stats.errors. Every process that watches a queue
// reports the same figures: aggregate them with max, not sum.
func (t *Telemetry) Watch(q *delaystream.Queue, groups ...*delaystream.Group) error {
	if q == nil {
		return fmt.Errorf("%w: watch: nil queue", ErrInvalidOption)
	}
	if slices.Contains(groups, nil) {
		return fmt.Errorf("%w: watch %s: nil group", ErrInvalidOption, q.Name())
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	i := slices.IndexFunc(t.watched, func(w *watch) bool { return w.q == q })
	if i < 0 {
		t.watched = append(t.watched, &watch{q: q})
		i = len(t.watched) - 1
	}
	w := t.watched[i]
	for _, g := range groups {
		if !slices.Contains(w.groups, g) {
			w.groups = append(w.groups, g)
		}
	}
	return nil
}

// observe is the callback of the observable gauges: it reads the figures
// of every watched queue and group within the stats timeout.
func (t *Telemetry) observe(ctx context.Context, o metric.Observer) error {
	t.mu.Lock()
	ws := make([]watch, len(t.watched))
	for i, w := range t.watched {
		ws[i] = watch{q: w.q, groups: slices.Clone(w.groups)}
	}
	t.mu.Unlock()
	if len(ws) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, t.cfg.statsTimeout)
	defer cancel()
	g := &t.gauges
	for _, w := range ws {
		queue := w.q.Name()
		qa := metric.WithAttributeSet(queueAttrs(queue, ""))
		if st, err := w.q.Stats(ctx); err != nil {
			t.statsErrors.Add(ctx, 1, metric.WithAttributeSet(queueAttrs(queue, "")))
		} else {
			o.ObserveInt64(g.waiting, st.Waiting, qa)
			o.ObserveInt64(g.overdue, st.Overdue, qa)
			age := 0.0
			if !st.NextDue.IsZero() && st.NextDue.Before(st.Now) {
				age = st.Now.Sub(st.NextDue).Seconds()
			}
			o.ObserveFloat64(g.overdueAge, age, qa)
			o.ObserveFloat64(g.queuePaused, pausedFor(st.Now, st.PausedSince), qa)
			o.ObserveInt64(g.evicting, int64(len(st.Evicting)), qa)
		}
		for _, grp := range w.groups {
			st, err := grp.Stats(ctx)
			if err != nil {
				t.statsErrors.Add(ctx, 1, metric.WithAttributeSet(queueAttrs(queue, "")))
				continue
			}
			ga := metric.WithAttributeSet(queueAttrs(queue, st.Group))
			o.ObserveInt64(g.consumers, st.Consumers, ga)
			o.ObserveInt64(g.pending, st.Pending, ga)
			o.ObserveFloat64(g.oldestPending, st.OldestPending.Seconds(), ga)
			if st.Lag >= 0 {
				o.ObserveInt64(g.lag, st.Lag, ga)
			}
			o.ObserveInt64(g.retryWaiting, st.RetryWaiting, ga)
			o.ObserveInt64(g.deadLetters, st.DeadLetters, ga)
			o.ObserveFloat64(g.groupPaused, pausedFor(time.Now(), st.PausedSince), ga)
		}
	}
	return nil
}

// pausedFor returns the seconds from since to now, 0 when since is zero
// (not paused); a pause never shows as less than a millisecond.
func pausedFor(now, since time.Time) float64 {
	if since.IsZero() {
		return 0
	}
	return max(now.Sub(since), time.Millisecond).Seconds()
}
