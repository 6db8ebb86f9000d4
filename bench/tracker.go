package main

import (
	"context"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// tracker records the deliveries of n messages numbered 0..n-1.
type tracker struct {
	n          int
	count      []atomic.Int32
	recv       []atomic.Int64 // first receive, Unix ns (local clock)
	late       []atomic.Int64 // first receive minus due, ns
	promote    []atomic.Int64 // stream entry id time minus due, ns (delaystream; ms resolution)
	unique     atomic.Int64
	dups       atomic.Int64
	stray      atomic.Int64 // deliveries of numbers outside 0..n-1
	earlyRedis atomic.Int64 // stream entry appended before its due time (Redis clock only; delaystream)
	done       chan struct{}
	doneOnce   sync.Once
}

func newTracker(n int) *tracker {
	return &tracker{n: n, count: make([]atomic.Int32, n), recv: make([]atomic.Int64, n),
		late: make([]atomic.Int64, n), promote: make([]atomic.Int64, n), done: make(chan struct{})}
}

func (t *tracker) handler(ctx context.Context, d delivery) error {
	now := time.Now().UnixNano()
	seq := payloadSeq(d.payload)
	if seq < 0 || seq >= t.n {
		t.stray.Add(1)
		return nil
	}
	if t.count[seq].Add(1) > 1 {
		t.dups.Add(1)
		return nil
	}
	t.recv[seq].Store(now)
	t.late[seq].Store(now - d.due.UnixNano())
	if !d.appended.IsZero() {
		t.promote[seq].Store(d.appended.UnixNano() - d.due.UnixNano())
		if d.appended.UnixMilli() < d.due.UnixMilli() {
			t.earlyRedis.Add(1)
		}
	}
	if t.unique.Add(1) == int64(t.n) {
		t.doneOnce.Do(func() { close(t.done) })
	}
	return nil
}

// wait returns true when every message was delivered before the timeout.
func (t *tracker) wait(timeout time.Duration) bool {
	select {
	case <-t.done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// summary of the delivered messages.
type summary struct {
	delivered          int
	lost, dups, stray  int64
	first, last        time.Time // first and last first-delivery
	p50, p99, max, min time.Duration
	early              int // lateness < 0 (local clock)
	earlyRedis         int64
	// Split of the lateness (delaystream only): due -> appended to the
	// stream (mover), appended -> handler (consumer). The entry id time is
	// whole milliseconds, so both are +-1 ms.
	promoteP50, promoteP99 time.Duration
	promoteMax             time.Duration
	consumeP50, consumeP99 time.Duration
}

func (t *tracker) summarize() summary {
	s := summary{dups: t.dups.Load(), stray: t.stray.Load(), earlyRedis: t.earlyRedis.Load()}
	lat := make([]int64, 0, t.n)
	var prom, cons []int64
	var first, last int64 = math.MaxInt64, 0
	for i := 0; i < t.n; i++ {
		if t.count[i].Load() == 0 {
			continue
		}
		r := t.recv[i].Load()
		first, last = min(first, r), max(last, r)
		l := t.late[i].Load()
		if l < 0 {
			s.early++
		}
		lat = append(lat, l)
		if p := t.promote[i].Load(); p != 0 {
			prom = append(prom, p)
			cons = append(cons, l-p)
		}
	}
	if len(prom) > 0 {
		slices.Sort(prom)
		slices.Sort(cons)
		s.promoteP50, s.promoteP99 = time.Duration(pct(prom, .5)), time.Duration(pct(prom, .99))
		s.promoteMax = time.Duration(prom[len(prom)-1])
		s.consumeP50, s.consumeP99 = time.Duration(pct(cons, .5)), time.Duration(pct(cons, .99))
	}
	s.delivered = len(lat)
	s.lost = int64(t.n - len(lat))
	if len(lat) == 0 {
		return s
	}
	slices.Sort(lat)
	s.first, s.last = time.Unix(0, first), time.Unix(0, last)
	s.p50 = time.Duration(pct(lat, 0.50))
	s.p99 = time.Duration(pct(lat, 0.99))
	s.max = time.Duration(lat[len(lat)-1])
	s.min = time.Duration(lat[0])
	return s
}

// spread is how long after an instant the delivered messages were first
// received: the first, the median and the last.
type spread struct{ first, p50, max time.Duration }

// since returns when, after t0, the delivered messages were first received.
func (t *tracker) since(t0 time.Time) spread {
	var ds []int64
	for i := 0; i < t.n; i++ {
		if t.count[i].Load() > 0 {
			ds = append(ds, t.recv[i].Load()-t0.UnixNano())
		}
	}
	if len(ds) == 0 {
		return spread{}
	}
	slices.Sort(ds)
	return spread{first: time.Duration(ds[0]), p50: time.Duration(pct(ds, .5)), max: time.Duration(ds[len(ds)-1])}
}

// pct returns the p-quantile of sorted xs (nearest rank).
func pct(xs []int64, p float64) int64 {
	i := int(math.Ceil(p*float64(len(xs)))) - 1
	return xs[max(0, min(i, len(xs)-1))]
}

func median(xs []float64) float64 {
	var v []float64
	for _, x := range xs {
		if !math.IsNaN(x) {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return math.NaN()
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}
