package admin_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/admin"
	"github.com/delaystream/delaystream/internal/redistest"
)

// DeleteQueue refuses a queue in use (a live consumer, a promoting
// process) with ErrRunning and deletes nothing, unless forced; then no
// key of the queue is left.
func TestDeleteQueueInUse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	q, err := delaystream.New(rdb, "orders", delaystream.WithPrefix(prefix))
	require.NoError(t, err)
	_, err = q.Handle("billing", func(context.Context, *delaystream.Delivery) error { return nil }, delaystream.WithConsumerName("w1"))
	require.NoError(t, err)
	_, err = q.Schedule(ctx, delaystream.Message{ID: "a"}, delaystream.After(time.Hour))
	require.NoError(t, err)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- q.Run(rctx) }()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()
	in, err := admin.New(rdb, prefix)
	require.NoError(t, err)
	var res admin.DeleteQueueResult
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		res, err = in.DeleteQueue(ctx, "orders", admin.ActionOptions{DryRun: true})
		assert.NoError(c, err)
		assert.Equal(c, []string{"billing/w1", "mover"}, res.InUse)
	}, 30*time.Second, 50*time.Millisecond)
	before := redistest.Keys(t, rdb, prefix)
	_, err = in.DeleteQueue(ctx, "orders", admin.ActionOptions{})
	require.ErrorIs(t, err, delaystream.ErrRunning)
	assert.Contains(t, err.Error(), "billing/w1, mover")
	assert.Equal(t, before, redistest.Keys(t, rdb, prefix), "refused: nothing deleted")

	res, err = in.DeleteQueue(ctx, "orders", admin.ActionOptions{Force: true})
	require.NoError(t, err)
	assert.Equal(t, len(before), res.Keys)
	n, err := q.Len(ctx)
	require.NoError(t, err)
	assert.Zero(t, n, "the waiting message is gone")
}
