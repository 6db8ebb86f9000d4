package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/integration/internal/harness"
	"github.com/delaystream/delaystream/internal/delay"
	"github.com/delaystream/delaystream/internal/mover"
)

// TestCluster runs the producer and the mover on a Redis Cluster through a
// ClusterClient, for queues whose keys live on different masters: schedule,
// cancel, reschedule, get, stats and promotion work (every script touches one
// hash tag), the wake-up channel crosses nodes, and nothing is early.
func TestCluster(t *testing.T) {
	t.Parallel()
	rdb := harness.Cluster(t)
	prefix := harness.Prefix(t, rdb)
	queues := queuesOnDistinctMasters(t.Context(), t, rdb, prefix, 2)
	for queue, master := range queues {
		t.Run(queue, func(t *testing.T) {
			t.Parallel()
			heavy.RLock()
			defer heavy.RUnlock()
			t.Logf("queue %s lives on master %s", queue, master)
			clusterQueue(t, rdb, prefix, queue, master)
		})
	}
}

// queuesOnDistinctMasters returns n queue names whose keys are served by n
// different masters, with each master's address.
func queuesOnDistinctMasters(ctx context.Context, t *testing.T, rdb *redis.ClusterClient, prefix string, n int) map[string]string {
	t.Helper()
	out := map[string]string{}
	used := map[string]bool{}
	for i := 0; len(out) < n; i++ {
		require.Less(t, i, 1000, "could not spread %d queues over distinct masters", n)
		queue := fmt.Sprintf("cq%d", i)
		node, err := rdb.MasterForKey(ctx, lane(t, prefix, queue).Stream)
		require.NoError(t, err)
		addr := node.Options().Addr
		if !used[addr] {
			used[addr] = true
			out[queue] = addr
		}
	}
	return out
}

func clusterQueue(t *testing.T, rdb *redis.ClusterClient, prefix, queue, master string) {
	ctx := t.Context()
	const (
		n          = 300 // due within a second
		cancels    = 20
		reschedule = 10
	)
	q := newQueue(t, rdb, prefix, queue)
	l := lane(t, prefix, queue)
	tl := newTally(n + reschedule)
	m, _ := startMover(t, rdb, prefix, queue, mover.WithHooks(tl.hooks()))

	want := map[string]time.Time{}
	var items []delay.Item
	for i := range n {
		d := rand.N(time.Second)
		w := delay.After(d)
		if i%2 == 1 {
			w = delay.At(time.Now().Add(d))
		}
		items = append(items, delay.Item{Message: delay.Message{ID: fmt.Sprintf("m%03d", i), Payload: []byte(queue)}, When: w})
	}
	for i := 0; i < len(items); {
		size := min(len(items)-i, 1+rand.IntN(40))
		res, err := q.ScheduleBatch(ctx, items[i:i+size])
		require.NoError(t, err)
		for _, r := range res {
			require.Equal(t, delay.Created, r.Outcome)
			want[r.ID] = r.Due
		}
		i += size
	}

	// Messages to cancel, to bring forward, and one to leave waiting.
	for i := range cancels {
		_, err := q.Schedule(ctx, delay.Message{ID: fmt.Sprintf("cancel-%d", i)}, delay.After(time.Hour))
		require.NoError(t, err)
	}
	for i := range reschedule {
		_, err := q.Schedule(ctx, delay.Message{ID: fmt.Sprintf("resched-%d", i), Payload: []byte(queue)}, delay.After(time.Hour))
		require.NoError(t, err)
	}
	_, err := q.Schedule(ctx, delay.Message{ID: "stays", Payload: []byte("waiting"), Headers: map[string]string{"k": "v"}}, delay.After(time.Hour))
	require.NoError(t, err)
	for i := range cancels {
		ok, err := q.Cancel(ctx, fmt.Sprintf("cancel-%d", i))
		require.NoError(t, err)
		assert.True(t, ok)
	}
	for i := range reschedule {
		id := fmt.Sprintf("resched-%d", i)
		due, err := q.Reschedule(ctx, id, delay.After(rand.N(500*time.Millisecond)))
		require.NoError(t, err)
		want[id] = due
	}
	env, err := q.Get(ctx, "stays")
	require.NoError(t, err)
	assert.Equal(t, "waiting", string(env.Payload))
	assert.Equal(t, map[string]string{"k": "v"}, env.Headers)

	tl.wait(t, 10*time.Second)

	entries := decodeAll(ctx, t, rdb, l.Stream)
	seen := map[string]int{}
	for _, e := range entries {
		id := e.Envelope.ID
		seen[id]++
		due, ok := want[id]
		if !assert.True(t, ok, "unexpected message %q in stream", id) {
			continue
		}
		assert.True(t, due.Equal(e.Envelope.Due), "%s: due %v, scheduled %v", id, e.Envelope.Due, due)
		assert.False(t, e.Appended().Before(e.Envelope.Due), "%s early by %s", id, e.Envelope.Due.Sub(e.Appended()))
	}
	for id := range want {
		assert.Equal(t, 1, seen[id], "%s delivered %d times", id, seen[id])
	}
	assert.Len(t, entries, n+reschedule)

	st, err := q.Stats(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 1, st.Waiting, "only %q waits", "stays")
	assert.Zero(t, st.Overdue)
	c := m.Counters()
	assert.EqualValues(t, n+reschedule, c.Promoted)
	assert.Zero(t, c.Errors)

	// The keys are where the cluster says: on this queue's master.
	node, err := rdb.MasterForKey(ctx, l.Stream)
	require.NoError(t, err)
	require.Equal(t, master, node.Options().Addr)
	exists, err := node.Exists(ctx, l.Stream, l.Delayed, l.Envelopes, l.Lease).Result()
	require.NoError(t, err)
	assert.EqualValues(t, 4, exists, "stream, delayed set, envelopes and lease on master %s", master)

	t.Logf("%d messages on %s: lateness %s; counters %+v", len(entries), master, distOf(lateness(entries)), c)
}
