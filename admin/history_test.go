package admin_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/admin"
	"github.com/delaystream/delaystream/internal/history"
	"github.com/delaystream/delaystream/internal/redistest"
	"github.com/delaystream/delaystream/internal/seedtest"
	"github.com/delaystream/delaystream/internal/stream"
)

// The history counts every transition once, per group, summed over the
// shards, in the totals and in the minute and hour buckets alike; the
// buckets expire by themselves and the totals do not.
func TestHistory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	const shards = 3
	q, err := delaystream.New(rdb, "orders", delaystream.WithPrefix(prefix), delaystream.WithShards(shards),
		delaystream.WithDrainTimeout(time.Second), delaystream.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	_, err = q.Handle("billing", func(_ context.Context, d *delaystream.Delivery) error {
		switch {
		case d.ID == "drop":
			return delaystream.Drop(errors.New("not ours"))
		case d.ID == "poison", d.ID == "once" && d.Attempt == 1:
			return delaystream.RetryAfter(time.Millisecond, errors.New("failed"))
		}
		return nil
	}, delaystream.WithMaxAttempts(2))
	require.NoError(t, err)
	_, err = q.Handle("audit", func(context.Context, *delaystream.Delivery) error { return nil })
	require.NoError(t, err)

	ids := []string{"drop", "poison", "once"}
	for i := range 10 {
		ids = append(ids, "m"+string(rune('a'+i)))
	}
	for _, id := range ids {
		_, err := q.Schedule(ctx, delaystream.Message{ID: id}, delaystream.After(0))
		require.NoError(t, err)
	}
	// A member promotion cannot read: quarantined.
	l, err := stream.NewLayout(prefix, "orders", shards)
	require.NoError(t, err)
	require.NoError(t, rdb.ZAdd(ctx, l.Shard(1).Main().Delayed, redis.Z{Member: "\x02unreadable", Score: 1}).Err())

	want := admin.HistoryCounts{Promoted: 13, Quarantined: 1, Groups: map[string]admin.GroupHistory{
		"billing": {Handled: 11, Dropped: 1, Retried: 2, DeadLettered: 1},
		"audit":   {Handled: 13},
	}}
	in, err := admin.New(rdb, prefix)
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- q.Run(runCtx) }()
	var h admin.History
	require.Eventually(t, func() bool {
		h, err = in.History(ctx, "orders")
		return err == nil && assert.ObjectsAreEqual(want, h.Totals)
	}, 20*time.Second, 10*time.Millisecond, "history never reached %+v", want)
	cancel()
	require.NoError(t, <-done)

	// Nothing counted twice once the queue stopped, and the windows hold
	// what the totals hold (all of it happened in the last minutes).
	h, err = in.History(ctx, "orders")
	require.NoError(t, err)
	assert.Equal(t, want, h.Totals)
	assert.Equal(t, want, h.LastHour)
	assert.Equal(t, want, h.LastDay)
	require.Len(t, h.Minutes, 60)
	require.Len(t, h.Hours, 24)
	var sum admin.HistoryCounts
	for i, b := range h.Minutes {
		assert.True(t, b.Start.Equal(h.Now.Truncate(time.Minute).Add(time.Duration(i-59)*time.Minute)), "minute %d starts at %s", i, b.Start)
		sum.Promoted += b.Promoted
		sum.Quarantined += b.Quarantined
	}
	assert.Equal(t, want.Promoted, sum.Promoted, "the minutes add up to the totals")
	assert.Equal(t, want.Quarantined, sum.Quarantined)
	assert.True(t, h.Hours[23].Start.Equal(h.Now.Truncate(time.Hour)), "the last hour starts at %s", h.Hours[23].Start)

	// Buckets expire by themselves, totals do not.
	k := l.Shard(1)
	ttl, err := rdb.TTL(ctx, k.HistoryTotals()).Result()
	require.NoError(t, err)
	assert.Equal(t, time.Duration(-1), ttl, "totals never expire")
	keys, err := rdb.Keys(ctx, stream.EscapeGlob(k.HistoryTotals())+":*").Result()
	require.NoError(t, err)
	require.NotEmpty(t, keys)
	for _, key := range keys {
		ttl, err := rdb.TTL(ctx, key).Result()
		require.NoError(t, err)
		life := history.HourLife
		if key[len(k.HistoryTotals())+1] == 'm' {
			life = history.MinuteLife
		}
		assert.True(t, ttl > life-time.Minute && ttl <= life, "%s expires in %s, want about %s", key, ttl, life)
	}

	_, err = in.History(ctx, "nosuch")
	require.ErrorIs(t, err, delaystream.ErrNotFound)
}

// Reading a queue whose record is gone (evicted, or deleted by hand) does
// not write it again: the queue does not reappear by being looked at.
func TestReadsDoNotRecreateTheRecord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	seedtest.Seed(t, rdb, prefix)
	in, err := admin.New(rdb, prefix)
	require.NoError(t, err)
	l, err := stream.NewLayout(prefix, "jobs", 1)
	require.NoError(t, err)
	require.NoError(t, rdb.Del(ctx, l.Meta()).Err())
	rs, err := in.Stats(ctx, "jobs")
	require.NoError(t, err, "a queue without its record is still read (its keys are there)")
	assert.Len(t, rs[0].Groups, 2)
	_, err = in.History(ctx, "jobs")
	require.NoError(t, err)
	n, err := rdb.Exists(ctx, l.Meta()).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "the record was written again by a read")
}
