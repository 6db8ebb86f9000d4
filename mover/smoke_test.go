package mover_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/delay"
	"github.com/delaystream/delaystream/internal/redistest"
	"github.com/delaystream/delaystream/mover"
	"github.com/delaystream/delaystream/stream"
)

func smoke(t *testing.T, rdb redis.UniversalClient, prefix string) {
	ctx := context.Background()
	q, err := delay.New(rdb, "smoke", delay.WithPrefix(prefix))
	require.NoError(t, err)
	var items []delay.Item
	for i := 0; i < 300; i++ {
		items = append(items, delay.Item{Message: delay.Message{Payload: []byte("x")}, When: delay.After(time.Duration(i) * time.Millisecond)})
	}
	res, err := q.ScheduleBatch(ctx, items)
	require.NoError(t, err)
	require.Equal(t, delay.Created, res[0].Outcome)
	m, err := mover.New(rdb, "smoke", mover.WithPrefix(prefix))
	require.NoError(t, err)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- m.Run(rctx) }()
	require.Eventually(t, func() bool { n, _ := rdb.XLen(ctx, q.Keys().Main().Stream).Result(); return n == 300 }, 5*time.Second, 10*time.Millisecond)
	msgs, err := rdb.XRange(ctx, q.Keys().Main().Stream, "-", "+").Result()
	require.NoError(t, err)
	for _, x := range msgs {
		e, err := stream.Decode("s", x.ID, x.Values)
		require.NoError(t, err)
		require.False(t, e.Appended().Before(e.Envelope.Due), "early: %v < %v", e.Appended(), e.Envelope.Due)
	}
	cancel()
	require.NoError(t, <-done)
	t.Logf("counters %+v", m.Counters())
}

func TestSmokeReal(t *testing.T) {
	smoke(t, redistest.Client(t), redistest.Prefix(t))
}

func TestSmokeMini(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	smoke(t, rdb, "mini")
}
