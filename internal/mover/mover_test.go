package mover_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/internal/delay"
	"github.com/delaystream/delaystream/internal/margin"
	"github.com/delaystream/delaystream/internal/mover"
	"github.com/delaystream/delaystream/internal/redistest"
	"github.com/delaystream/delaystream/internal/stream"
	"github.com/delaystream/delaystream/internal/wire"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

func TestNew(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	t.Cleanup(func() { _ = rdb.Close() })
	tests := []struct {
		name  string
		rdb   redis.UniversalClient
		queue string
		opts  []mover.Option
		msg   string // substring of the error; "" = valid
	}{
		{name: "defaults", rdb: rdb, queue: "q"},
		{name: "every option", rdb: rdb, queue: "q", opts: []mover.Option{
			mover.WithPrefix("app"), mover.WithBatchSize(mover.MaxBatchSize), mover.WithMaxIdle(2 * time.Second),
			mover.WithLeaseTTL(3 * time.Second),
			mover.WithLogger(slog.Default()), mover.WithHooks(mover.Hooks{})}},
		{name: "smallest values", rdb: rdb, queue: "q", opts: []mover.Option{
			mover.WithBatchSize(1), mover.WithMaxIdle(10 * time.Millisecond), mover.WithLeaseTTL(20 * time.Millisecond)}},
		{name: "largest values", rdb: rdb, queue: "q", opts: []mover.Option{
			mover.WithMaxIdle(time.Minute), mover.WithLeaseTTL(10 * time.Minute)}},
		{name: "without lease, max idle may exceed the lease TTL", rdb: rdb, queue: "q", opts: []mover.Option{
			mover.WithoutLease(), mover.WithMaxIdle(time.Minute)}},
		{name: "nil client", rdb: nil, queue: "q", msg: "nil redis client"},
		{name: "empty queue", rdb: rdb, queue: "", msg: "queue name is empty"},
		{name: "queue with braces", rdb: rdb, queue: "{q}", msg: "queue name"},
		{name: "queue with control char", rdb: rdb, queue: "q\x00", msg: "queue name"},
		{name: "nil option", rdb: rdb, queue: "q", opts: []mover.Option{nil}, msg: "nil option"},
		{name: "bad prefix", rdb: rdb, queue: "q", opts: []mover.Option{mover.WithPrefix("a b")}, msg: "prefix name"},
		{name: "zero batch", rdb: rdb, queue: "q", opts: []mover.Option{mover.WithBatchSize(0)}, msg: "batch size must be 1..1000, got 0"},
		{name: "batch too large", rdb: rdb, queue: "q", opts: []mover.Option{mover.WithBatchSize(mover.MaxBatchSize + 1)}, msg: "batch size"},
		{name: "max idle too short", rdb: rdb, queue: "q", opts: []mover.Option{mover.WithMaxIdle(9 * time.Millisecond)}, msg: "max idle must be 10ms..1m, got 9ms"},
		{name: "max idle too long", rdb: rdb, queue: "q", opts: []mover.Option{mover.WithMaxIdle(time.Minute + 1)}, msg: "max idle"},
		{name: "lease TTL too short", rdb: rdb, queue: "q", opts: []mover.Option{mover.WithLeaseTTL(19 * time.Millisecond)}, msg: "lease TTL must be 20ms..10m, got 19ms"},
		{name: "lease TTL too long", rdb: rdb, queue: "q", opts: []mover.Option{mover.WithLeaseTTL(11 * time.Minute)}, msg: "lease TTL"},
		{name: "lease TTL equal to max idle", rdb: rdb, queue: "q", opts: []mover.Option{mover.WithLeaseTTL(time.Second)}, msg: "lease TTL 1s must exceed max idle 1s"},
		{name: "max idle above the default lease TTL", rdb: rdb, queue: "q", opts: []mover.Option{mover.WithMaxIdle(2 * time.Second)}, msg: "lease TTL 1.25s must exceed max idle 2s"},
		{name: "lease TTL below max idle", rdb: rdb, queue: "q", opts: []mover.Option{mover.WithLeaseTTL(500 * time.Millisecond), mover.WithMaxIdle(400 * time.Millisecond), mover.WithMaxIdle(600 * time.Millisecond)}, msg: "must exceed max idle"},
		{name: "nil logger", rdb: rdb, queue: "q", opts: []mover.Option{mover.WithLogger(nil)}, msg: "nil logger"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, err := mover.New(tt.rdb, tt.queue, tt.opts...)
			if tt.msg == "" {
				require.NoError(t, err)
				require.NotNil(t, m)
				assert.Equal(t, mover.Counters{}, m.Counters())
				return
			}
			require.Error(t, err)
			assert.Nil(t, m)
			assert.ErrorIs(t, err, mover.ErrInvalidOption)
			assert.Contains(t, err.Error(), tt.msg)
		})
	}
}

// events collects OnLease calls of one or more movers.
type events struct {
	ch chan leaseEvent
}

type leaseEvent struct {
	mover string
	owner bool
	at    time.Time
}

func newEvents() *events { return &events{ch: make(chan leaseEvent, 100)} }

func (e *events) hooks(name string) mover.Hooks {
	return mover.Hooks{OnLease: func(lane string, owner bool) {
		e.ch <- leaseEvent{mover: name, owner: owner, at: time.Now()}
	}}
}

func (e *events) next(t *testing.T, within time.Duration) leaseEvent {
	t.Helper()
	select {
	case ev := <-e.ch:
		return ev
	case <-time.After(within):
		require.FailNow(t, "no lease event", "within %s", within)
		return leaseEvent{}
	}
}

// run starts m.Run in a goroutine and returns a function that cancels it
// and returns how long Run took to return and Run's error.
func run(t *testing.T, m *mover.Mover) (stop func() (time.Duration, error)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	var once sync.Once
	var err error
	var took time.Duration
	stop = func() (time.Duration, error) {
		once.Do(func() {
			start := time.Now()
			cancel()
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				err = fmt.Errorf("Run did not return within 10s of cancel")
			}
			took = time.Since(start)
		})
		return took, err
	}
	t.Cleanup(func() { _, _ = stop() })
	return stop
}

// countCalls counts promote calls (EVALSHA) sent through a client (n),
// and those that got their reply (done).
type countCalls struct{ n, done atomic.Int64 }

func (h *countCalls) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *countCalls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() != "evalsha" {
			return next(ctx, cmd)
		}
		h.n.Add(1)
		defer h.done.Add(1)
		return next(ctx, cmd)
	}
}
func (h *countCalls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func TestRunTwice(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	calls := &countCalls{}
	rdb.AddHook(calls)
	m, err := mover.New(rdb, "q", mover.WithPrefix(redistest.Prefix(t)))
	require.NoError(t, err)

	stop := run(t, m)
	require.Eventually(t, func() bool { return calls.n.Load() >= 1 }, 5*time.Second, 5*time.Millisecond, "running")
	err = m.Run(context.Background())
	assert.ErrorIs(t, err, mover.ErrRunning)
	_, err = stop()
	require.NoError(t, err)

	// A stopped Mover can run again.
	before := calls.n.Load()
	stop = run(t, m)
	require.Eventually(t, func() bool { return calls.n.Load() > before }, 5*time.Second, 5*time.Millisecond, "running again")
	_, err = stop()
	require.NoError(t, err)
}

func TestRunStopsPromptly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	ev := newEvents()
	m, err := mover.New(rdb, "q", mover.WithPrefix(prefix), mover.WithHooks(ev.hooks("m")),
		mover.WithMaxIdle(30*time.Second), mover.WithLeaseTTL(time.Minute))
	require.NoError(t, err)
	keys, err := stream.NewKeys(prefix, "q", 0, 1)
	require.NoError(t, err)
	// One entry due now and one in 20 s: the mover takes the lease for the
	// first and keeps it while it sleeps until the second.
	q, err := delay.New(rdb, "q", delay.WithPrefix(prefix))
	require.NoError(t, err)
	_, err = q.ScheduleBatch(ctx, []delay.Item{{When: delay.After(0)}, {When: delay.After(20 * time.Second)}})
	require.NoError(t, err)

	stop := run(t, m)
	require.True(t, ev.next(t, 5*time.Second).owner)
	holder, err := rdb.Get(ctx, keys.Main().Lease).Result()
	require.NoError(t, err)
	require.NotEmpty(t, holder)

	// The mover now sleeps for up to 30 s; cancelling must end Run at once
	// (a lease release: far below the sleep, whatever the load).
	took, err := stop()
	require.NoError(t, err, "a requested stop is not an error")
	margin.Less(t, "Run after cancel", took, 5*time.Second, "Run returned %s after cancel", took)
	_, err = rdb.Get(ctx, keys.Main().Lease).Result()
	assert.ErrorIs(t, err, redis.Nil, "the lease is released on stop")

	t.Run("already cancelled", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		start := time.Now()
		assert.NoError(t, m.Run(cctx))
		margin.Less(t, "Run already cancelled", time.Since(start), 5*time.Second)
	})
}

// runDelivers schedules n messages due over the next moments and checks the
// mover delivers every one, exactly once and never early.
func runDelivers(t *testing.T, rdb redis.UniversalClient, prefix string) {
	ctx := context.Background()
	q, err := delay.New(rdb, "q", delay.WithPrefix(prefix))
	require.NoError(t, err)
	const n = 200
	items := make([]delay.Item, n)
	for i := range items {
		items[i] = delay.Item{Message: delay.Message{ID: fmt.Sprint("m-", i), Payload: []byte{byte(i)}},
			When: delay.After(time.Duration(i) * time.Millisecond)}
	}
	_, err = q.ScheduleBatch(ctx, items)
	require.NoError(t, err)
	m, err := mover.New(rdb, "q", mover.WithPrefix(prefix), mover.WithBatchSize(50))
	require.NoError(t, err)
	stop := run(t, m)

	key := q.Keys().Main().Stream
	require.Eventually(t, func() bool {
		l, err := rdb.XLen(ctx, key).Result()
		return err == nil && l == n
	}, 10*time.Second, 5*time.Millisecond)
	_, err = stop()
	require.NoError(t, err)

	msgs, err := rdb.XRange(ctx, key, "-", "+").Result()
	require.NoError(t, err)
	require.Len(t, msgs, n, "exactly once")
	seen := map[string]bool{}
	for _, x := range msgs {
		e, err := wire.Decode(key, x.ID, x.Values)
		require.NoError(t, err)
		assert.False(t, seen[e.Envelope.ID], "duplicate %s", e.Envelope.ID)
		seen[e.Envelope.ID] = true
		assert.False(t, e.Appended().Before(e.Envelope.Due), "%s early: appended %v, due %v", e.Envelope.ID, e.Appended(), e.Envelope.Due)
	}
	left, err := q.Len(ctx)
	require.NoError(t, err)
	assert.Zero(t, left)
	c := m.Counters()
	assert.Equal(t, uint64(n), c.Promoted)
	assert.Zero(t, c.Quarantined)
	assert.Zero(t, c.Errors)
	assert.GreaterOrEqual(t, c.Batches, uint64(n/50))
}

func TestRunDelivers(t *testing.T) {
	t.Parallel()
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		runDelivers(t, redistest.Client(t), redistest.Prefix(t))
	})
	t.Run("miniredis", func(t *testing.T) {
		t.Parallel()
		mr := miniredis.RunT(t)
		rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
		t.Cleanup(func() { _ = rdb.Close() })
		runDelivers(t, rdb, "mini")
	})
}

func TestRunQuarantineIsLogged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	keys, err := stream.NewKeys(prefix, "q", 0, 1)
	require.NoError(t, err)
	lane := keys.Main()
	require.NoError(t, rdb.ZAdd(ctx, lane.Delayed, redis.Z{Member: "orphan", Score: 1}).Err())

	logs := &syncBuffer{}
	quarantined := make(chan int, 10)
	m, err := mover.New(rdb, "q", mover.WithPrefix(prefix),
		mover.WithLogger(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))),
		mover.WithHooks(mover.Hooks{OnPromote: func(_ string, _, q int, _ time.Duration) { quarantined <- q }}))
	require.NoError(t, err)
	stop := run(t, m)
	select {
	case n := <-quarantined:
		assert.Equal(t, 1, n)
	case <-time.After(5 * time.Second):
		require.FailNow(t, "nothing quarantined")
	}
	_, err = stop()
	require.NoError(t, err)
	assert.Equal(t, uint64(1), m.Counters().Quarantined)
	out := logs.String()
	assert.Contains(t, out, "level=WARN msg=\"entries quarantined\"")
	assert.Contains(t, out, "queue=q")
	assert.Contains(t, out, "quarantine="+lane.Quarantine)
	qs, err := stream.ReadQuarantine(ctx, rdb, lane.Quarantine, "", 10)
	require.NoError(t, err)
	require.Len(t, qs, 1)
	assert.Equal(t, "missing envelope", qs[0].Reason)
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestLeaseOneOwner(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	prefix := redistest.Prefix(t)
	ev := newEvents()
	// A long lease: without the release wake-up, a takeover would take
	// up to 10 s.
	opts := []mover.Option{mover.WithPrefix(prefix), mover.WithLeaseTTL(10 * time.Second)}
	movers := map[string]*mover.Mover{}
	calls := map[string]*countCalls{}
	stops := map[string]func() (time.Duration, error){}
	for _, name := range []string{"a", "b"} {
		rdb := redistest.Client(t)
		calls[name] = &countCalls{}
		rdb.AddHook(calls[name])
		m, err := mover.New(rdb, "q", append(opts, mover.WithHooks(ev.hooks(name)))...)
		require.NoError(t, err)
		movers[name] = m
	}
	for name, m := range movers {
		stops[name] = run(t, m)
	}
	rdb := redistest.Client(t)
	q, err := delay.New(rdb, "q", delay.WithPrefix(prefix))
	require.NoError(t, err)
	wake := q.Keys().Main().Wake
	require.Eventually(t, func() bool {
		n, err := rdb.PubSubNumSub(ctx, wake).Result()
		return err == nil && n[wake] == 2 && calls["a"].n.Load() >= 1 && calls["b"].n.Load() >= 1
	}, 5*time.Second, 5*time.Millisecond, "both movers subscribed and checked the lane")
	select {
	case e := <-ev.ch:
		require.FailNow(t, "a lease taken with nothing due", "%+v", e)
	default:
	}

	// Work arrives: both are woken, one takes the lease and promotes it all.
	items := make([]delay.Item, 20)
	for i := range items {
		items[i] = delay.Item{When: delay.After(0)}
	}
	_, err = q.ScheduleBatch(ctx, items)
	require.NoError(t, err)
	first := ev.next(t, 5*time.Second)
	require.True(t, first.owner)
	owner, standby := first.mover, map[string]string{"a": "b", "b": "a"}[first.mover]
	require.Eventually(t, func() bool { return movers[owner].Counters().Promoted == 20 }, 5*time.Second, 5*time.Millisecond)
	assert.Zero(t, movers[standby].Counters().Promoted, "only the owner promotes")
	select {
	case e := <-ev.ch:
		require.FailNow(t, "unexpected lease event", "%+v", e)
	default:
	}

	// The owner stops: it releases the lease and publishes "0", so the
	// standby promotes the next entry at once instead of after the 10 s
	// lease.
	_, err = stops[owner]()
	require.NoError(t, err)
	stopped := time.Now()
	_, err = q.Schedule(ctx, delay.Message{ID: "after-takeover"}, delay.After(0))
	require.NoError(t, err)
	next := ev.next(t, 5*time.Second)
	assert.Equal(t, leaseEvent{mover: standby, owner: true, at: next.at}, next)
	// At once: a round trip, where the lease would hold for 10 s.
	margin.Less(t, "takeover after release", next.at.Sub(stopped), 3*time.Second, "takeover after %s", next.at.Sub(stopped))
	require.Eventually(t, func() bool { return movers[standby].Counters().Promoted == 1 }, 5*time.Second, 5*time.Millisecond)
	assert.Equal(t, uint64(20), movers[owner].Counters().Promoted)
}

// A lease left by a crashed mover (no release) is taken over when it lapses.
func TestLeaseTakeoverAfterCrash(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	q, err := delay.New(rdb, "q", delay.WithPrefix(prefix))
	require.NoError(t, err)
	_, err = q.Schedule(ctx, delay.Message{ID: "waiting"}, delay.After(0))
	require.NoError(t, err)

	const crashedTTL = 400 * time.Millisecond
	// The lease lapses a TTL after Redis ran the SET: no sooner than a TTL
	// after it was sent.
	set := time.Now()
	require.NoError(t, rdb.Set(ctx, q.Keys().Main().Lease, "crashed-mover", crashedTTL).Err())
	ev := newEvents()
	m, err := mover.New(rdb, "q", mover.WithPrefix(prefix), mover.WithHooks(ev.hooks("m")))
	require.NoError(t, err)
	run(t, m)

	e := ev.next(t, 5*time.Second)
	require.True(t, e.owner)
	took := e.at.Sub(set)
	assert.GreaterOrEqual(t, took, crashedTTL-time.Millisecond, "not before the crashed lease lapsed (causal: no margin for load)")
	margin.Less(t, "takeover after lapse", took-crashedTTL, mover.DefaultLeaseTTL+time.Second, "within the lease TTL of the lapse")
	require.Eventually(t, func() bool { return m.Counters().Promoted == 1 }, 5*time.Second, 5*time.Millisecond)
}

// A sleeping mover is woken by the schedule of an earlier entry.
func TestWakeUp(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		head time.Duration // an entry already waiting; 0 = none
	}{
		{name: "nothing due"},
		{name: "next due in an hour", head: time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			rdb := redistest.Client(t)
			prefix := redistest.Prefix(t)
			q, err := delay.New(rdb, "q", delay.WithPrefix(prefix))
			require.NoError(t, err)
			if tc.head > 0 {
				_, err = q.Schedule(ctx, delay.Message{ID: "head"}, delay.After(tc.head))
				require.NoError(t, err)
			}
			calls := &countCalls{}
			mrdb := redistest.Client(t)
			mrdb.AddHook(calls)
			// Idle checks every 5 s: only a wake-up can deliver within 1 s.
			m, err := mover.New(mrdb, "q", mover.WithPrefix(prefix),
				mover.WithMaxIdle(5*time.Second), mover.WithLeaseTTL(6*time.Second))
			require.NoError(t, err)
			run(t, m)
			// Its check of the lane once subscribed (its second call) has
			// its reply: the mover sleeps (or is about to) for the max idle.
			wake := q.Keys().Main().Wake
			require.Eventually(t, func() bool {
				n, err := rdb.PubSubNumSub(ctx, wake).Result()
				return err == nil && n[wake] == 1 && calls.done.Load() >= 2
			}, 5*time.Second, 5*time.Millisecond, "the mover subscribes to its wake channel and checks the lane")

			start := time.Now()
			res, err := q.Schedule(ctx, delay.Message{ID: "soon"}, delay.After(50*time.Millisecond))
			require.NoError(t, err)
			key := q.Keys().Main().Stream
			require.Eventually(t, func() bool {
				n, err := rdb.XLen(ctx, key).Result()
				return err == nil && n == 1
			}, 5*time.Second, 2*time.Millisecond)
			took := time.Since(start)
			// Woken: far sooner than the 5 s idle check, whatever the load.
			margin.Less(t, "woken delivery", took, 2500*time.Millisecond, "delivered %s after scheduling", took)

			msgs, err := rdb.XRange(ctx, key, "-", "+").Result()
			require.NoError(t, err)
			e, err := wire.Decode(key, msgs[0].ID, msgs[0].Values)
			require.NoError(t, err)
			assert.Equal(t, "soon", e.Envelope.ID)
			assert.True(t, res.Due.Equal(e.Envelope.Due))
			assert.False(t, e.Appended().Before(e.Envelope.Due), "never early")
		})
	}
}
