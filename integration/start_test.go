package integration

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/internal/delay"
	"github.com/delaystream/delaystream/internal/group"
	"github.com/delaystream/delaystream/internal/redistest"
)

// A consumer started while Redis is down (or loading its data) waits for
// it instead of failing: a process started before its Redis, or restarted
// during a Redis restart, comes up by itself. Found by the chaos program,
// whose consumers failed with LOADING while Redis loaded its AOF.
func TestConsumerStartsWhileRedisIsDown(t *testing.T) {
	t.Parallel()
	srv := startOutageServer(t)
	srv.kill()
	rdb := redis.NewClient(redistest.Options(t, srv.addr))
	t.Cleanup(func() { _ = rdb.Close() })
	var failed atomic.Int64 // the consumer's calls that failed
	rdb.AddHook(afterCalls(func(_ []redis.Cmder, err error) {
		if err != nil {
			failed.Add(1)
		}
	}))
	prefix := redistest.Prefix(t)
	var handled atomic.Int64
	c, err := group.New(rdb, "q", "g", func(context.Context, *group.Message) error {
		handled.Add(1)
		return nil
	}, group.WithPrefix(prefix), group.WithLogger(testLogger(t)))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()

	// Two of its calls failed (each after go-redis's own retries): it
	// tried again after a failure, and Run goes on.
	var (
		returned bool
		runErr   error
	)
	require.Eventually(t, func() bool {
		select {
		case runErr = <-done:
			returned = true
			return true
		default:
			return failed.Load() >= 2
		}
	}, 15*time.Second, 10*time.Millisecond, "the consumer keeps trying while Redis is down")
	require.False(t, returned, "Run returned while Redis was down: %v", runErr)
	srv.start(t)
	q := newQueue(t, rdb, prefix, "q")
	for i := range 5 {
		_, err := q.Schedule(context.Background(), delay.Message{ID: "m" + string(rune('0'+i))}, delay.After(100*time.Millisecond))
		require.NoError(t, err)
	}
	// The consumer created its group and promotes its queue (no mover runs).
	require.Eventually(t, func() bool { return handled.Load() == 5 }, 15*time.Second, 10*time.Millisecond)
	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return within 15s of cancel")
	}
}
