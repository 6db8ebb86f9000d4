package integration

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/delaystream/delaystream/integration/internal/harness"
	"github.com/delaystream/delaystream/internal/delay"
	"github.com/delaystream/delaystream/internal/group"
)

// TestGroupsOnEveryTopology states the consumer-group guarantees and checks
// them on a single server and on a Redis Cluster: fan-out to every group,
// per-group retry (the other group never sees a retry), dead letters and
// redrive to one group only, and reclaim (XAUTOCLAIM) of entries abandoned
// by a consumer that never acknowledges, and trimming of what every group
// acknowledged.
func TestGroupsOnEveryTopology(t *testing.T) {
	t.Parallel()
	for name, connect := range map[string]func(testing.TB) redis.UniversalClient{
		"single":  harness.Redis,
		"cluster": func(tb testing.TB) redis.UniversalClient { return harness.Cluster(tb) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			heavy.RLock()
			defer heavy.RUnlock()
			groupGuarantees(t, connect(t))
		})
	}
}

func groupGuarantees(t *testing.T, rdb redis.UniversalClient) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	prefix := harness.Prefix(t, rdb)
	const queue, n = "gq", 200
	q := newQueue(t, rdb, prefix, queue)

	// An abandoned consumer reads the first entries of group "a" and never
	// acknowledges them: group a's real consumer must reclaim them.
	abandoned := make(chan int, 1)

	type key struct {
		group, id string
		attempt   int
	}
	var mu sync.Mutex
	seen := map[key]int{}
	record := func(g string, m *group.Message) {
		mu.Lock()
		seen[key{g, m.ID, m.Attempt}]++
		mu.Unlock()
	}
	opts := []group.Option{
		group.WithPrefix(prefix), group.WithLogger(testLogger(t)),
		group.WithBackoff(group.ConstantBackoff(100 * time.Millisecond)),
		group.WithVisibilityTimeout(500 * time.Millisecond), group.WithReclaimInterval(100 * time.Millisecond),
		group.WithMaxAttempts(2), group.WithTrimInterval(200 * time.Millisecond),
	}
	a, err := group.New(rdb, queue, "a", func(_ context.Context, m *group.Message) error {
		record("a", m)
		switch {
		case m.ID == "poison":
			return errors.New("always fails")
		case m.Attempt == 1:
			return errors.New("first attempt fails")
		}
		return nil
	}, opts...)
	require.NoError(t, err)
	b, err := group.New(rdb, queue, "b", func(_ context.Context, m *group.Message) error {
		record("b", m)
		return nil
	}, opts...)
	require.NoError(t, err)

	// Create both groups before anything is due, then let a foreign consumer
	// take (and abandon) entries of group a.
	for _, g := range []string{"a", "b"} {
		require.NoError(t, rdb.XGroupCreateMkStream(ctx, lane(t, prefix, queue).Stream, g, "0").Err())
	}
	items := make([]delay.Item, 0, n+1)
	for i := range n {
		items = append(items, delay.Item{Message: delay.Message{ID: fmt.Sprintf("m%03d", i), Payload: []byte("x")}, When: delay.After(time.Duration(i%50) * time.Millisecond)})
	}
	items = append(items, delay.Item{Message: delay.Message{ID: "poison"}, When: delay.After(0)})
	_, err = q.ScheduleBatch(ctx, items)
	require.NoError(t, err)
	_, stopMover := startMover(t, rdb, prefix, queue)
	defer stopMover()
	require.Eventually(t, func() bool {
		res, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "a", Consumer: "crashed",
			Streams: []string{lane(t, prefix, queue).Stream, ">"}, Count: 20, Block: -1}).Result()
		if err == nil && len(res) > 0 && len(res[0].Messages) > 0 {
			abandoned <- len(res[0].Messages)
			return true
		}
		return false
	}, 5*time.Second, 5*time.Millisecond)

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return a.Run(gctx) })
	g.Go(func() error { return b.Run(gctx) })
	total := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(seen)
	}
	// a: n messages × 2 attempts + poison × 2 attempts; b: n+1 once.
	want := 2*n + 2 + n + 1
	require.Eventually(t, func() bool { return total() == want }, 20*time.Second, 10*time.Millisecond, "deliveries")
	mu.Lock()
	for k, c := range seen {
		assert.Equal(t, 1, c, "%+v delivered %d times", k, c)
		if k.group == "b" {
			assert.Equal(t, 1, k.attempt, "group b saw a retry of %s", k.id)
		}
	}
	mu.Unlock()
	assert.GreaterOrEqual(t, a.Counters().Reclaimed, uint64(<-abandoned), "abandoned entries reclaimed")

	// The poison message is dead-lettered in group a only; redriven, it
	// reaches group a again (attempt 1), never group b.
	dl := a.DeadLetters()
	require.Eventually(t, func() bool { n, _ := dl.Len(ctx); return n == 1 }, 5*time.Second, 10*time.Millisecond)
	dead, err := dl.List(ctx, "", 10)
	require.NoError(t, err)
	require.Len(t, dead, 1)
	assert.Equal(t, "poison", dead[0].Envelope.ID)
	assert.Equal(t, group.ReasonAttempts, dead[0].Reason)
	nb, err := b.DeadLetters().Len(ctx)
	require.NoError(t, err)
	assert.Zero(t, nb, "group b has no dead letters")
	redriven, err := dl.Redrive(ctx, 0, dead[0].EntryID)
	require.NoError(t, err)
	require.Equal(t, 1, redriven)
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return seen[key{"a", "poison", 1}] == 2
	}, 5*time.Second, 10*time.Millisecond, "redriven message delivered to group a again")
	mu.Lock()
	assert.Equal(t, 1, seen[key{"b", "poison", 1}], "group b never sees the redrive")
	mu.Unlock()

	// Every group acknowledged everything: trimming empties the stream.
	require.Eventually(t, func() bool {
		return rdb.XLen(ctx, lane(t, prefix, queue).Stream).Val() == 0
	}, 5*time.Second, 20*time.Millisecond, "stream trimmed")

	st, err := a.Stats(ctx)
	require.NoError(t, err)
	t.Logf("group a: %+v, counters %+v", st, a.Counters())
	cancel()
	require.NoError(t, g.Wait())
}
