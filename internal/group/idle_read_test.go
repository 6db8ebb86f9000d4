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
	"github.com/delaystream/delaystream/internal/margin"
	"github.com/delaystream/delaystream/internal/redistest"
)

// An idle consumer of an unsharded queue makes no reads: it reads when the
// movers announce an arrival (at once), and stops at once when its ctx is
// cancelled (no blocking read to wait out). Idle over 3 s: from the
// delivery of one message to that of the next, due 3 s later, its only
// read is the one that takes the second: its own when a mover elsewhere
// promotes the queue, in the promote call's pipeline when its own
// process's mover does.
func TestIdleConsumerReadsWhenAnnounced(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		own      bool  // the consumer's process promotes the queue
		ownReads int64 // its reads while idle over 3 s not in a promote call's pipeline
	}{{"mover elsewhere", false, 1}, {"own mover", true, 0}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			var opts []group.Option
			if !tc.own {
				h.startMover()
				opts = append(opts, group.WithoutPromotion())
			}
			var reads emptyReads
			rdb := redistest.Client(t)
			rdb.AddHook(reads.hook())
			rides := new(ackRides)
			rdb.AddHook(roundTrips(rides.see))
			rec := newRecorder()
			c := h.consumerOn(rdb, "g", rec.ack, opts...)
			r := start(t, c.Run)
			// Subscribed: the reads every subscription makes come before the
			// first announced message's.
			waitSubscribers(t, h.rdb, 1, h.keys.Main().Arrivals, h.keys.Retry("g").Arrivals)
			h.schedule([]string{"first"}, 0)
			waitFor(t, 5*time.Second, func() bool { return rec.total() == 1 }, "the first delivered")
			all, empty, own := reads.all.Load(), reads.empty.Load(), rides.reads.Load()

			const idle = 3 * time.Second
			h.schedule([]string{"later"}, idle)
			waitFor(t, idle+5*time.Second, func() bool { return rec.total() == 2 }, "the later one delivered")
			assert.Zero(t, reads.empty.Load()-empty, "empty reads while idle over 3 s (a 1 s blocking read would make 3)")
			assert.EqualValues(t, 1, reads.all.Load()-all, "reads while idle over 3 s")
			assert.EqualValues(t, tc.ownReads, rides.reads.Load()-own, "reads of its own while idle over 3 s")
			d := rec.get("later")[0]
			took := d.At.Sub(d.Due)
			t.Logf("due to handled: %s", took)
			// Typically 10-60 ms; CI, its TLS pass sharing 2 cores with the other
			// packages, once took 677 ms. What this tells apart is the 30 s poll.
			margin.Less(t, "announced read", took, 2*time.Second, "read when announced, not at the 30 s poll")

			// No blocking read to wait out (the reads counted above): Run
			// returns in a round trip or two, below a read's 1 s block.
			stopped := r.stop(t)
			t.Logf("Run returned %s after the cancel", stopped)
			margin.Less(t, "shutdown when idle", stopped, time.Second, "nothing to wait out at shutdown")
		})
	}
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
	var producers []*delay.Queue
	var arrivals []string
	for i := range queues {
		c, err := group.New(rdb, fmt.Sprintf("q%d", i), "g", func(context.Context, *group.Message) error {
			handled.Add(1)
			return nil
		}, group.WithPrefix(prefix), group.WithLogger(testLogger()))
		require.NoError(t, err)
		require.NoError(t, c.CreateGroup(ctx))
		rs = append(rs, start(t, c.Run))
		q, err := delay.New(rdb, fmt.Sprintf("q%d", i), delay.WithPrefix(prefix))
		require.NoError(t, err)
		producers = append(producers, q)
		arrivals = append(arrivals, q.Keys().Main().Arrivals)
	}
	waitSubscribers(t, rdb, 1, arrivals...) // started: listening for arrivals
	scheduled := time.Now()
	for _, q := range producers {
		_, err := q.Schedule(ctx, delay.Message{Payload: []byte("p")}, delay.After(0))
		require.NoError(t, err)
	}
	waitFor(t, 10*time.Second, func() bool { return handled.Load() == queues }, "all %d delivered", queues)
	t.Logf("%d queues on one client: all delivered %s after scheduling", queues, time.Since(scheduled))
	stopAll(t, rs...)
}
