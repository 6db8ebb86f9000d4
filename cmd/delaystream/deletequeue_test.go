package main

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/admin"
	"github.com/delaystream/delaystream/internal/redistest"
)

// delete-queue asks for confirmation, is refused while the queue has a
// live consumer unless --force, and deletes every key of the queue and no
// other queue's.
func TestDeleteQueue(t *testing.T) {
	t.Parallel()
	tg := single(t)
	seed(t, tg)
	rdb := tg.client(t)
	ctx := context.Background()
	keysOf := func(queue string) int {
		n := 0
		for k := range redistest.Keys(t, rdb, tg.prefix) {
			if strings.Contains(k, "{"+queue+"}") {
				n++
			}
		}
		return n
	}
	require.Positive(t, keysOf("jobs"))
	ordersKeys := keysOf("orders")
	require.Positive(t, ordersKeys)

	var res admin.DeleteQueueResult
	tg.json(t, &res, "delete-queue", "jobs", "--dry-run")
	assert.Equal(t, keysOf("jobs"), res.Keys)
	assert.Equal(t, []string{"audit", "billing"}, res.Groups)
	assert.Empty(t, res.InUse, "the seed's processes stopped")
	assert.Equal(t, exitNotConfirmd, tg.run(t, "delete-queue", "jobs").code)

	// A live consumer: refused without --force, nothing deleted.
	q, err := delaystream.New(rdb, "jobs", delaystream.WithPrefix(tg.prefix), delaystream.WithoutPromotion())
	require.NoError(t, err)
	_, err = q.Handle("billing", func(context.Context, *delaystream.Delivery) error { return nil },
		delaystream.WithConsumerName("worker-9"))
	require.NoError(t, err)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- q.Run(rctx) }()
	before := keysOf("jobs")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var res admin.DeleteQueueResult
		tg.json(t, &res, "delete-queue", "jobs", "--dry-run")
		assert.Equal(c, []string{"billing/worker-9"}, res.InUse)
	}, 30*time.Second, 50*time.Millisecond)
	r := tg.run(t, "delete-queue", "jobs", "--yes")
	assert.Equal(t, exitError, r.code)
	assert.Equal(t, "delaystream: queue jobs is in use by billing/worker-9: stop those processes first, or pass --force\n", r.stderr)
	assert.Equal(t, before, keysOf("jobs"))
	cancel()
	require.NoError(t, <-done)

	assert.Equal(t, "deleted queue jobs: "+itoa(keysOf("jobs"))+" keys\n", tg.ok(t, "delete-queue", "jobs", "--yes"))
	assert.Zero(t, keysOf("jobs"))
	assert.Equal(t, ordersKeys, keysOf("orders"), "another queue is untouched")
	assert.Equal(t, exitNotFound, tg.run(t, "stats", "jobs").code)
}

func itoa(n int) string { return strconv.Itoa(n) }
