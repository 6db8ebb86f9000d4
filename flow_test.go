package delaystream_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/admin"
	"github.com/delaystream/delaystream/internal/margin"
	"github.com/delaystream/delaystream/internal/redistest"
	"github.com/delaystream/delaystream/internal/stream"
)

// flowProc is one process of the flow tests: a Queue with group "g".
type flowProc struct {
	q    *delaystream.Queue
	g    *delaystream.Group
	stop context.CancelFunc
	done chan error
}

func startFlowProc(t *testing.T, rdb redis.UniversalClient, prefix string, h delaystream.Handler, opts ...delaystream.GroupOption) *flowProc {
	t.Helper()
	p := &flowProc{done: make(chan error, 1)}
	var err error
	p.q, err = delaystream.New(rdb, "jobs", delaystream.WithPrefix(prefix), quiet,
		delaystream.WithDrainTimeout(5*time.Second))
	require.NoError(t, err)
	p.g, err = p.q.Handle("g", h, opts...)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	p.stop = cancel
	go func() { p.done <- p.q.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-p.done })
	return p
}

// running counts the handlers running at once and the most seen.
type running struct {
	now, most atomic.Int64
}

func (r *running) enter() {
	n := r.now.Add(1)
	for {
		m := r.most.Load()
		if n <= m || r.most.CompareAndSwap(m, n) {
			return
		}
	}
}

func (r *running) leave() { r.now.Add(-1) }

// A concurrency cap holds across two processes: at most m handlers run at
// once in both together, the entries over the cap stay unread in the
// stream (not pending with a consumer), and everything is handled once.
func TestConcurrencyLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	const limit, n = 3, 24
	var run running
	h := &handled{}
	release := make(chan struct{})
	handler := func(ctx context.Context, d *delaystream.Delivery) error {
		run.enter()
		defer run.leave()
		h.add(d)
		select {
		case <-release:
		case <-ctx.Done(): // the drain timeout, when the test failed
		}
		return nil
	}
	a := startFlowProc(t, rdb, prefix, handler, delaystream.WithWorkers(8), delaystream.WithConcurrencyLimit(limit))
	b := startFlowProc(t, rdb, prefix, handler, delaystream.WithWorkers(8), delaystream.WithConcurrencyLimit(limit))
	scheduleN(t, a.q, "m", n, 0)

	require.Eventually(t, func() bool { return run.now.Load() == limit }, 10*time.Second, 10*time.Millisecond)
	in, err := admin.New(rdb, prefix)
	require.NoError(t, err)
	gs, err := in.Groups(ctx, "jobs")
	require.NoError(t, err)
	require.Len(t, gs, 1)
	assert.Equal(t, limit, gs[0].ConcurrencyLimit, "the limits are recorded")
	assert.EqualValues(t, limit, gs[0].SlotsHeld)
	assert.Zero(t, gs[0].RatePerSecond)
	require.Eventually(t, func() bool {
		st, err := a.g.Stats(ctx)
		return err == nil && st.Lag == n-limit
	}, 10*time.Second, 10*time.Millisecond, "all promoted, the rest unread")
	st, err := a.g.Stats(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, limit, st.Pending, "only the running entries are taken")

	for i := range n { // one release per handler run
		select {
		case release <- struct{}{}:
		case <-time.After(10 * time.Second):
			t.Fatalf("no handler to release after %d (handled %d)", i, h.count("m"))
		}
	}
	require.Eventually(t, func() bool { return run.now.Load() == 0 }, 10*time.Second, 10*time.Millisecond)
	assert.EqualValues(t, limit, run.most.Load(), "never more than the cap at once")
	h.checkOnce(t, "m", n)
	assert.Positive(t, a.g.Counters().LimitWait+b.g.Counters().LimitWait, "waiting is counted")
}

// A consumer that dies holding slots gives them back within the
// visibility timeout: another one, capped at the same limit, starts
// nothing until the dead one's slots lapse, then takes over its entries
// and handles everything once.
func TestConcurrencyLimitDeadConsumer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	const limit, n = 2, 6
	vis := time.Second

	// The dead consumer: the group exists, two entries are pending with
	// it, and it holds both slots, until the deadline its last call set.
	q, err := delaystream.New(rdb, "jobs", delaystream.WithPrefix(prefix), delaystream.WithoutPromotion())
	require.NoError(t, err)
	scheduleN(t, q, "m", n, 0)
	layout, err := stream.NewLayout(prefix, "jobs", 1)
	require.NoError(t, err)
	k := layout.Shard(0)
	// Promote by hand what is due (this process runs no mover yet).
	mover, err := delaystream.New(rdb, "jobs", delaystream.WithPrefix(prefix))
	require.NoError(t, err)
	mctx, stopMover := context.WithCancel(ctx)
	moverDone := make(chan error, 1)
	require.NoError(t, rdb.XGroupCreateMkStream(ctx, k.Main().Stream, "g", "0").Err())
	go func() { moverDone <- mover.Run(mctx) }()
	require.Eventually(t, func() bool { return rdb.XLen(ctx, k.Main().Stream).Val() == n }, 10*time.Second, 10*time.Millisecond)
	stopMover()
	require.NoError(t, <-moverDone)
	require.NoError(t, rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: "dead", Streams: []string{k.Main().Stream, ">"},
		Count: limit, Block: -1}).Err())
	now, err := rdb.Time(ctx).Result()
	require.NoError(t, err)
	deadline := now.Add(vis)
	require.NoError(t, rdb.HSet(ctx, k.Flow("g"), "c:dead", fmt.Sprintf("%d %d", limit, deadline.UnixMicro())).Err())

	var run running
	h := &handled{}
	var mu sync.Mutex
	var starts []time.Time
	p := startFlowProc(t, rdb, prefix, func(_ context.Context, d *delaystream.Delivery) error {
		run.enter()
		defer run.leave()
		mu.Lock()
		starts = append(starts, time.Now())
		mu.Unlock()
		h.add(d)
		return nil
	}, delaystream.WithWorkers(4), delaystream.WithConcurrencyLimit(limit), delaystream.WithVisibilityTimeout(vis),
		delaystream.WithReclaimInterval(100*time.Millisecond))
	require.Eventually(t, func() bool { return h.count("m") == n }, 10*time.Second, 10*time.Millisecond)
	h.checkOnce(t, "m", n)
	mu.Lock()
	first := slices.MinFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	mu.Unlock()
	assert.False(t, first.Before(deadline), "started %s before the dead consumer's slots lapsed", deadline.Sub(first))
	assert.LessOrEqual(t, run.most.Load(), int64(limit))
	assert.Positive(t, p.g.Counters().Reclaimed, "the dead consumer's entries were taken over")
	require.Eventually(t, func() bool {
		st, err := p.g.Stats(ctx)
		return err == nil && st.Pending == 0
	}, 10*time.Second, 10*time.Millisecond, "everything acknowledged")
}

// A rate limit holds across three processes: starts in any window of
// length w are at most burst + rate·(w + startLag + the scheduling lag
// met), startLag being the slack for the scheduling between a permit and
// the handler's start on an idle machine, and everything is handled once.
func TestRateLimit(t *testing.T) {
	const startLag = 150 * time.Millisecond
	t.Parallel()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	const rate, burst, n = 40, 4, 100
	h := &handled{}
	var mu sync.Mutex
	var starts []time.Time
	handler := func(_ context.Context, d *delaystream.Delivery) error {
		mu.Lock()
		starts = append(starts, time.Now())
		mu.Unlock()
		h.add(d)
		return nil
	}
	var ps []*flowProc
	for range 3 {
		ps = append(ps, startFlowProc(t, rdb, prefix, handler, delaystream.WithWorkers(8), delaystream.WithRateLimit(rate, time.Second, burst)))
	}
	lag := margin.WatchLag(t)
	scheduleN(t, ps[0].q, "m", n, 0)
	require.Eventually(t, func() bool { return h.count("m") == n }, 20*time.Second, 10*time.Millisecond)
	// The scheduling lag met while the messages were handled: a handler
	// starts after its permit by about that much more on a loaded machine.
	met := lag()
	in, err := admin.New(rdb, prefix)
	require.NoError(t, err)
	gs, err := in.Groups(context.Background(), "jobs")
	require.NoError(t, err)
	require.Len(t, gs, 1)
	assert.InDelta(t, rate, gs[0].RatePerSecond, 1e-9, "the limits are recorded")
	assert.Equal(t, burst, gs[0].RateBurst)
	assert.Zero(t, gs[0].ConcurrencyLimit)
	require.Eventually(t, func() bool { // reported with each consumer's next call (or its stale-state flush)
		gs, err := in.Groups(context.Background(), "jobs")
		return err == nil && gs[0].LimitWaitMs > 0
	}, 10*time.Second, 20*time.Millisecond, "the time waited is recorded for the views")
	h.checkOnce(t, "m", n)

	mu.Lock()
	defer mu.Unlock()
	slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	took := starts[n-1].Sub(starts[0])
	// (n - burst) / rate at least; without the limit it takes milliseconds.
	assert.GreaterOrEqual(t, took, time.Duration(n-burst)*time.Second/rate*9/10)
	for _, w := range []time.Duration{100 * time.Millisecond, 500 * time.Millisecond, time.Second} {
		most := 0
		for i := range starts {
			j := i
			for j < len(starts) && starts[j].Sub(starts[i]) < w {
				j++
			}
			most = max(most, j-i)
		}
		// Permits are granted by the Redis clock; a handler starts after its
		// permit by the time its worker takes to be scheduled, which load
		// stretches. Starts within w come from permits granted within w plus
		// that lag: startLag, plus the scheduling lag the process met.
		allowed := burst + int(math.Ceil(rate*float64(w+startLag+met)/float64(time.Second)))
		margin.LessOrEqual(t, "rate limit starts within "+w.String(), most, allowed, "starts within %s (scheduling lag met %s)", w, met)
		t.Logf("most starts within %s: %d (limit %d + burst %d; scheduling lag met %s)", w, most, int(rate*w/time.Second), burst, met)
	}
	var waited time.Duration
	for _, p := range ps {
		waited += p.g.Counters().LimitWait
	}
	assert.Positive(t, waited)
}

// Slow work spreads over the group: two processes of 8 workers each and
// 24 messages whose handlers run until released. 16 run at once, one per
// worker across both processes, and the other 8 stay unread in the stream
// (no consumer holds them queued behind its busy workers); when the first
// 16 finish, the other 8 start, and everything is handled once.
func TestSlowWorkSpreads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	const workers, n = 8, 24
	var run running
	h := &handled{}
	release := make(chan struct{})
	handler := func(ctx context.Context, d *delaystream.Delivery) error {
		run.enter()
		defer run.leave()
		h.add(d)
		select {
		case <-release:
		case <-ctx.Done(): // the drain timeout, when the test failed
		}
		return nil
	}
	a := startFlowProc(t, rdb, prefix, handler, delaystream.WithWorkers(workers))
	b := startFlowProc(t, rdb, prefix, handler, delaystream.WithWorkers(workers))
	scheduleN(t, a.q, "m", n, 0)

	require.Eventually(t, func() bool { return run.now.Load() == 2*workers }, 10*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool {
		st, err := a.g.Stats(ctx)
		return err == nil && st.Lag == n-2*workers
	}, 10*time.Second, 10*time.Millisecond, "the rest stays unread")
	st, err := a.g.Stats(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 2*workers, st.Pending, "only the running entries are taken")
	assert.EqualValues(t, workers, a.g.Counters().Delivered)
	assert.EqualValues(t, workers, b.g.Counters().Delivered)

	for i := range 2 * workers { // the first round ends
		select {
		case release <- struct{}{}:
		case <-time.After(10 * time.Second):
			t.Fatalf("no handler to release after %d", i)
		}
	}
	require.Eventually(t, func() bool { return h.count("m") == n && run.now.Load() == n-2*workers }, 10*time.Second, 10*time.Millisecond,
		"the second round runs at once")
	close(release)
	require.Eventually(t, func() bool { return run.now.Load() == 0 }, 10*time.Second, 10*time.Millisecond)
	h.checkOnce(t, "m", n)
}

// A per-key rate limit spaces the starts of each key's messages by its
// interval (burst 1), keys apart from one another, and handles every
// message once; a message without a key is not limited.
func TestKeyRateLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	const perKey = 3
	interval := time.Second
	var mu sync.Mutex
	starts := map[string][]time.Time{}
	h := &handled{}
	p := startFlowProc(t, rdb, prefix, func(_ context.Context, d *delaystream.Delivery) error {
		mu.Lock()
		starts[d.Headers["customer"]] = append(starts[d.Headers["customer"]], time.Now())
		mu.Unlock()
		h.add(d)
		return nil
	}, delaystream.WithWorkers(8), delaystream.WithKeyRateLimit(func(d *delaystream.Delivery) string { return d.Headers["customer"] },
		1, interval, 1))
	var items []delaystream.Item
	for _, c := range []string{"a", "b"} {
		for i := range perKey {
			items = append(items, delaystream.Item{Message: delaystream.Message{ID: fmt.Sprintf("m%s%d", c, i),
				Headers: map[string]string{"customer": c}}, When: delaystream.After(0)})
		}
	}
	items = append(items, delaystream.Item{Message: delaystream.Message{ID: "free"}, When: delaystream.After(0)})
	scheduled := time.Now()
	_, err := p.q.ScheduleBatch(ctx, items)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return h.count("m") == 2*perKey && h.count("free") == 1 }, 20*time.Second, 10*time.Millisecond)
	for _, c := range []string{"a", "b"} {
		for i := range perKey {
			assert.Len(t, h.at[fmt.Sprintf("m%s%d", c, i)], 1)
		}
	}
	assert.Empty(t, h.early)
	mu.Lock()
	defer mu.Unlock()
	for _, c := range []string{"a", "b"} {
		ts := starts[c]
		require.Len(t, ts, perKey)
		slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
		for i := 1; i < len(ts); i++ {
			// A key's i-th permit is i intervals after its first, which
			// is no earlier than the scheduling (by the Redis clock, on
			// this host; its whole milliseconds allowed for), and a
			// message starts no earlier than its permit. Lateness (the
			// snooze's promotion, a loaded machine) may bring two starts
			// closer than an interval: the limit holds on the permits.
			assert.GreaterOrEqual(t, ts[i].Sub(scheduled), time.Duration(i)*interval-2*time.Millisecond,
				"customer %s: start %d no earlier than its permit", c, i)
		}
	}
	// One permit for both keys would start one key's first message an
	// interval or more after the other's; both are due at once.
	margin.Less(t, "key rate limit: first starts of two keys apart", starts["a"][0].Sub(starts["b"][0]).Abs(), interval, "keys are limited apart")
}
