package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/codec"
	"github.com/delaystream/delaystream/internal/margin"
	"github.com/delaystream/delaystream/internal/redistest"
	"github.com/delaystream/delaystream/internal/scripts"
	"github.com/delaystream/delaystream/internal/shards"
	"github.com/delaystream/delaystream/internal/stream"
	"github.com/delaystream/delaystream/internal/wire"
)

// Tests of the sharded queue: one lane per shard, the registry of live
// movers that divides a queue's main lanes between its movers, and the
// shared idle probe budget. Messages are written straight into the shards'
// delayed sets (as the schedule script writes plain members), so these
// tests depend on no producer.

func TestWithShardsOption(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, -1, stream.MaxShards + 1} {
		_, err := New(offline(t), "q", WithShards(n))
		require.ErrorIs(t, err, ErrInvalidOption, "n=%d", n)
		assert.Contains(t, err.Error(), fmt.Sprintf("shard count must be 1..%d, got %d", stream.MaxShards, n))
	}
	layout, err := stream.NewLayout("p", "q", 16)
	require.NoError(t, err)
	tests := []struct {
		name     string
		opts     []Option
		lane     func(i int) stream.Lane
		registry bool
	}{
		{"main lanes", nil, func(i int) stream.Lane { return layout.Shard(i).Main() }, true},
		{"retry lanes", []Option{WithRetryLaneOf("g")}, func(i int) stream.Lane { return layout.Shard(i).Retry("g") }, false},
		{"without lease", []Option{WithoutLease()}, func(i int) stream.Lane { return layout.Shard(i).Main() }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, err := New(offline(t), "q", append([]Option{WithPrefix("p"), WithShards(16)}, tt.opts...)...)
			require.NoError(t, err)
			assert.Equal(t, 16, m.Shards())
			require.Len(t, m.lanes, 16)
			for i, l := range m.lanes {
				assert.Equal(t, tt.lane(i), l.keys)
				assert.Equal(t, i, l.shard)
			}
			assert.Equal(t, tt.registry, m.reg != nil)
			assert.Nil(t, m.Owned(), "nothing owned before Run")
		})
	}
	m, err := New(offline(t), "q", WithPrefix("p"))
	require.NoError(t, err)
	one, err := stream.NewKeys("p", "q", 0, 1)
	require.NoError(t, err)
	assert.Equal(t, 1, m.Shards())
	require.Len(t, m.lanes, 1)
	assert.Equal(t, one.Main(), m.lanes[0].keys, "one shard: the unsharded layout")
	assert.Nil(t, m.reg, "one shard: no registry")
}

// The promote script's arguments: an unsharded queue's lane passes exactly
// what it always did; a sharded queue's lanes announce arrivals with their
// shard number; the main lanes of a sharded queue take no lease.
func TestPromoteArgs(t *testing.T) {
	t.Parallel()
	layout, err := stream.NewLayout("p", "q", 4)
	require.NoError(t, err)
	hdr := wire.Header
	tests := []struct {
		name  string
		opts  []Option
		shard int
		want  func(m *Engine) []any
	}{
		{"one shard", nil, 0, func(m *Engine) []any { return []any{256, m.token, int64(1250), hdr, "p:1:{q}:n", "0", "1"} }},
		{"one shard, retry lane", []Option{WithRetryLaneOf("g")}, 0, func(m *Engine) []any {
			return []any{256, m.token, int64(1250), hdr, "p:1:{q}:r:g:n", "0", "1"}
		}},
		{"one shard, without lease", []Option{WithoutLease()}, 0, func(m *Engine) []any { return []any{256, "", int64(1250), hdr, "p:1:{q}:n", "0", "1"} }},
		{"sharded main lane", []Option{WithShards(4)}, 2, func(m *Engine) []any {
			return []any{256, "", int64(1250), hdr, " " + layout.Shard(2).Main().Arrivals, "2", "1"}
		}},
		{"sharded retry lane", []Option{WithShards(4), WithRetryLaneOf("g")}, 3, func(m *Engine) []any {
			return []any{256, m.token, int64(1250), hdr, " " + layout.Shard(3).Retry("g").Arrivals, "3", "1"}
		}},
		{"sharded, without lease", []Option{WithShards(4), WithoutLease()}, 1, func(m *Engine) []any {
			return []any{256, "", int64(1250), hdr, " " + layout.Shard(1).Main().Arrivals, "1", "1"}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, err := New(offline(t), "q", append([]Option{WithPrefix("p")}, tt.opts...)...)
			require.NoError(t, err)
			require.NotEmpty(t, m.token)
			assert.Equal(t, tt.want(m), m.lanes[tt.shard].promoteArgs(true))
			assert.Equal(t, "0", m.lanes[tt.shard].promoteArgs(false)[6], "a lease renewed recently is left as it is")
		})
	}
}

func TestAssign(t *testing.T) {
	t.Parallel()
	owned, n := assign([]string{"c", "a", "b"}, "b", 16)
	assert.Equal(t, []int{1, 4, 7, 10, 13}, owned)
	assert.Equal(t, 3, n)
	owned, n = assign([]string{"c", "a"}, "b", 4)
	assert.Equal(t, []int{1}, owned, "a mover always counts itself")
	assert.Equal(t, 3, n)
	owned, n = assign([]string{"a", "a", "b", "b"}, "a", 4)
	assert.Equal(t, []int{0, 2}, owned, "duplicates count once")
	assert.Equal(t, 2, n)
	owned, _ = assign([]string{"a", "b", "c"}, "c", 2)
	assert.Empty(t, owned, "more movers than shards: some own none")

	// Every view shared by N movers splits n shards evenly and exactly.
	for movers := 1; movers <= 9; movers++ {
		for shards := 1; shards <= 40; shards++ {
			tokens := make([]string, movers)
			for i := range tokens {
				tokens[i] = fmt.Sprintf("%024x", (i*7919)%101)
			}
			seen := make([]int, shards)
			for _, me := range tokens {
				owned, _ := assign(tokens, me, shards)
				assert.True(t, slices.IsSorted(owned))
				assert.GreaterOrEqual(t, len(owned), shards/movers)
				assert.LessOrEqual(t, len(owned), (shards+movers-1)/movers)
				for _, i := range owned {
					seen[i]++
				}
			}
			for i, c := range seen {
				require.Equal(t, 1, c, "%d movers, %d shards: shard %d owned %d times", movers, shards, i, c)
			}
		}
	}
}

func TestProbeTiming(t *testing.T) {
	t.Parallel()
	tests := []struct {
		maxIdle     time.Duration
		n           int
		period, gap time.Duration
	}{
		{time.Second, 1, time.Second, time.Second},
		{time.Second, 8, 8 * time.Second, time.Second},
		{time.Second, 30, 30 * time.Second, time.Second},
		{time.Second, 60, 30 * time.Second, 500 * time.Millisecond},
		{time.Second, 1024, 30 * time.Second, 30 * time.Second / 1024},
		{time.Minute, 1, time.Minute, time.Minute},
		{time.Minute, 16, time.Minute, time.Minute / 16},
		{10 * time.Millisecond, 16, 160 * time.Millisecond, 10 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%d", tt.maxIdle, tt.n), func(t *testing.T) {
			period, gap := probeTiming(tt.maxIdle, tt.n)
			assert.Equal(t, tt.period, period)
			assert.Equal(t, tt.gap, gap)
			assert.LessOrEqual(t, period, max(maxProbePeriod, tt.maxIdle), "no lane waits longer than the cap")
		})
	}
}

// The movers script: it registers, renews and removes the caller, removes
// lapsed and foreign registrations, announces every change of membership
// (and only those) with the caller's token, and returns the live tokens.
func TestMoversScript(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	layout, err := stream.NewLayout(redistest.Prefix(t), "q", 8)
	require.NoError(t, err)
	key, channel := layout.Movers(), layout.MoversChannel()
	ps := rdb.Subscribe(ctx, channel)
	t.Cleanup(func() { _ = ps.Close() })
	_, err = ps.Receive(ctx) // the subscription
	require.NoError(t, err)
	announced := func() string {
		t.Helper()
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		msg, err := ps.ReceiveMessage(rctx)
		require.NoError(t, err)
		return msg.Payload
	}
	call := func(token, op string, ttl int64) []string {
		t.Helper()
		reply, err := scripts.Movers.Run(ctx, rdb, []string{key}, token, ttl, op, channel).StringSlice()
		require.NoError(t, err)
		slices.Sort(reply)
		return reply
	}
	score := func(token string) float64 {
		s, err := rdb.ZScore(ctx, key, token).Result()
		require.NoError(t, err)
		return s
	}

	assert.Equal(t, []string{"a"}, call("a", "beat", 60_000))
	assert.Equal(t, "a", announced(), "a new member is announced")
	first := score("a")
	assert.InDelta(t, float64(time.Now().Add(time.Minute).UnixMilli()), first, 5000)

	assert.Equal(t, []string{"a"}, call("a", "beat", 60_000), "a renewal")
	assert.GreaterOrEqual(t, score("a"), first)
	assert.Equal(t, []string{"a", "b"}, call("b", "beat", 60_000))
	assert.Equal(t, "b", announced(), "the renewal was not announced; b's join was")

	// A lapsed registration, and foreign members: one scored far beyond
	// any registration, one at +inf.
	now := float64(time.Now().UnixMilli())
	require.NoError(t, rdb.ZAdd(ctx, key,
		redis.Z{Member: "crashed", Score: now - 1},
		redis.Z{Member: "foreign", Score: now + 3_600_000},
		redis.Z{Member: "forever", Score: 1e300}).Err())
	assert.Equal(t, []string{"a", "b"}, call("a", "beat", 60_000))
	assert.Equal(t, "a", announced(), "removing lapsed registrations is a change")
	members, err := rdb.ZRange(ctx, key, 0, -1).Result()
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"a", "b"}, members)

	assert.Equal(t, []string{"a"}, call("b", "leave", 60_000))
	assert.Equal(t, "b", announced(), "a leave is announced")
	assert.Equal(t, []string{"a"}, call("b", "leave", 60_000), "leaving twice changes nothing")
	// A registration of 1 ms lapses at once: the next beat finds it gone.
	assert.Equal(t, []string{"a", "c"}, call("c", "beat", 1))
	assert.Equal(t, "c", announced())
	require.Eventually(t, func() bool {
		return slices.Equal([]string{"a"}, call("a", "beat", 60_000))
	}, 5*time.Second, 5*time.Millisecond)
	assert.Equal(t, "a", announced(), "c's lapse was announced, not the leave of b that changed nothing")

	_, err = scripts.Movers.Run(ctx, rdb, []string{key}, "a", 1000, "join", channel).Result()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "unknown op")
}

// runEngine runs e until the test ends, and returns functions that stop it
// cleanly and as if it crashed (no lease release, no leave), each waiting
// for Run to return nil.
func runEngine(t *testing.T, e *Engine) (stop, crash func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	var once sync.Once
	end := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				assert.NoError(t, err)
			case <-time.After(10 * time.Second):
				t.Error("Run did not return within 10 s of cancel")
			}
		})
	}
	t.Cleanup(end)
	return end, func() {
		e.noLeave.Store(true)
		end()
	}
}

// quiet is a logger for tests that expect warnings.
func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// settled reports whether the engines' views split n shards between them
// exactly: every shard owned by one engine, each owning n/N rounded up or
// down.
func settled(engines []*Engine, n int) bool {
	seen := make([]int, n)
	for _, e := range engines {
		owned := e.Owned()
		if len(owned) < n/len(engines) || len(owned) > (n+len(engines)-1)/len(engines) {
			return false
		}
		for _, i := range owned {
			seen[i]++
		}
	}
	for _, c := range seen {
		if c != 1 {
			return false
		}
	}
	return true
}

// ownershipLog records OnOwnership calls, each with the time it was made.
type ownershipLog struct {
	mu      sync.Mutex
	last    []int
	n       int
	history []ownershipCall
}

type ownershipCall struct {
	at    time.Time
	owned []int
}

func (o *ownershipLog) hook(owned []int) {
	at := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.last, o.n = owned, o.n+1
	o.history = append(o.history, ownershipCall{at: at, owned: slices.Clone(owned)})
}

func (o *ownershipLog) get() ([]int, int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.last, o.n
}

// calls returns the calls made after since.
func (o *ownershipLog) calls(since time.Time) []ownershipCall {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []ownershipCall
	for _, c := range o.history {
		if c.at.After(since) {
			out = append(out, c)
		}
	}
	return out
}

// beatLog is a go-redis hook that records when the last movers script call
// on key that Redis answered was sent: the registration it renewed lapses
// no sooner than a window after that.
type beatLog struct {
	key  string
	mu   sync.Mutex
	sent time.Time
}

func (b *beatLog) DialHook(next redis.DialHook) redis.DialHook { return next }

func (b *beatLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		sent := time.Now()
		err := next(ctx, cmd)
		args := cmd.Args()
		name := cmd.Name()
		if err == nil && (name == "evalsha" || name == "eval") && len(args) > 3 && args[3] == b.key {
			b.mu.Lock()
			b.sent = sent
			b.mu.Unlock()
		}
		return err
	}
}

func (b *beatLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (b *beatLog) last() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sent
}

// Movers of a 16-shard queue converge to an even split, and rebalance
// within a round trip when one joins or stops cleanly. When one crashes,
// its shards are taken only once its registration lapsed (a window after
// its last beat was sent), and within a beat period of that.
func TestShardsRebalance(t *testing.T) {
	t.Parallel()
	const n = 16
	prefix := redistest.Prefix(t)
	layout, err := stream.NewLayout(prefix, "q", n)
	require.NoError(t, err)
	logs := map[*Engine]*ownershipLog{}
	beats := map[*Engine]*beatLog{}
	newEngine := func() *Engine {
		o := &ownershipLog{}
		b := &beatLog{key: layout.Movers()}
		rdb := redistest.Client(t)
		rdb.AddHook(b)
		e, err := New(rdb, "q", WithPrefix(prefix), WithShards(n), WithLogger(quiet()),
			WithHooks(Hooks{OnOwnership: o.hook}))
		require.NoError(t, err)
		logs[e], beats[e] = o, b
		return e
	}
	type running struct {
		e           *Engine
		stop, crash func()
	}
	var live []running
	start := func() {
		e := newEngine()
		stop, crash := runEngine(t, e)
		live = append(live, running{e, stop, crash})
	}
	engines := func() []*Engine {
		var out []*Engine
		for _, r := range live {
			out = append(out, r.e)
		}
		return out
	}
	// A rebalance takes a round trip: an announcement and a beat of each
	// mover. The limits are deadlines for what is otherwise a hang.
	awaitSettled := func(what string, within time.Duration) {
		t.Helper()
		margin.Eventually(t, what, func() bool { return settled(engines(), n) }, within, 5*time.Millisecond,
			"%s: not settled within %s", what, within)
		for _, e := range engines() {
			// The hook saw the same change (it runs before Owned changes
			// again; nothing changes once settled).
			require.Eventually(t, func() bool {
				last, _ := logs[e].get()
				return slices.Equal(last, e.Owned())
			}, 5*time.Second, 5*time.Millisecond)
		}
	}

	for range 3 {
		start()
	}
	awaitSettled("3 movers", 10*time.Second)
	for _, e := range engines() {
		assert.Contains(t, []int{5, 6}, len(e.Owned()))
	}

	start()
	awaitSettled("a 4th joins", 5*time.Second)
	for _, e := range engines() {
		assert.Len(t, e.Owned(), 4)
	}

	gone := live[0]
	gone.stop()
	live = live[1:]
	assert.Nil(t, gone.e.Owned(), "a stopped mover owns nothing")
	last, _ := logs[gone.e].get()
	assert.Empty(t, last, "and says so")
	awaitSettled("one stops cleanly", 5*time.Second)

	crashed := live[0]
	orphans := crashed.e.Owned()
	require.NotEmpty(t, orphans)
	crashAt := time.Now()
	crashed.crash()
	live = live[1:]
	lastBeat := beats[crashed.e].last()
	require.False(t, lastBeat.IsZero(), "the crashed mover beat")
	window := DefaultLeaseTTL - DefaultLeaseTTL/3 // a registration's life
	every := DefaultLeaseTTL / 3                  // a live mover's beat period
	awaitSettled("one crashes", window+every+10*time.Second)
	for _, e := range engines() {
		assert.Contains(t, []int{8}, len(e.Owned()))
	}

	// When the survivors' hooks first reported a crashed mover's shard,
	// and when each last changed (the split complete).
	var taken, done time.Time
	for _, e := range engines() {
		calls := logs[e].calls(crashAt)
		require.NotEmpty(t, calls, "a survivor reported its new share")
		for _, c := range calls {
			if slices.ContainsFunc(c.owned, func(i int) bool { return slices.Contains(orphans, i) }) {
				if taken.IsZero() || c.at.Before(taken) {
					taken = c.at
				}
				break
			}
		}
		done = later(done, calls[len(calls)-1].at)
	}
	require.False(t, taken.IsZero(), "the crashed mover's shards were taken")
	t.Logf("one crashes: last beat %s before the crash; shards taken %s and split %s after it",
		crashAt.Sub(lastBeat), taken.Sub(lastBeat), done.Sub(lastBeat))
	// Causal, whatever the load: the registration renewed by the last beat
	// lapses a window after it was sent, by the Redis clock (the same wall
	// clock here), and only a beat run after that drops it.
	assert.GreaterOrEqual(t, taken.UnixMilli(), lastBeat.UnixMilli()+window.Milliseconds(),
		"a crashed mover's shards are taken only once its registration lapsed")
	// The next beat of a survivor, at most a beat period later, drops it
	// and announces it; the others beat at once. The slack is for two
	// loaded cores.
	margin.LessOrEqual(t, "crash split after last beat", done.Sub(lastBeat), window+every+time.Second,
		"the crashed mover's shards are split within a beat period of its registration's lapse")
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// msg is a message written into a shard's delayed set.
type msg struct {
	id  string
	due time.Time
}

// put writes msgs into the main lanes of their shards as the schedule
// script writes plain members (member = id, score = due ms, envelope in
// the hash), and publishes each shard's earliest due time on its wake
// channel, as a producer does for an entry that becomes the head.
func put(t *testing.T, rdb redis.UniversalClient, layout *stream.Layout, msgs []msg) {
	t.Helper()
	ctx := context.Background()
	pipe := rdb.Pipeline()
	head := map[int]int64{}
	for _, m := range msgs {
		i := layout.ShardOf(m.id)
		lane := layout.Shard(i).Main()
		env := wire.MarshalEnvelope(&codec.Envelope{Payload: []byte(m.id), Attempt: 1, Created: time.Now()})
		// The envelope first: a running mover may promote the member as
		// soon as it is in the set, and would quarantine it without one.
		pipe.HSet(ctx, lane.Envelopes, m.id, env)
		pipe.ZAdd(ctx, lane.Delayed, redis.Z{Member: m.id, Score: float64(m.due.UnixMilli())})
		if h, ok := head[i]; !ok || m.due.UnixMilli() < h {
			head[i] = m.due.UnixMilli()
		}
	}
	_, err := pipe.Exec(ctx)
	require.NoError(t, err)
	// After the writes: a Cluster pipeline sends to each node at once, and
	// a wake-up that overtook its entry would be lost.
	for i, h := range head {
		pipe.SPublish(ctx, layout.Shard(i).Main().Wake, strconv.FormatInt(h, 10))
	}
	_, err = pipe.Exec(ctx)
	require.NoError(t, err)
}

// Under joins, clean stops and crashes of movers, every message is appended
// exactly once, to its own shard's stream, never before its due time, and
// nothing is left behind.
func TestShardsNothingLostNothingTwice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const n, total = 16, 5000
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	layout, err := stream.NewLayout(prefix, "q", n)
	require.NoError(t, err)
	begin := time.Now().Add(300 * time.Millisecond)
	msgs := make([]msg, total)
	for i := range msgs {
		msgs[i] = msg{id: fmt.Sprintf("m-%d", i), due: begin.Add(time.Duration(i) * 3 * time.Second / total)}
	}
	put(t, rdb, layout, msgs[:total/2]) // half now, half while movers come and go

	var engines []*Engine
	var errMu sync.Mutex
	var errs []error
	start := func() (stop, crash func()) {
		e, err := New(redistest.Client(t), "q", WithPrefix(prefix), WithShards(n), WithBatchSize(50), WithLogger(quiet()),
			WithHooks(Hooks{OnError: func(_ string, err error, _ bool) {
				errMu.Lock()
				defer errMu.Unlock()
				errs = append(errs, err)
			}}))
		require.NoError(t, err)
		engines = append(engines, e)
		return runEngine(t, e)
	}
	// The churn follows the promotion, and so the messages' due times:
	// each step waits until the movers have appended k messages, which
	// cannot happen before the k-th due time (a message every 0.6 ms).
	appended := func(k int64) {
		t.Helper()
		var got int64
		require.Eventually(t, func() bool { got = streamsLen(t, rdb, layout); return got >= k }, 30*time.Second, 5*time.Millisecond,
			"%d appended", k)
		t.Logf("%d appended (waited for %d)", got, k)
	}
	stopA, _ := start()
	stopB, _ := start()
	_, crashC := start()
	require.Eventually(t, func() bool { return settled(engines, n) }, 10*time.Second, 5*time.Millisecond, "the three movers split the shards")
	stopD, _ := start()
	put(t, rdb, layout, msgs[total/2:3*total/4])
	appended(total / 4)
	stopB()
	appended(2 * total / 5)
	crashC()
	put(t, rdb, layout, msgs[3*total/4:])
	appended(3 * total / 5)
	stopE, _ := start()
	appended(3 * total / 4)
	stopA()
	appended(total)
	stopD()
	stopE()

	due := map[string]time.Time{}
	for _, m := range msgs {
		due[m.id] = m.due
	}
	seen := map[string]int{}
	for i := range n {
		lane := layout.Shard(i).Main()
		entries, err := rdb.XRange(ctx, lane.Stream, "-", "+").Result()
		require.NoError(t, err)
		for _, x := range entries {
			e, err := wire.Decode(lane.Stream, x.ID, x.Values)
			require.NoError(t, err)
			seen[e.Envelope.ID]++
			assert.Equal(t, i, layout.ShardOf(e.Envelope.ID), "%s in its own shard", e.Envelope.ID)
			assert.Equal(t, due[e.Envelope.ID].UnixMilli(), e.Envelope.Due.UnixMilli())
			assert.False(t, e.Appended().Before(e.Envelope.Due), "%s early", e.Envelope.ID)
		}
		left, err := rdb.Exists(ctx, lane.Delayed, lane.Envelopes, lane.Quarantine).Result()
		require.NoError(t, err)
		assert.Zero(t, left, "shard %d: nothing left behind, nothing quarantined", i)
	}
	require.Len(t, seen, total, "every message appended")
	for id, c := range seen {
		require.Equal(t, 1, c, "%s appended %d times", id, c)
	}
	var promoted uint64
	for _, e := range engines {
		promoted += e.Counters().Promoted
	}
	errMu.Lock()
	for _, err := range errs {
		// A stop cancels the call in flight, and on a loaded machine a
		// call may run out of its time limit (the movers call again);
		// nothing else failed.
		if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("a mover's call failed: %v", err)
		}
	}
	errMu.Unlock()
	// A call cut short by a stop may have moved its batch without its
	// reply being counted; the counters never count more.
	assert.LessOrEqual(t, promoted, uint64(total))
	assert.Greater(t, promoted, uint64(total/2))
}

// streamsLen returns how many entries the main streams of layout's
// shards hold.
func streamsLen(t *testing.T, rdb redis.UniversalClient, layout *stream.Layout) int64 {
	t.Helper()
	var sum int64
	for i := range layout.Shards() {
		l, err := rdb.XLen(context.Background(), layout.Shard(i).Main().Stream).Result()
		require.NoError(t, err)
		sum += l
	}
	return sum
}

// keysUnder returns every key under prefix with its type and content.
func keysUnder(t *testing.T, rdb *redis.Client, prefix string) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	it := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	for it.Next(ctx) {
		typ, err := rdb.Type(ctx, it.Val()).Result()
		require.NoError(t, err)
		dump, err := rdb.Dump(ctx, it.Val()).Result()
		require.NoError(t, err)
		out[it.Val()] = typ + ":" + dump
	}
	require.NoError(t, it.Err())
	return out
}

// A mover built with another shard count than the queue's returns an
// error wrapping stream.ErrShardCount at once, and writes nothing.
func TestShardCountMismatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	four, err := stream.NewLayout(prefix, "q", 4)
	require.NoError(t, err)
	require.NoError(t, shards.NewGuard(four, "producer").Check(ctx, rdb))
	put(t, rdb, four, []msg{{id: "waiting", due: time.Now().Add(-time.Second)}})
	before := keysUnder(t, rdb, prefix)
	require.NotEmpty(t, before)

	for _, opts := range [][]Option{
		{WithShards(8)},
		{WithShards(8), WithRetryLaneOf("g")},
		{}, // one shard
	} {
		m, err := New(rdb, "q", append([]Option{WithPrefix(prefix)}, opts...)...)
		require.NoError(t, err)
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		begin := time.Now()
		err = m.Run(rctx)
		cancel()
		require.ErrorIs(t, err, stream.ErrShardCount)
		assert.Contains(t, err.Error(), "mover q: ")
		assert.Less(t, time.Since(begin), 5*time.Second, "at once")
		assert.Nil(t, m.Owned())
		assert.Equal(t, before, keysUnder(t, rdb, prefix), "nothing written")
	}
}

// While the shard count cannot be checked (no server), Run waits, logging
// its first failure at once and then at rising intervals; it returns nil
// when ctx ends.
func TestShardCountCheckRetries(t *testing.T) {
	t.Parallel()
	logs := &syncBuffer{}
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialerRetries: 1}) // fails fast
	t.Cleanup(func() { _ = rdb.Close() })
	m, err := New(rdb, "q", WithShards(4), WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	require.NoError(t, m.Run(ctx), "a requested stop")
	out := logs.String()
	// Logged at once, then at rising intervals (logpace): within 1.5 s,
	// the lines at 0 and 1 s at most.
	n := strings.Count(out, "level=WARN")
	assert.GreaterOrEqual(t, n, 1, "the first failure logged: %s", out)
	assert.LessOrEqual(t, n, 2, "no line per retry: %s", out)
	assert.Contains(t, out, "checking the queue's shard count failed")
	assert.Nil(t, m.Owned())
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
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

// The lanes of a sharded queue announce appended entries on their arrivals
// channel, a shard channel (SPUBLISH), with their shard number. Retry lanes
// keep a lease per lane.
func TestShardsArrivals(t *testing.T) {
	t.Parallel()
	for _, group := range []string{"", "g"} {
		t.Run("group="+group, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			rdb := redistest.Client(t)
			prefix := redistest.Prefix(t)
			layout, err := stream.NewLayout(prefix, "q", 4)
			require.NoError(t, err)
			lane := layout.Shard(2).Main()
			if group != "" {
				lane = layout.Shard(2).Retry(group)
			}
			ps := rdb.SSubscribe(ctx, lane.Arrivals)
			t.Cleanup(func() { _ = ps.Close() })
			_, err = ps.Receive(ctx)
			require.NoError(t, err)
			env := wire.MarshalEnvelope(&codec.Envelope{Payload: []byte("x"), Attempt: 1})
			require.NoError(t, rdb.ZAdd(ctx, lane.Delayed, redis.Z{Member: "x", Score: 1}).Err())
			require.NoError(t, rdb.HSet(ctx, lane.Envelopes, "x", env).Err())

			opts := []Option{WithPrefix(prefix), WithShards(4)}
			if group != "" {
				opts = append(opts, WithRetryLaneOf(group))
			}
			var leases sync.Map
			m, err := New(rdb, "q", append(opts, WithHooks(Hooks{OnLease: func(lane string, owner bool) {
				leases.Store(lane, owner)
			}}))...)
			require.NoError(t, err)
			runEngine(t, m)
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			got, err := ps.ReceiveMessage(rctx)
			require.NoError(t, err)
			assert.Equal(t, "2", got.Payload)
			n, err := rdb.XLen(ctx, lane.Stream).Result()
			require.NoError(t, err)
			assert.Equal(t, int64(1), n)
			if group == "" {
				assert.Equal(t, []int{0, 1, 2, 3}, m.Owned(), "the only mover owns every shard")
				_, ok := leases.Load(lane.Stream)
				assert.False(t, ok, "the main lanes of a sharded queue take no lease")
			} else {
				assert.Equal(t, []int{0, 1, 2, 3}, m.Owned(), "a retry engine looks at every shard")
				// The hook runs after the call returns, which may be after
				// the announcement arrived.
				assert.Eventually(t, func() bool {
					owner, ok := leases.Load(lane.Stream)
					return ok && owner.(bool)
				}, 5*time.Second, time.Millisecond, "a retry lane takes its lease for work")
				reg, err := rdb.Exists(ctx, layout.Movers()).Result()
				require.NoError(t, err)
				assert.Zero(t, reg, "retry lanes use no registry")
			}
		})
	}
}

// An unsharded queue's mover makes none of the sharded queue's calls: no
// registry, no arrivals.
func TestOneShardNoRegistry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	layout, err := stream.NewLayout(prefix, "q", 1)
	require.NoError(t, err)
	put(t, rdb, layout, []msg{{id: "x", due: time.Now().Add(-time.Second)}})
	o := &ownershipLog{}
	m, err := New(rdb, "q", WithPrefix(prefix), WithHooks(Hooks{OnOwnership: o.hook}))
	require.NoError(t, err)
	stop, _ := runEngine(t, m)
	require.Eventually(t, func() bool { return m.Counters().Promoted == 1 }, 5*time.Second, 5*time.Millisecond)
	assert.Equal(t, []int{0}, m.Owned())
	stop()
	last, calls := o.get()
	assert.Empty(t, last)
	assert.Equal(t, 2, calls, "shard 0 when Run starts, none when it returns")
	keys := keysUnder(t, rdb, prefix)
	for k := range keys {
		assert.NotEqual(t, layout.Movers(), k)
	}
	meta, err := rdb.HGet(ctx, layout.Meta(), "shards").Result()
	require.NoError(t, err)
	assert.Equal(t, "1", meta, "the shard count is recorded")
}

// commandCalls returns the calls of every command the server counted
// (INFO commandstats: commands that scripts call included), by name.
func commandCalls(t *testing.T, rdb *redis.Client) map[string]int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	require.NoError(t, err)
	out := map[string]int64{}
	for line := range strings.Lines(info) {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
		n, err := strconv.ParseInt(calls, 10, 64)
		require.NoError(t, err, line)
		out[strings.TrimPrefix(name, "cmdstat_")] = n
	}
	return out
}

// Idle, the movers of a sharded queue cost their beats (every third of the
// lease TTL: EVALSHA and, inside the script, TIME, ZRANGE, ZADD) plus one
// probe of a shard's head per max idle for all their shards: a figure that
// does not grow with the shard count up to 30 shards per mover. Measured on
// a server of its own with INFO commandstats, which counts the commands
// scripts call.
func TestShardsIdleCost(t *testing.T) {
	t.Parallel()
	srv, err := redistest.Spawn()
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	client := func() *redis.Client {
		c := redis.NewClient(redistest.Options(t, srv.Addr))
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	const n, movers = 16, 2
	prefix := redistest.Prefix(t)
	var engines []*Engine
	var logs []*probeLog // each mover's beats, counted as they are sent
	for range movers {
		c := client()
		log := newProbeLog()
		c.AddHook(log)
		e, err := New(c, "q", WithPrefix(prefix), WithShards(n))
		require.NoError(t, err)
		engines = append(engines, e)
		logs = append(logs, log)
		runEngine(t, e)
	}
	// Steady state: the shards split, every owned lane idle, and the probe
	// turns begun (the first comes a probe period after a lane fell idle:
	// 8 s for 8 lanes).
	require.Eventually(t, func() bool {
		if !settled(engines, n) {
			return false
		}
		for _, e := range engines {
			e.probes.mu.Lock()
			idle, begun := len(e.probes.idle), !e.probes.given.IsZero()
			e.probes.mu.Unlock()
			if idle != len(e.Owned()) || !begun {
				return false
			}
		}
		return true
	}, 20*time.Second, 10*time.Millisecond)

	// The window opens at a beat of the first mover and closes once each
	// mover has sent 7 more (about 3 s): its end is an event, its length
	// is measured, and every rate below is per second of it.
	const perMover = 7
	beatsOf := func() []int64 {
		var out []int64
		for _, l := range logs {
			out = append(out, l.beats.Load())
		}
		return out
	}
	first := beatsOf()
	require.Eventually(t, func() bool { return logs[0].beats.Load() > first[0] }, 5*time.Second, time.Millisecond, "a beat")
	admin := client()
	from := beatsOf()
	opened := time.Now() // before the first read: the window holds every command counted
	before := commandCalls(t, admin)
	require.Eventually(t, func() bool {
		for i, b := range beatsOf() {
			if b-from[i] < perMover {
				return false
			}
		}
		return true
	}, 20*time.Second, time.Millisecond, "%d beats of each mover", perMover)
	after := commandCalls(t, admin)
	window := time.Since(opened)
	delta := map[string]int64{}
	var total int64
	for name, c := range after {
		if d := c - before[name]; d > 0 && name != "info" {
			delta[name] = d
			total += d
		}
	}
	perEngine := float64(total) / movers / window.Seconds()
	beats := float64(delta["evalsha"]) / movers / window.Seconds()
	probes := float64(delta["zrange"]-delta["evalsha"]) / movers / window.Seconds()
	t.Logf("idle, %d movers on %d shards: %.2f commands/s per mover (%.2f beats/s, %.2f probes/s); commands in %s: %v",
		movers, n, perEngine, beats, probes, window, delta)
	assert.Zero(t, delta["zrangebyscore"], "no promote call while idle")
	// Upper bounds: what idle costs at most. A loaded machine sends the
	// beats late and makes every rate lower, never higher.
	margin.LessOrEqual(t, "idle beats/s", beats, 3/DefaultLeaseTTL.Seconds()+0.5, "a beat every third of the lease TTL")
	assert.Positive(t, beats)
	margin.LessOrEqual(t, "idle probes/s", probes, 1.5, "about one probe per max idle per mover, whatever the shard count")
	margin.LessOrEqual(t, "idle commands/s", perEngine, 12.0, "commands/s per mover")
}

// On a Redis Cluster, the shards spread over the masters; the registry,
// the movers channel and every wake channel work through one pub/sub
// connection of a ClusterClient (a classic PUBLISH reaches every node).
func TestShardsCluster(t *testing.T) {
	t.Parallel()
	c, err := redistest.SpawnCluster(3, 0)
	require.NoError(t, err)
	t.Cleanup(c.Stop)
	client := func() *redis.ClusterClient {
		cc := c.Client()
		t.Cleanup(func() { _ = cc.Close() })
		return cc
	}
	const n, total = 8, 400
	layout, err := stream.NewLayout("ds", "q", n)
	require.NoError(t, err)
	var engines []*Engine
	var stops []func()
	for range 2 {
		e, err := New(client(), "q", WithShards(n), WithLogger(quiet()))
		require.NoError(t, err)
		engines = append(engines, e)
		stop, _ := runEngine(t, e)
		stops = append(stops, stop)
	}
	require.Eventually(t, func() bool { return settled(engines, n) }, 10*time.Second, 5*time.Millisecond)

	rdb := client()
	msgs := make([]msg, total)
	for i := range msgs {
		msgs[i] = msg{id: fmt.Sprintf("m-%d", i), due: time.Now().Add(time.Duration(i) * time.Millisecond)}
	}
	put(t, rdb, layout, msgs)
	require.Eventually(t, func() bool { return streamsLen(t, rdb, layout) == total }, 10*time.Second, 10*time.Millisecond)
	assert.Positive(t, engines[0].Counters().Promoted)
	assert.Positive(t, engines[1].Counters().Promoted)

	stops[0]()
	require.Eventually(t, func() bool { return len(engines[1].Owned()) == n }, 2*time.Second, 5*time.Millisecond,
		"the leave reaches the other mover")
	put(t, rdb, layout, []msg{{id: "after", due: time.Now()}})
	require.Eventually(t, func() bool { return streamsLen(t, rdb, layout) == total+1 }, 5*time.Second, 10*time.Millisecond)
}
