package delaystream_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/internal/redistest"
	"github.com/delaystream/delaystream/internal/stream"
)

// Locate finds a message in every state, on 1 and 4 shards: waiting
// (plain and generated ids), ready for a group that has not read it,
// pending in a consumer, retrying, dead-lettered, quarantined; a message
// handled by a group is not listed for it, and an unknown id is found
// nowhere.
func TestLocate(t *testing.T) {
	t.Parallel()
	for _, shards := range []int{1, 4} {
		t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) {
			t.Parallel()
			testLocate(t, shards)
		})
	}
}

func testLocate(t *testing.T, shards int) {
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	opts := []delaystream.Option{delaystream.WithPrefix(prefix), delaystream.WithShards(shards), delaystream.WithDrainTimeout(100 * time.Millisecond)}

	// A group that exists but does not read: what is promoted later is
	// ready for it.
	lazy, err := delaystream.New(rdb, "orders", append(opts, delaystream.WithoutPromotion())...)
	require.NoError(t, err)
	_, err = lazy.Handle("lazy", func(context.Context, *delaystream.Delivery) error { return nil })
	require.NoError(t, err)
	l, err := stream.NewLayout(prefix, "orders", shards)
	require.NoError(t, err)
	lctx, lcancel := context.WithCancel(ctx)
	ldone := make(chan error, 1)
	go func() { ldone <- lazy.Run(lctx) }()
	require.Eventually(t, func() bool { // Run has created the group on every shard
		for i := range shards {
			if ok, _ := rdb.SIsMember(ctx, l.Shard(i).Groups(), "lazy").Result(); !ok {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond)
	lcancel()
	require.NoError(t, <-ldone)

	q, err := delaystream.New(rdb, "orders", opts...)
	require.NoError(t, err)
	release := make(chan struct{})
	holding := make(chan struct{}, 1)
	settled := make(chan string, 16)
	_, err = q.Handle("billing", func(ctx context.Context, d *delaystream.Delivery) error {
		switch d.ID {
		case "p1":
			holding <- struct{}{}
			<-release
			return nil
		case "r1":
			return delaystream.RetryAfter(time.Hour, errors.New("try later"))
		case "d1":
			return delaystream.DeadLetter(errors.New("bad order"))
		}
		return nil
	}, delaystream.WithConsumerName("worker-1"), delaystream.WithHooks(delaystream.Hooks{
		OnHandled: func(d *delaystream.Delivery, _ delaystream.HandlerOutcome, _ time.Duration) { settled <- d.ID },
	}))
	require.NoError(t, err)
	_, err = q.Handle("audit", func(context.Context, *delaystream.Delivery) error { return nil })
	require.NoError(t, err)

	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- q.Run(rctx) }()
	defer func() {
		close(release)
		cancel()
		require.NoError(t, <-done)
	}()

	for _, id := range []string{"r1", "d1", "p1"} {
		_, err = q.Schedule(ctx, delaystream.Message{ID: id, Payload: []byte(id)}, delaystream.After(0))
		require.NoError(t, err)
	}
	_, err = q.Schedule(ctx, delaystream.Message{ID: "w1"}, delaystream.After(time.Hour))
	require.NoError(t, err)
	gen, err := q.Schedule(ctx, delaystream.Message{}, delaystream.After(time.Hour))
	require.NoError(t, err)
	// A waiting member without an envelope: the mover quarantines it.
	require.NoError(t, rdb.ZAdd(ctx, l.Shard(l.ShardOf("q1")).Main().Delayed, redis.Z{Member: "q1", Score: 1}).Err())

	got := map[string]bool{}
	deadline := time.After(30 * time.Second)
	for !(got["r1"] && got["d1"]) {
		select {
		case id := <-settled:
			got[id] = true
		case <-deadline:
			t.Fatal("r1 and d1 were not settled")
		}
	}
	select {
	case <-holding:
	case <-deadline:
		t.Fatal("p1 was not delivered")
	}

	at := func(id string) delaystream.Location {
		t.Helper()
		loc, err := q.Locate(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, id, loc.ID)
		assert.Equal(t, l.ShardOf(id), loc.Shard)
		assert.False(t, loc.Partial)
		return loc
	}
	places := func(loc delaystream.Location) map[string]delaystream.Place {
		out := map[string]delaystream.Place{}
		for _, g := range loc.Groups {
			out[g.Group+"/"+fmt.Sprint(g.RetryLane)] = g.Place
		}
		return out
	}

	loc := at("w1")
	require.NotNil(t, loc.Waiting)
	assert.WithinDuration(t, time.Now().Add(time.Hour), loc.Waiting.Due, time.Minute)
	assert.Empty(t, loc.Groups)
	loc = at(gen.ID)
	require.NotNil(t, loc.Waiting, "a generated id")
	assert.Equal(t, gen.Due.UnixMilli(), loc.Waiting.Due.UnixMilli())

	// p1: pending in billing's consumer, handled by audit (not listed),
	// ready for lazy.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		loc := at("p1")
		assert.Equal(c, map[string]delaystream.Place{"billing/false": delaystream.PlacePending, "lazy/false": delaystream.PlaceReady}, places(loc))
	}, 10*time.Second, 20*time.Millisecond)
	loc = at("p1")
	assert.Nil(t, loc.Waiting)
	for _, g := range loc.Groups {
		if g.Group == "billing" {
			assert.Equal(t, "worker-1", g.Consumer)
			assert.Equal(t, int64(1), g.Deliveries)
			assert.Equal(t, 1, g.Attempt)
			assert.NotEmpty(t, g.EntryID)
		}
	}

	// audit acknowledges within its ack delay: wait for it.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, map[string]delaystream.Place{"billing/false": delaystream.PlaceRetrying, "lazy/false": delaystream.PlaceReady}, places(at("r1")))
		assert.Equal(c, map[string]delaystream.Place{"billing/false": delaystream.PlaceDeadLettered, "lazy/false": delaystream.PlaceReady}, places(at("d1")))
	}, 10*time.Second, 20*time.Millisecond)
	loc = at("r1")
	for _, g := range loc.Groups {
		if g.Place == delaystream.PlaceRetrying {
			assert.Equal(t, 2, g.Attempt)
			assert.WithinDuration(t, time.Now().Add(time.Hour), g.NextAttempt, time.Minute)
			assert.NotEmpty(t, g.EntryID)
		}
	}

	loc = at("d1")
	for _, g := range loc.Groups {
		if g.Place == delaystream.PlaceDeadLettered {
			assert.Equal(t, delaystream.ReasonHandler, g.Reason)
			assert.Contains(t, g.LastError, "bad order")
			if shards > 1 {
				assert.Regexp(t, `^\d+-\d+@\d+$`, g.EntryID)
			} else {
				assert.Regexp(t, `^\d+-\d+$`, g.EntryID)
			}
		}
	}

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		loc := at("q1")
		if assert.Len(c, loc.Quarantined, 1) {
			assert.Equal(c, "missing envelope", loc.Quarantined[0].Reason)
			assert.Empty(c, loc.Quarantined[0].Group)
		}
	}, 10*time.Second, 20*time.Millisecond)

	loc = at("nope")
	assert.False(t, loc.Found())

	_, err = q.Locate(ctx, "")
	require.ErrorIs(t, err, delaystream.ErrInvalidMessage)
}

// A stream longer than the scan limit is searched in part, and Locate
// says so.
func TestLocatePartial(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	q, err := delaystream.New(rdb, "orders", delaystream.WithPrefix(prefix))
	require.NoError(t, err)
	l, err := stream.NewLayout(prefix, "orders", 1)
	require.NoError(t, err)
	pipe := rdb.Pipeline()
	for i := range delaystream.LocateScanLimit + 1 {
		pipe.XAdd(ctx, &redis.XAddArgs{Stream: l.Shard(0).Main().Stream, Values: []any{"i", fmt.Sprint("other", i), "d", "1", "e", "x"}})
	}
	_, err = pipe.Exec(ctx)
	require.NoError(t, err)
	loc, err := q.Locate(ctx, "wanted")
	require.NoError(t, err)
	assert.True(t, loc.Partial)
	assert.False(t, loc.Found())
	loc, err = q.Locate(ctx, "other3")
	require.NoError(t, err)
	assert.True(t, loc.Found(), "an entry within the limit is found")
	assert.Len(t, loc.Unread, 1, "in the stream of a queue without groups")
}
