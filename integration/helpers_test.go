package integration

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/integration/internal/harness"
	"github.com/delaystream/delaystream/internal/delay"
	"github.com/delaystream/delaystream/internal/mover"
	"github.com/delaystream/delaystream/internal/stream"
	"github.com/delaystream/delaystream/internal/wire"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		os.Exit(childMain(spec)) // a re-executed child: see children_test.go
	}
	os.Exit(harness.Main(m))
}

// heavy keeps the load tests (100k messages, which saturate both the server
// and the CPU) from running during the tests that measure timing. Every
// test still calls t.Parallel: load tests hold heavy.Lock, timing tests
// heavy.RLock, everything else runs alongside both.
var heavy sync.RWMutex

// testLogger writes Warn and above to the test's output, so a mover's
// background failures show up next to the test that caused them.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func newQueue(t *testing.T, rdb redis.UniversalClient, prefix, name string, opts ...delay.Option) *delay.Queue {
	t.Helper()
	q, err := delay.New(rdb, name, append([]delay.Option{delay.WithPrefix(prefix)}, opts...)...)
	require.NoError(t, err)
	return q
}

// startMover runs a mover until the test ends (or stop is called) and checks
// that Run returned nil. stop cancels Run and waits for it to return.
func startMover(t *testing.T, rdb redis.UniversalClient, prefix, queue string, opts ...mover.Option) (m *mover.Mover, stop func()) {
	t.Helper()
	m, err := mover.New(rdb, queue, append([]mover.Option{mover.WithPrefix(prefix), mover.WithLogger(testLogger(t))}, opts...)...)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				require.NoError(t, err, "mover.Run")
			case <-time.After(10 * time.Second):
				t.Errorf("mover.Run did not return within 10s of cancel")
			}
		})
	}
	t.Cleanup(stop)
	return m, stop
}

// tally counts what movers report through their OnPromote hooks and closes
// done once every message is accounted for: moved + quarantined + other
// (messages a test removed itself, by cancelling or rescheduling them away)
// reaches target. It is the signal tests wait for instead of polling.
type tally struct {
	moved, quarantined, other atomic.Int64
	target                    int64
	once                      sync.Once
	done                      chan struct{}
	each                      chan struct{} // a non-blocking tick per promote call that did something
}

func newTally(target int) *tally {
	return &tally{target: int64(target), done: make(chan struct{}), each: make(chan struct{}, 1)}
}

func (tl *tally) hooks() mover.Hooks {
	return mover.Hooks{OnPromote: tl.onPromote}
}

func (tl *tally) onPromote(_ string, moved, quarantined int, _ time.Duration) {
	tl.moved.Add(int64(moved))
	tl.quarantined.Add(int64(quarantined))
	tl.check()
	select {
	case tl.each <- struct{}{}:
	default:
	}
}

// account counts n messages that left the delayed set without a mover.
func (tl *tally) account(n int) {
	tl.other.Add(int64(n))
	tl.check()
}

func (tl *tally) check() {
	if tl.moved.Load()+tl.quarantined.Load()+tl.other.Load() >= tl.target {
		tl.once.Do(func() { close(tl.done) })
	}
}

func (tl *tally) wait(t *testing.T, limit time.Duration) {
	t.Helper()
	select {
	case <-tl.done:
	case <-time.After(limit):
		t.Fatalf("timed out after %s: %d moved + %d quarantined + %d removed of %d", limit,
			tl.moved.Load(), tl.quarantined.Load(), tl.other.Load(), tl.target)
	}
}

// readAll returns every entry of the stream at key, oldest first.
func readAll(ctx context.Context, t *testing.T, rdb redis.UniversalClient, key string) []redis.XMessage {
	t.Helper()
	var out []redis.XMessage
	start := "-"
	for {
		page, err := rdb.XRangeN(ctx, key, start, "+", 10000).Result()
		require.NoError(t, err)
		out = append(out, page...)
		if len(page) < 10000 {
			return out
		}
		start = "(" + page[len(page)-1].ID
	}
}

// decodeAll decodes every entry of the stream at key.
func decodeAll(ctx context.Context, t *testing.T, rdb redis.UniversalClient, key string) []wire.Entry {
	t.Helper()
	msgs := readAll(ctx, t, rdb, key)
	out := make([]wire.Entry, 0, len(msgs))
	for _, m := range msgs {
		e, err := wire.Decode(key, m.ID, m.Values)
		require.NoError(t, err, "entry %s", m.ID)
		out = append(out, e)
	}
	return out
}

// lateness returns, for each entry, how long after its due time it was
// appended (Redis clock, millisecond resolution).
func lateness(entries []wire.Entry) []time.Duration {
	out := make([]time.Duration, len(entries))
	for i, e := range entries {
		out[i] = e.Appended().Sub(e.Envelope.Due)
	}
	return out
}

// dist summarises durations as percentiles.
type dist struct {
	N                       int
	P50, P90, P99, Max, Min time.Duration
}

func distOf(ds []time.Duration) dist {
	if len(ds) == 0 {
		return dist{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	pct := func(p float64) time.Duration { return s[min(len(s)-1, int(p*float64(len(s))))] }
	return dist{N: len(s), P50: pct(0.50), P90: pct(0.90), P99: pct(0.99), Max: s[len(s)-1], Min: s[0]}
}

func (d dist) String() string {
	return fmt.Sprintf("n=%d min=%s p50=%s p90=%s p99=%s max=%s", d.N, d.Min, d.P50, d.P90, d.P99, d.Max)
}

// redisNow returns the Redis server's clock.
func redisNow(ctx context.Context, t *testing.T, rdb redis.UniversalClient) time.Time {
	t.Helper()
	now, err := rdb.Time(ctx).Result()
	require.NoError(t, err)
	return now
}

// waitUntil blocks until the wall clock reaches at: it shapes an
// experiment's timeline (e.g. "cancel around the due time", "kill the
// server 3 s into the load"), it does not stand in for a signal.
func waitUntil(at time.Time) {
	if d := time.Until(at); d > 0 {
		time.Sleep(d) // a point in wall time is the subject: no event marks it
	}
}

// lane returns the main lane of queue under prefix.
func lane(t *testing.T, prefix, queue string) stream.Lane {
	t.Helper()
	k, err := stream.NewKeys(prefix, queue, 0, 1)
	require.NoError(t, err)
	return k.Main()
}

// waitDrained waits until nothing waits in the lane's delayed set.
func waitDrained(ctx context.Context, t *testing.T, rdb redis.UniversalClient, l stream.Lane, limit time.Duration) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		n, err := rdb.ZCard(ctx, l.Delayed).Result()
		if !assert.NoError(c, err) || n == 0 {
			return
		}
		s, _ := rdb.XLen(ctx, l.Stream).Result()
		assert.Zero(c, n, "%d messages still wait in %s (%d in the stream)", n, l.Delayed, s)
	}, limit, 20*time.Millisecond, "the delayed set drains within %s", limit)
}

// requireEmptyDelayed checks that nothing waits in the lane any more.
func requireEmptyDelayed(ctx context.Context, t *testing.T, rdb redis.UniversalClient, l stream.Lane) {
	t.Helper()
	z, err := rdb.ZCard(ctx, l.Delayed).Result()
	require.NoError(t, err)
	h, err := rdb.HLen(ctx, l.Envelopes).Result()
	require.NoError(t, err)
	require.Zero(t, z, "entries left in the delayed set %s", l.Delayed)
	require.Zero(t, h, "envelopes left in %s", l.Envelopes)
}

// afterCalls is a client hook that passes each call (a command, or a
// pipeline's commands) and its error to the function once it returned.
type afterCalls func(cmds []redis.Cmder, err error)

func (h afterCalls) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h afterCalls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h([]redis.Cmder{cmd}, err)
		return err
	}
}

func (h afterCalls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		h(cmds, err)
		return err
	}
}
