package group_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/internal/delay"
	"github.com/delaystream/delaystream/internal/group"
	"github.com/delaystream/delaystream/internal/redistest"
)

// Many consumers (of many queues) on one client share its connection
// pool: idle, they must leave it to everything else on that client (their
// own promotion, acknowledgements, the program's own commands), and a
// message due on every queue is delivered to each. Here 12 queues share a
// pool of 3 connections.
func TestManyConsumersShareOneSmallPool(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	opts := redistest.Options(t, redistest.Addr(t))
	opts.PoolSize = 3
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	prefix := redistest.Prefix(t)
	const queues = 12

	var mu sync.Mutex
	got := map[string]int{}
	producers := make([]*delay.Queue, queues)
	for i := range queues {
		name := fmt.Sprintf("q%d", i)
		q, err := delay.New(rdb, name, delay.WithPrefix(prefix))
		require.NoError(t, err)
		producers[i] = q
		c, err := group.New(rdb, name, "g", func(_ context.Context, m *group.Message) error {
			mu.Lock()
			got[name]++
			mu.Unlock()
			return nil
		}, group.WithPrefix(prefix), group.WithLogger(testLogger()))
		require.NoError(t, err)
		start(t, c.Run)
	}
	// Every consumer started (its group exists) and listens for arrivals
	// (on a connection of its own, outside the pool): idle from then on.
	waitFor(t, 20*time.Second, func() bool {
		for i := range queues {
			n, err := rdb.Exists(ctx, producers[i].Keys().Main().Stream).Result()
			if err != nil || n == 0 {
				return false
			}
		}
		return true
	}, "every group created")
	arrivals := make([]string, queues)
	for i, q := range producers {
		arrivals[i] = q.Keys().Main().Arrivals
	}
	waitSubscribers(t, rdb, 1, arrivals...)

	// The program's own command gets a connection at once.
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	err := rdb.Ping(pctx).Err()
	cancel()
	require.NoError(t, err, "a command of the program waits for a connection the idle consumers hold")

	for _, q := range producers {
		_, err := q.Schedule(ctx, delay.Message{Payload: []byte("x")}, delay.After(0))
		require.NoError(t, err)
	}
	waitFor(t, 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == queues
	}, "a message due on every queue delivered")
	mu.Lock()
	defer mu.Unlock()
	for name, n := range got {
		assert.Equal(t, 1, n, name)
	}
}
