package admin

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/internal/redistest"
)

// A running consumer is live, also while it has nothing to read for
// longer than LiveWithin (shortened here); once its process stops it is
// gone at once, still listed, with its idle time; on 1 and 4 shards.
func TestConsumersLiveOrGone(t *testing.T) {
	t.Parallel()
	for _, shards := range []int{1, 4} {
		t.Run(fmt.Sprint("shards=", shards), func(t *testing.T) {
			t.Parallel()
			testLive(t, shards)
		})
	}
}

func testLive(t *testing.T, shards int) {
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	q, err := delaystream.New(rdb, "orders", delaystream.WithPrefix(prefix), delaystream.WithShards(shards))
	require.NoError(t, err)
	_, err = q.Handle("billing", func(context.Context, *delaystream.Delivery) error { return nil },
		delaystream.WithConsumerName("worker-1"))
	require.NoError(t, err)
	_, err = q.Schedule(ctx, delaystream.Message{ID: "a"}, delaystream.After(0))
	require.NoError(t, err)
	in, err := New(rdb, prefix)
	require.NoError(t, err)
	in.liveWithin = time.Second

	consumer := func() ConsumerInfo {
		t.Helper()
		gs, err := in.Groups(ctx, "orders")
		require.NoError(t, err)
		require.Len(t, gs, 1)
		require.Len(t, gs[0].ConsumerList, 1)
		return gs[0].ConsumerList[0]
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- q.Run(rctx) }()
	defer func() {
		cancel()
		<-done
	}()
	require.Eventually(t, func() bool {
		gs, err := in.Groups(ctx, "orders")
		return err == nil && len(gs) == 1 && len(gs[0].ConsumerList) == 1
	}, 10*time.Second, 20*time.Millisecond)
	// Running for longer than liveWithin, it stays live: looked at every
	// 200 ms over a span longer than the threshold.
	require.Never(t, func() bool {
		gs, err := in.Groups(ctx, "orders")
		return err != nil || len(gs) != 1 || len(gs[0].ConsumerList) != 1 || !gs[0].ConsumerList[0].Live
	}, 2*in.liveWithin, 200*time.Millisecond, "a running consumer stays live")
	cancel()
	require.NoError(t, <-done)
	done <- nil // for the deferred wait
	c := consumer()
	assert.False(t, c.Live, "gone once its Run returned")
	assert.Equal(t, "worker-1", c.Name)
}
