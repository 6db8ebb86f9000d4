package delaystream_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/admin"
	"github.com/delaystream/delaystream/internal/loctest"
	"github.com/delaystream/delaystream/internal/redistest"
	"github.com/delaystream/delaystream/internal/stream"
)

// A group that keeps handled records answers Locate after the stream
// entry is gone: when, the attempt, the outcome and the consumer. A group
// that keeps none is not listed. Records older than the retention are
// removed as new ones are written.
func TestLocateHandled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	const shards = 2
	q, err := delaystream.New(rdb, "orders", delaystream.WithPrefix(prefix), delaystream.WithShards(shards),
		delaystream.WithDrainTimeout(time.Second))
	require.NoError(t, err)
	_, err = q.Handle("billing", func(_ context.Context, d *delaystream.Delivery) error {
		switch {
		case d.ID == "dropped":
			return delaystream.Drop(errors.New("not ours"))
		case d.ID == "dead":
			return delaystream.DeadLetter(errors.New("bad"))
		case d.ID == "second" && d.Attempt == 1:
			return delaystream.RetryAfter(time.Millisecond, errors.New("again"))
		}
		return nil
	}, delaystream.WithHandledRecords(time.Hour), delaystream.WithConsumerName("billing-1"),
		delaystream.WithTrimInterval(100*time.Millisecond))
	require.NoError(t, err)
	_, err = q.Handle("audit", func(context.Context, *delaystream.Delivery) error { return nil },
		delaystream.WithTrimInterval(100*time.Millisecond))
	require.NoError(t, err)
	_, err = q.Handle("brief", func(context.Context, *delaystream.Delivery) error { return nil },
		delaystream.WithHandledRecords(time.Second))
	require.NoError(t, err)

	start := time.Now()
	for _, id := range []string{"ok", "dropped", "dead", "second"} {
		_, err := q.Schedule(ctx, delaystream.Message{ID: id}, delaystream.After(0))
		require.NoError(t, err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- q.Run(runCtx) }()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()
	l, err := stream.NewLayout(prefix, "orders", shards)
	require.NoError(t, err)
	// Every message settled by every group and trimmed from the streams.
	require.Eventually(t, func() bool {
		for i := range shards {
			if n, err := rdb.XLen(ctx, l.Shard(i).Main().Stream).Result(); err != nil || n > 0 {
				return false
			}
		}
		loc, err := q.Locate(ctx, "second")
		return err == nil && len(loctest.InGroups(loc)) == 2 && loctest.InGroups(loc)[0].Kind == delaystream.PlaceHandled &&
			loctest.InGroups(loc)[1].Kind == delaystream.PlaceHandled // billing's and brief's records
	}, 20*time.Second, 10*time.Millisecond)

	loc, err := q.Locate(ctx, "ok")
	require.NoError(t, err)
	require.True(t, loc.Found())
	require.Len(t, loctest.InGroups(loc), 2, "billing and brief keep records, audit does not: %+v", loctest.InGroups(loc))
	b := loctest.InGroups(loc)[0]
	assert.Equal(t, "billing", b.Group)
	assert.Equal(t, delaystream.PlaceHandled, b.Kind)
	assert.Equal(t, 1, b.Attempt)
	assert.Equal(t, "billing-1", b.Consumer)
	assert.False(t, b.Dropped)
	assert.WithinRange(t, b.HandledAt, start.Add(-time.Second), time.Now().Add(time.Second), "by the Redis clock")
	assert.Equal(t, "brief", loctest.InGroups(loc)[1].Group)

	loc, err = q.Locate(ctx, "dropped")
	require.NoError(t, err)
	require.NotEmpty(t, loctest.InGroups(loc))
	assert.Equal(t, delaystream.PlaceHandled, loctest.InGroups(loc)[0].Kind)
	assert.True(t, loctest.InGroups(loc)[0].Dropped)

	loc, err = q.Locate(ctx, "second")
	require.NoError(t, err)
	assert.Equal(t, 2, loctest.InGroups(loc)[0].Attempt, "handled at its second attempt")

	loc, err = q.Locate(ctx, "dead")
	require.NoError(t, err)
	places := map[delaystream.PlaceKind]int{}
	for _, p := range loctest.InGroups(loc) {
		places[p.Kind]++
	}
	assert.Equal(t, map[delaystream.PlaceKind]int{delaystream.PlaceDeadLettered: 1, delaystream.PlaceHandled: 1}, places,
		"dead-lettered in billing, handled by brief")

	// brief keeps records for a second: new acknowledgements remove the
	// older ones.
	tick := 0
	require.Eventually(t, func() bool {
		tick++
		if _, err := q.Schedule(ctx, delaystream.Message{ID: "tick-" + strconv.Itoa(tick)}, delaystream.After(0)); err != nil {
			return false
		}
		loc, err := q.Locate(ctx, "ok")
		return err == nil && len(loctest.InGroups(loc)) == 1 && loctest.InGroups(loc)[0].Group == "billing"
	}, 20*time.Second, 100*time.Millisecond, "brief's record of ok never expired")
}

// A queue built WithoutHistory counts nothing in the history: its promote
// calls and its group's acknowledgements go on without the counts.
func TestWithoutHistory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	q, err := delaystream.New(rdb, "quiet", delaystream.WithPrefix(prefix), delaystream.WithoutHistory(),
		delaystream.WithDrainTimeout(time.Second))
	require.NoError(t, err)
	g, err := q.Handle("billing", func(_ context.Context, d *delaystream.Delivery) error {
		if d.ID == "fail" && d.Attempt == 1 {
			return delaystream.RetryAfter(time.Millisecond, errors.New("again"))
		}
		return nil
	}, delaystream.WithHandledRecords(time.Hour))
	require.NoError(t, err)
	for _, id := range []string{"a", "fail"} {
		_, err := q.Schedule(ctx, delaystream.Message{ID: id}, delaystream.After(0))
		require.NoError(t, err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- q.Run(runCtx) }()
	require.Eventually(t, func() bool { return g.Counters().Acked == 2 }, 20*time.Second, 10*time.Millisecond)
	cancel()
	require.NoError(t, <-done)

	in, err := admin.New(rdb, prefix)
	require.NoError(t, err)
	h, err := in.HistoryTotals(ctx, "quiet")
	require.NoError(t, err)
	assert.Equal(t, admin.HistoryCounts{}, h, "nothing counted")
	loc, err := q.Locate(ctx, "fail")
	require.NoError(t, err)
	require.Len(t, loctest.InGroups(loc), 1)
	assert.Equal(t, delaystream.PlaceHandled, loctest.InGroups(loc)[0].Kind, "handled records are kept all the same")
	assert.Equal(t, 2, loctest.InGroups(loc)[0].Attempt)
}
