package group_test

import (
	"context"
	"fmt"
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

// An idle consumer of an unsharded queue makes no reads: it reads when the
// movers announce an arrival (at once), and stops at once when its ctx is
// cancelled (no blocking read to wait out).
func TestIdleConsumerReadsWhenAnnounced(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	reads := newCallCounter("xreadgroup")
	rdb := redistest.Client(t)
	rdb.AddHook(reads)
	rec := newRecorder()
	c := h.consumerOn(rdb, "g", rec.ack)
	r := start(t, c.Run)
	waitFor(t, 5*time.Second, func() bool { return reads.n.Load() > 0 }, "reading")
	time.Sleep(time.Second) // subscribed
	before := reads.n.Load()
	time.Sleep(3 * time.Second)
	assert.Equal(t, before, reads.n.Load(), "reads while idle over 3 s (a 1 s blocking read would make 3)")

	scheduled := time.Now()
	h.schedule([]string{"now"}, 0)
	waitFor(t, 5*time.Second, func() bool { return rec.total() == 1 }, "delivered")
	took := rec.get("now")[0].At.Sub(scheduled)
	t.Logf("scheduled to handled: %s", took)
	// Typically 10-60 ms; CI, its TLS pass sharing 2 cores with the other
	// packages, once took 677 ms. What this tells apart is the 30 s poll.
	assert.Less(t, took, 2*time.Second, "read when announced, not at the 30 s poll")

	stopped := r.stop(t)
	t.Logf("Run returned %s after the cancel", stopped)
	assert.Less(t, stopped, 500*time.Millisecond, "nothing to wait out at shutdown")
}

// One process with a consumer on each of 100 queues, all on one client
// with go-redis's default pool (10 connections per CPU): no reader holds a
// connection of the pool while it waits, so promotion, reads and acks go
// on, and one message due on each queue is delivered within seconds.
func TestManyQueuesOneClient(t *testing.T) {
	t.Parallel()
	const queues = 100
	ctx := context.Background()
	prefix := redistest.Prefix(t)
	rdb := redis.NewClient(redistest.Options(t, redistest.Addr(t)))
	t.Cleanup(func() { _ = rdb.Close() })
	var handled atomic.Int64
	var rs []*runner
	for i := range queues {
		c, err := group.New(rdb, fmt.Sprintf("q%d", i), "g", func(context.Context, *group.Message) error {
			handled.Add(1)
			return nil
		}, group.WithPrefix(prefix), group.WithLogger(testLogger()))
		require.NoError(t, err)
		require.NoError(t, c.CreateGroup(ctx))
		rs = append(rs, start(t, c.Run))
	}
	time.Sleep(time.Second) // started
	scheduled := time.Now()
	for i := range queues {
		q, err := delay.New(rdb, fmt.Sprintf("q%d", i), delay.WithPrefix(prefix))
		require.NoError(t, err)
		_, err = q.Schedule(ctx, delay.Message{Payload: []byte("p")}, delay.After(0))
		require.NoError(t, err)
	}
	waitFor(t, 10*time.Second, func() bool { return handled.Load() == queues }, "all %d delivered", queues)
	t.Logf("%d queues on one client: all delivered %s after scheduling", queues, time.Since(scheduled))
	stopAll(t, rs...)
}
