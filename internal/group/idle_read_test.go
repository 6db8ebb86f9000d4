package group_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
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
// process's mover does. A subscription rebuilt meanwhile (its health
// check timed out on a loaded machine, which the consumer logs) reads
// both streams once more, as announcements may have been lost.
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
			resubs := &resubscriptions{}
			c := h.consumerOn(rdb, "g", rec.ack, append(opts, group.WithLogger(slog.New(resubs)))...)
			r := start(t, c.Run)
			// Subscribed: the reads every subscription makes come before the
			// first announced message's.
			waitSubscribers(t, h.rdb, 1, h.keys.Main().Arrivals, h.keys.Retry("g").Arrivals)
			h.schedule([]string{"first"}, 0)
			waitFor(t, 5*time.Second, func() bool { return rec.total() == 1 }, "the first delivered")
			all, empty, own, rebuilt := reads.all.Load(), reads.empty.Load(), rides.reads.Load(), resubs.n.Load()

			const idle = 3 * time.Second
			h.schedule([]string{"later"}, idle)
			waitFor(t, idle+5*time.Second, func() bool { return rec.total() == 2 }, "the later one delivered")
			extra := 2 * (resubs.n.Load() - rebuilt) // both streams read after each rebuild
			if extra > 0 {
				t.Logf("the subscription was rebuilt while idle: %d more reads allowed", extra)
			}
			assert.LessOrEqual(t, reads.empty.Load()-empty, extra, "empty reads while idle over 3 s (a 1 s blocking read would make 3)")
			assert.LessOrEqual(t, reads.all.Load()-all, 1+extra, "reads while idle over 3 s")
			assert.GreaterOrEqual(t, reads.all.Load()-all, int64(1), "the later one is read")
			assert.LessOrEqual(t, rides.reads.Load()-own, tc.ownReads+extra, "reads of its own while idle over 3 s")
			if t.Failed() {
				t.Logf("the consumer's log:\n%s", resubs)
			}
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

// resubscriptions counts the consumer's log records of a rebuilt pub/sub
// subscription, and keeps every record for a failure's report.
type resubscriptions struct {
	n    atomic.Int64
	mu   sync.Mutex
	recs []string
}

func (r *resubscriptions) Enabled(context.Context, slog.Level) bool { return true }
func (r *resubscriptions) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *resubscriptions) WithGroup(string) slog.Handler            { return r }
func (r *resubscriptions) Handle(_ context.Context, rec slog.Record) error {
	if strings.HasPrefix(rec.Message, "pub/sub subscription failed") {
		r.n.Add(1)
	}
	line := rec.Time.Format("15:04:05.000") + " " + rec.Level.String() + " " + rec.Message
	rec.Attrs(func(a slog.Attr) bool {
		line += " " + a.String()
		return true
	})
	r.mu.Lock()
	r.recs = append(r.recs, line)
	r.mu.Unlock()
	return nil
}

func (r *resubscriptions) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.recs, "\n")
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
