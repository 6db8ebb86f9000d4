package group_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/internal/group"
	"github.com/delaystream/delaystream/internal/stream"
)

// Three groups, 10k messages, nothing fails: every group handles every
// message exactly once (group "c" with two consumers sharing the work), and
// the consumers' counters agree with what the handlers saw.
func TestFanOutExactlyOncePerGroup(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	const n = 10_000
	h.startMover()

	type key struct{ group, id string }
	var mu sync.Mutex
	seen := map[key]int{}
	var total atomic.Int64
	handler := func(g string) group.Handler {
		return func(_ context.Context, m *group.Message) error {
			mu.Lock()
			seen[key{g, m.ID}]++
			mu.Unlock()
			total.Add(1)
			return nil
		}
	}
	cons := map[string][]*group.Consumer{}
	var runs []*runner
	for _, g := range []string{"a", "b", "c", "c"} {
		c := h.consumer(g, handler(g), group.WithWorkers(32))
		cons[g] = append(cons[g], c)
		runs = append(runs, start(t, c.Run))
	}
	// Scheduled after the groups exist or not: groups start at the
	// beginning of the stream, so either way nothing is missed.
	h.schedule(ids("m", n), 0)

	waitFor(t, 60*time.Second, func() bool { return total.Load() >= 3*n }, "handled %d of %d", total.Load(), 3*n)
	stopAll(t, runs...)

	mu.Lock()
	defer mu.Unlock()
	assert.Len(t, seen, 3*n, "distinct (group, id) pairs")
	for k, v := range seen {
		if v != 1 {
			t.Errorf("%s/%s handled %d times", k.group, k.id, v)
		}
	}
	assert.EqualValues(t, 3*n, total.Load(), "handler calls in all")
	for g, cs := range cons {
		var sum group.Counters
		for _, c := range cs {
			sum = addCounters(sum, c.Counters())
		}
		assert.Equal(t, group.Counters{Delivered: n, Acked: n}, sum, "group %s counters", g)
		st, err := cs[0].Stats(ctx)
		require.NoError(t, err)
		assert.Zero(t, st.Pending, "group %s: nothing left pending, so nothing can be redelivered", g)
		assert.Zero(t, st.Lag, "group %s lag", g)
		assert.Zero(t, st.RetryWaiting, "group %s retries", g)
		assert.Zero(t, st.DeadLetters, "group %s dead letters", g)
	}
	if len(cons["c"]) == 2 {
		t.Logf("group c split: %d / %d", cons["c"][0].Counters().Acked, cons["c"][1].Counters().Acked)
	}
}

// Group A fails every first attempt; group B succeeds. A sees each message
// twice (attempt 1 from the queue stream, attempt 2 from its retry lane),
// never before the backoff; B sees each once and never sees a retry.
func TestRetryIsPerGroupAndNeverEarly(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	const n = 100
	const backoff = 300 * time.Millisecond
	h.startMover()

	type failure struct {
		local time.Time // local wall clock just before returning the error
		redis time.Time // Redis clock just before returning the error
	}
	recA, recB := newRecorder(), newRecorder()
	var fmu sync.Mutex
	failures := map[string]failure{}
	var retryIn sync.Map
	a := h.consumer("a", func(ctx context.Context, m *group.Message) error {
		recA.add(m)
		if m.Attempt == 1 {
			now, err := h.rdb.Time(ctx).Result() // not require: this is not the test goroutine
			f := failure{redis: now, local: time.Now().Round(0)}
			if err != nil {
				return fmt.Errorf("redis TIME: %w", err)
			}
			fmu.Lock()
			failures[m.ID] = f
			fmu.Unlock()
			return errors.New("first attempt fails")
		}
		return nil
	}, group.WithBackoff(group.ConstantBackoff(backoff)), group.WithHooks(group.Hooks{
		OnFailed: func(m *group.Message, _ error, in time.Duration) { retryIn.Store(m.ID, in) },
	}))
	var bDelivered, bAcked atomic.Int64
	b := h.consumer("b", recB.ack, group.WithBackoff(group.ConstantBackoff(backoff)), group.WithHooks(group.Hooks{
		OnDelivered: func(*group.Message) { bDelivered.Add(1) },
		OnAcked:     func(*group.Message, time.Duration) { bAcked.Add(1) },
	}))
	ra, rb := start(t, a.Run), start(t, b.Run)
	h.schedule(ids("m", n), 0)

	waitFor(t, 20*time.Second, func() bool { return recA.total() >= 2*n && recB.total() >= n })
	stopAll(t, ra, rb)

	for id, ds := range recA.snapshot() {
		require.Len(t, ds, 2, "group a deliveries of %s", id)
		first, second := ds[0], ds[1]
		assert.Equal(t, 1, first.Attempt, id)
		assert.Equal(t, 2, second.Attempt, id)
		assert.Equal(t, h.mainStream(), first.Stream, id)
		assert.Equal(t, h.retryStream("a"), second.Stream, id)
		assert.Equal(t, []byte(id), second.Payload, id)
		fmu.Lock()
		f := failures[id]
		fmu.Unlock()
		require.False(t, f.redis.IsZero(), id)
		// Redis clock, no tolerance: the retry is due no sooner than the
		// failure plus the backoff, and is appended no sooner than due.
		assert.GreaterOrEqual(t, second.Due.UnixMicro(), f.redis.Add(backoff).UnixMicro(), "%s: retry due before failure+backoff", id)
		entered := stream.EntryTime(second.EntryID)
		assert.False(t, entered.Before(second.Due), "%s: retry appended at %s before due %s", id, entered, second.Due)
		assert.GreaterOrEqual(t, entered.Sub(stream.EntryTime(first.EntryID)), backoff, "%s: retry entry vs first entry", id)
		// Local wall clock (the same host clock Redis reads).
		assert.GreaterOrEqual(t, second.At.Sub(f.local), backoff, "%s: retry received %s after the failure", id, second.At.Sub(f.local))
		v, ok := retryIn.Load(id)
		assert.True(t, ok && v.(time.Duration) == backoff, "%s: OnFailed retryIn %v", id, v)
	}
	assert.Len(t, recA.snapshot(), n)
	for id, ds := range recB.snapshot() {
		require.Len(t, ds, 1, "group b deliveries of %s", id)
		assert.Equal(t, 1, ds[0].Attempt)
		assert.Equal(t, h.mainStream(), ds[0].Stream)
	}
	assert.Len(t, recB.snapshot(), n)

	assert.Equal(t, group.Counters{Delivered: 2 * n, Acked: n, Failed: n, Retried: n}, a.Counters())
	assert.Equal(t, group.Counters{Delivered: n, Acked: n}, b.Counters())
	assert.EqualValues(t, n, bDelivered.Load(), "OnDelivered")
	assert.EqualValues(t, n, bAcked.Load(), "OnAcked")
	// B's retry lane never held anything: A's failures cannot reach B.
	infoB, err := h.rdb.XInfoStream(ctx, h.retryStream("b")).Result()
	require.NoError(t, err)
	assert.Zero(t, infoB.EntriesAdded, "entries ever added to b's retry lane")
	exists, err := h.rdb.Exists(ctx, h.retryDelayed("b")).Result()
	require.NoError(t, err)
	assert.Zero(t, exists, "b's retry delayed set exists")
	infoA, err := h.rdb.XInfoStream(ctx, h.retryStream("a")).Result()
	require.NoError(t, err)
	assert.EqualValues(t, n, infoA.EntriesAdded, "entries ever added to a's retry lane")
	assert.Zero(t, h.pending(h.mainStream(), "a")+h.pending(h.retryStream("a"), "a")+h.pending(h.mainStream(), "b"))
}

// A handler running four times the visibility timeout keeps its entry: the
// consumer extends its hold, so the other consumer of the group (reclaiming
// every 20 ms) never takes it, and the message is handled exactly once.
func TestLongHandlerKeepsItsEntry(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	const n = 4
	// A second is long enough that a loaded machine's scheduling delays do
	// not stretch one extension interval (a third of it) past it; the work
	// spans four timeouts, so a lease that is not extended is reclaimed.
	const visibility = time.Second
	const work = 4 * visibility
	h.startMover()

	var mu sync.Mutex
	starts := map[string]int{}
	var done, cancelled atomic.Int64
	handler := func(ctx context.Context, m *group.Message) error {
		mu.Lock()
		starts[m.ID]++
		mu.Unlock()
		select {
		case <-time.After(work): // the work itself
			done.Add(1)
			return nil
		case <-ctx.Done():
			cancelled.Add(1)
			return ctx.Err()
		}
	}
	var cs []*group.Consumer
	var rs []*runner
	for i := range 2 {
		c := h.consumer("g", handler, group.WithConsumerName(fmt.Sprint("c", i)), group.WithWorkers(n),
			group.WithVisibilityTimeout(visibility), group.WithReclaimInterval(20*time.Millisecond))
		cs = append(cs, c)
		rs = append(rs, start(t, c.Run))
	}
	h.schedule(ids("long", n), 0)

	// Watch the entries' idle time as Redis sees it while the handlers run.
	var maxIdle time.Duration
	waitFor(t, 3*work, func() bool {
		p, err := h.rdb.XPendingExt(context.Background(), &redis.XPendingExtArgs{Stream: h.mainStream(), Group: "g", Start: "-", End: "+", Count: 100}).Result()
		if err == nil {
			for _, e := range p {
				maxIdle = max(maxIdle, e.Idle)
			}
		}
		return done.Load()+cancelled.Load() >= n
	})
	t.Logf("longest idle time of a held entry: %s (visibility %s)", maxIdle, visibility)
	assert.Less(t, maxIdle, visibility, "a held entry became reclaimable")
	stopAll(t, rs...)
	mu.Lock()
	defer mu.Unlock()
	assert.Len(t, starts, n)
	for id, k := range starts {
		assert.Equal(t, 1, k, "%s started %d times", id, k)
	}
	assert.EqualValues(t, n, done.Load())
	assert.Zero(t, cancelled.Load(), "handler contexts cancelled")
	var acked uint64
	for i, c := range cs {
		x := c.Counters()
		assert.Zero(t, x.OwnershipLost, "consumer %d lost entries", i)
		assert.Zero(t, x.Reclaimed, "consumer %d reclaimed", i)
		acked += x.Acked
	}
	assert.EqualValues(t, n, acked)
	assert.Zero(t, h.pending(h.mainStream(), "g"))
}

func addCounters(a, b group.Counters) group.Counters {
	return group.Counters{
		Delivered: a.Delivered + b.Delivered, Acked: a.Acked + b.Acked, Failed: a.Failed + b.Failed,
		Retried: a.Retried + b.Retried, DeadLettered: a.DeadLettered + b.DeadLettered,
		DeadLettersDropped: a.DeadLettersDropped + b.DeadLettersDropped, Dropped: a.Dropped + b.Dropped,
		Reclaimed: a.Reclaimed + b.Reclaimed, DeletedWhilePending: a.DeletedWhilePending + b.DeletedWhilePending,
		HandedBack: a.HandedBack + b.HandedBack, OwnershipLost: a.OwnershipLost + b.OwnershipLost, Panics: a.Panics + b.Panics,
	}
}

// A group created WithStartAtNew sees only what is promoted after it exists;
// a default group also sees what was already in the stream.
func TestStartAtNew(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	h.startMover()
	h.schedule(ids("before", 3), 0)
	waitFor(t, 10*time.Second, func() bool { l, _ := h.rdb.XLen(ctx, h.mainStream()).Result(); return l == 3 })

	recNew, recOld := newRecorder(), newRecorder()
	cn := h.consumer("new", recNew.ack, group.WithStartAtNew())
	co := h.consumer("old", recOld.ack)
	rn, ro := start(t, cn.Run), start(t, co.Run)
	waitFor(t, 10*time.Second, func() bool {
		gs, err := h.rdb.XInfoGroups(ctx, h.mainStream()).Result()
		return err == nil && len(gs) == 2
	})
	h.schedule(ids("after", 2), 0)
	waitFor(t, 10*time.Second, func() bool { return recNew.total() == 2 && recOld.total() == 5 })
	stopAll(t, rn, ro)
	assert.Equal(t, ids("after", 2), sortedKeys(recNew.snapshot()))
	assert.Len(t, recOld.snapshot(), 5)
}

// A group destroyed under a running consumer is recreated by it, and
// delivery goes on.
func TestGroupRecreatedAfterNOGROUP(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	h.startMover()
	rec := newRecorder()
	c := h.consumer("g", rec.ack)
	r := start(t, c.Run)
	h.schedule([]string{"one"}, 0)
	waitFor(t, 10*time.Second, func() bool { return rec.total() == 1 })

	require.NoError(t, h.rdb.XGroupDestroy(ctx, h.mainStream(), "g").Err())
	h.schedule([]string{"two"}, 0)
	waitFor(t, 10*time.Second, func() bool { return len(rec.get("two")) == 1 })
	r.stop(t)
	gs, err := h.rdb.XInfoGroups(ctx, h.mainStream()).Result()
	require.NoError(t, err)
	require.Len(t, gs, 1)
	assert.Equal(t, "g", gs[0].Name)
}
