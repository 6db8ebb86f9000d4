package integration

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/integration/internal/harness"
	"github.com/delaystream/delaystream/internal/delay"
	"github.com/delaystream/delaystream/internal/margin"
	"github.com/delaystream/delaystream/internal/mover"
	"github.com/delaystream/delaystream/internal/redistest"
	"github.com/delaystream/delaystream/internal/stream"
)

// checkDelivered asserts that the stream at key holds each of want exactly
// once, none early and with the due time Schedule reported, and returns the
// lateness distribution.
func checkDelivered(t *testing.T, rdb redis.UniversalClient, key string, want map[string]time.Time) dist {
	t.Helper()
	entries := decodeAll(t.Context(), t, rdb, key)
	seen := make(map[string]int, len(want))
	for _, e := range entries {
		id := e.Envelope.ID
		seen[id]++
		due, ok := want[id]
		if !assert.True(t, ok, "unexpected message %q", id) {
			continue
		}
		assert.True(t, due.Equal(e.Envelope.Due), "%s: due %v, scheduled %v", id, e.Envelope.Due, due)
		assert.False(t, e.Appended().Before(e.Envelope.Due), "%s early by %s", id, e.Envelope.Due.Sub(e.Appended()))
	}
	for id := range want {
		assert.Equal(t, 1, seen[id], "%s delivered %d times", id, seen[id])
	}
	assert.Len(t, entries, len(want))
	return distOf(lateness(entries))
}

func scheduleSpread(t *testing.T, q *delay.Queue, ids []string, spread time.Duration, want map[string]time.Time) {
	t.Helper()
	items := make([]delay.Item, len(ids))
	for i, id := range ids {
		items[i] = delay.Item{Message: delay.Message{ID: id, Payload: []byte(id)}, When: delay.After(rand.N(spread))}
	}
	res, err := q.ScheduleBatch(t.Context(), items)
	require.NoError(t, err)
	for _, r := range res {
		want[r.ID] = r.Due
	}
}

func ids(prefix string, from, to int) []string {
	out := make([]string, 0, to-from)
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("%s%04d", prefix, i))
	}
	return out
}

// TestScriptCacheFlushed empties the server's script cache (as a restart or
// failover to a fresh replica would) while producers and a mover work:
// pipelined EVALSHA calls answered NOSCRIPT are re-run, and nothing is lost
// or duplicated. It runs on a server of its own, so the flush disturbs no
// other test.
func TestScriptCacheFlushed(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	_, rdb := harness.Dedicated(t)
	prefix := harness.Prefix(t, rdb)
	const queue = "flush"
	q := newQueue(t, rdb, prefix, queue, delay.WithBatchSize(100))
	tl := newTally(1000)
	m, _ := startMover(t, rdb, prefix, queue, mover.WithHooks(tl.hooks()))
	want := map[string]time.Time{}

	scheduleSpread(t, q, ids("a", 0, 500), 300*time.Millisecond, want)
	require.NoError(t, rdb.ScriptFlush(ctx).Err())
	// Five pipelined chunks, every one answered NOSCRIPT.
	scheduleSpread(t, q, ids("b", 0, 500), 300*time.Millisecond, want)

	require.NoError(t, rdb.ScriptFlush(ctx).Err())
	_, err := q.Schedule(ctx, delay.Message{ID: "x"}, delay.After(time.Hour))
	require.NoError(t, err)
	require.NoError(t, rdb.ScriptFlush(ctx).Err())
	ok, err := q.Cancel(ctx, "x")
	require.NoError(t, err)
	assert.True(t, ok)

	tl.wait(t, 10*time.Second)
	d := checkDelivered(t, rdb, lane(t, prefix, queue).Stream, want)
	requireEmptyDelayed(ctx, t, rdb, lane(t, prefix, queue))
	t.Logf("after script flushes: lateness %s; counters %+v", d, m.Counters())
}

// TestConnectionsKilled kills every client connection (commands and
// pub/sub) while a mover promotes: go-redis reconnects, the mover keeps
// going, every message is still delivered exactly once and never early, and
// the wake-up subscription is restored: afterwards an idle mover with a 5 s
// max idle still delivers a message due 200 ms out on time. Own server:
// CLIENT KILL would hit other tests' connections.
func TestConnectionsKilled(t *testing.T) {
	t.Parallel()
	heavy.RLock()
	defer heavy.RUnlock()
	ctx := t.Context()
	_, rdb := harness.Dedicated(t)
	prefix := harness.Prefix(t, rdb)
	const queue = "kill"
	q := newQueue(t, rdb, prefix, queue)
	tl := newTally(600)
	m, _ := startMover(t, rdb, prefix, queue, mover.WithHooks(tl.hooks()),
		mover.WithMaxIdle(5*time.Second), mover.WithLeaseTTL(6*time.Second))
	want := map[string]time.Time{}
	scheduleSpread(t, q, ids("a", 0, 300), 1500*time.Millisecond, want)

	killer := redis.NewClient(redistest.Options(t, rdb.Options().Addr))
	t.Cleanup(func() { _ = killer.Close() })
	<-tl.each // promotion under way
	var killed int64
	for _, typ := range []string{"normal", "pubsub"} {
		n, err := killer.ClientKillByFilter(ctx, "TYPE", typ, "SKIPME", "yes").Result()
		require.NoError(t, err)
		killed += n
	}
	scheduleSpread(t, q, ids("b", 0, 300), 1500*time.Millisecond, want)
	// And once more while those wait.
	<-tl.each
	for _, typ := range []string{"normal", "pubsub"} {
		n, err := killer.ClientKillByFilter(ctx, "TYPE", typ, "SKIPME", "yes").Result()
		require.NoError(t, err)
		killed += n
	}

	// A promote call whose reply a kill cut off has moved its batch without
	// reporting it (go-redis retries the call, and the retry finds that
	// batch gone), so the hooks' tally may stay short: wait for the delayed
	// set to drain, then check the stream itself.
	l := lane(t, prefix, queue)
	waitDrained(ctx, t, rdb, l, 15*time.Second)
	d := checkDelivered(t, rdb, l.Stream, want)
	requireEmptyDelayed(ctx, t, rdb, l)
	t.Logf("%d connections killed; lateness %s; counters %+v", killed, d, m.Counters())
	assert.Positive(t, killed)
	// A kill costs go-redis retries on dead pooled connections (~100-200 ms
	// stalls are typical), not a lost wake-up's 5 s max idle.
	margin.Less(t, "lateness after kills", d.Max, 2500*time.Millisecond, "lateness after connection kills")

	// The mover now sleeps up to 5 s; only a wake-up can deliver this on
	// time: its subscription is back.
	require.Eventually(t, func() bool {
		n, err := rdb.PubSubNumSub(ctx, l.Wake).Result()
		return err == nil && n[l.Wake] == 1
	}, 10*time.Second, 5*time.Millisecond, "the mover resubscribed to its wake channel")
	select { // drop a stale tick
	case <-tl.each:
	default:
	}
	r, err := q.Schedule(ctx, delay.Message{ID: "probe"}, delay.After(200*time.Millisecond))
	require.NoError(t, err)
	select {
	case <-tl.each:
	case <-time.After(3 * time.Second):
		t.Fatal("probe not delivered within 3s: wake-up subscription not restored")
	}
	last, err := rdb.XRevRangeN(ctx, l.Stream, "+", "-", 1).Result()
	require.NoError(t, err)
	require.Len(t, last, 1)
	late := stream.EntryTime(last[0].ID).Sub(r.Due)
	t.Logf("probe after the kills: %s late", late)
	// Promoted by the woken mover's timer, not at its 5 s idle check; the
	// slack is for two loaded cores.
	margin.Less(t, "probe after kills late", late, time.Second)
}
