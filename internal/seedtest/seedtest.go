// Package seedtest writes a known state of two queues for the tests of
// the operator tools (package admin, the delaystream command), so that
// they read and act on the same figures.
package seedtest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/internal/stream"
)

// Seed writes, under prefix:
//
//   - queue "orders" (no mover runs): "late" due 1 min ago (overdue,
//     payload "overdue one"), "soon" in 1 h ({"order":5001}, header
//     tenant=acme), "later" in 2 h (a msgpack payload);
//   - queue "jobs" (its mover and two groups ran, then stopped): 3
//     messages "job-1".."job-3" ("job payload <n>") handled; group
//     "billing" dead-lettered each ("card declined"), group "audit"
//     acknowledged each; a foreign member "\x02junk" quarantined by its
//     mover.
func Seed(t testing.TB, rdb redis.UniversalClient, prefix string) {
	t.Helper()
	ctx := context.Background()
	orders, err := delaystream.New(rdb, "orders", delaystream.WithPrefix(prefix))
	require.NoError(t, err)
	_, err = orders.Schedule(ctx, delaystream.Message{ID: "late", Payload: []byte("overdue one")},
		delaystream.At(time.Now().Add(-time.Minute)))
	require.NoError(t, err)
	_, err = orders.Schedule(ctx, delaystream.Message{ID: "soon", Payload: []byte(`{"order":5001}`),
		Headers: map[string]string{"tenant": "acme"}}, delaystream.After(time.Hour))
	require.NoError(t, err)
	_, err = delaystream.Schedule(ctx, orders, delaystream.Message{ID: "later"}, map[string]any{"order": 5002}, delaystream.After(2*time.Hour))
	require.NoError(t, err)

	jobs, err := delaystream.New(rdb, "jobs", delaystream.WithPrefix(prefix), delaystream.WithDrainTimeout(time.Second),
		delaystream.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	for i := 1; i <= 3; i++ {
		_, err := jobs.Schedule(ctx, delaystream.Message{ID: fmt.Sprintf("job-%d", i), Payload: []byte(fmt.Sprintf("job payload %d", i))},
			delaystream.After(0))
		require.NoError(t, err)
	}
	billing, err := jobs.Handle("billing", func(context.Context, *delaystream.Delivery) error {
		return delaystream.DeadLetter(errors.New("card declined"))
	})
	require.NoError(t, err)
	audit, err := jobs.Handle("audit", func(context.Context, *delaystream.Delivery) error { return nil })
	require.NoError(t, err)
	// A member of no kind the library writes, due now: the mover
	// quarantines it.
	layout, err := stream.NewLayout(prefix, "jobs", 1)
	require.NoError(t, err)
	require.NoError(t, rdb.ZAdd(ctx, layout.Shard(0).Main().Delayed, redis.Z{Score: float64(time.Now().UnixMilli()), Member: "\x02junk"}).Err())

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- jobs.Run(runCtx) }()
	require.Eventually(t, func() bool {
		return billing.Counters().DeadLettered == 3 && audit.Counters().Acked == 3 && quarantined(jobs) == 1
	}, 30*time.Second, 10*time.Millisecond)
	stop()
	require.NoError(t, <-done)
}

func quarantined(q *delaystream.Queue) int {
	qs, err := q.Quarantine(context.Background(), "", 10)
	if err != nil {
		return -1
	}
	return len(qs)
}
