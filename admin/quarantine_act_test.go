package admin_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/admin"
	"github.com/delaystream/delaystream/internal/redistest"
	"github.com/delaystream/delaystream/internal/stream"
)

// A quarantined message whose envelope is readable is restored (it waits
// again, and the entry is gone); one without an envelope cannot be, and
// is deleted; unknown and malformed entry ids are reported or refused;
// on 1 and 4 shards.
func TestRestoreAndDeleteQuarantined(t *testing.T) {
	t.Parallel()
	for _, shards := range []int{1, 4} {
		t.Run(fmt.Sprint("shards=", shards), func(t *testing.T) {
			t.Parallel()
			testQuarantineActions(t, shards)
		})
	}
}

func testQuarantineActions(t *testing.T, shards int) {
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	q, err := delaystream.New(rdb, "orders", delaystream.WithPrefix(prefix), delaystream.WithShards(shards))
	require.NoError(t, err)
	l, err := stream.NewLayout(prefix, "orders", shards)
	require.NoError(t, err)
	// "fixable": a readable envelope with an invalid due time; "orphan":
	// a member without an envelope.
	_, err = q.Schedule(ctx, delaystream.Message{ID: "fixable", Payload: []byte("pay"), Headers: map[string]string{"k": "v"}}, delaystream.After(time.Hour))
	require.NoError(t, err)
	require.NoError(t, rdb.ZAdd(ctx, l.Shard(l.ShardOf("fixable")).Main().Delayed, redis.Z{Member: "fixable", Score: -5.5}).Err())
	require.NoError(t, rdb.ZAdd(ctx, l.Shard(l.ShardOf("orphan")).Main().Delayed, redis.Z{Member: "orphan", Score: 1}).Err())
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- q.Run(rctx) }()

	in, err := admin.New(rdb, prefix)
	require.NoError(t, err)
	var qs []delaystream.Quarantined
	require.Eventually(t, func() bool {
		qs, err = in.Quarantine(ctx, "orders", admin.ListOptions{})
		return err == nil && len(qs) == 2
	}, 10*time.Second, 20*time.Millisecond)
	cancel()
	require.NoError(t, <-done)
	byID := map[string]string{}
	for _, e := range qs {
		byID[e.ID] = e.EntryID
		if e.ID == "fixable" {
			assert.Equal(t, "pay", string(e.Payload), "the payload of a readable envelope, for previews")
		}
	}

	res, err := in.RestoreQuarantined(ctx, "orders", time.Hour, byID["fixable"], byID["orphan"], "1-1"+suffix(shards))
	require.NoError(t, err)
	assert.Equal(t, 1, res.Done)
	assert.Equal(t, []string{byID["orphan"]}, res.Unrecoverable)
	assert.Equal(t, []string{"1-1" + suffix(shards)}, res.NotFound)
	env, err := q.Get(ctx, "fixable")
	require.NoError(t, err, "restored: waiting again")
	assert.Equal(t, "pay", string(env.Payload))
	assert.Equal(t, map[string]string{"k": "v"}, env.Headers)
	assert.WithinDuration(t, time.Now().Add(time.Hour), env.Due, time.Minute)

	qs, err = in.Quarantine(ctx, "orders", admin.ListOptions{})
	require.NoError(t, err)
	require.Len(t, qs, 1)
	assert.Equal(t, "orphan", qs[0].ID)

	_, err = in.DeleteQuarantined(ctx, "orders", "garbage")
	require.ErrorIs(t, err, delaystream.ErrInvalidOption)
	res, err = in.DeleteQuarantined(ctx, "orders", byID["orphan"])
	require.NoError(t, err)
	assert.Equal(t, 1, res.Done)
	qs, err = in.Quarantine(ctx, "orders", admin.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, qs)
	res, err = in.DeleteQuarantined(ctx, "orders", byID["orphan"])
	require.NoError(t, err)
	assert.Equal(t, []string{byID["orphan"]}, res.NotFound)
}

func suffix(shards int) string {
	if shards > 1 {
		return "@0"
	}
	return ""
}
