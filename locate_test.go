package delaystream_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/admin"
	"github.com/delaystream/delaystream/internal/loctest"
	"github.com/delaystream/delaystream/internal/redistest"
	"github.com/delaystream/delaystream/internal/stream"
	"github.com/delaystream/delaystream/internal/wire"
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
	places := func(loc delaystream.Location) map[string]delaystream.PlaceKind {
		out := map[string]delaystream.PlaceKind{}
		for _, g := range loctest.InGroups(loc) {
			out[g.Group+"/"+fmt.Sprint(g.RetryLane)] = g.Kind
		}
		return out
	}

	loc := at("w1")
	require.NotNil(t, loctest.Waiting(loc))
	assert.WithinDuration(t, time.Now().Add(time.Hour), loctest.Waiting(loc).Due, time.Minute)
	assert.Empty(t, loctest.InGroups(loc))
	loc = at(gen.ID)
	require.NotNil(t, loctest.Waiting(loc), "a generated id")
	assert.Equal(t, gen.Due.UnixMilli(), loctest.Waiting(loc).Due.UnixMilli())

	// p1: pending in billing's consumer, handled by audit (not listed),
	// ready for lazy.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		loc := at("p1")
		assert.Equal(c, map[string]delaystream.PlaceKind{"billing/false": delaystream.PlacePending, "lazy/false": delaystream.PlaceReady}, places(loc))
	}, 10*time.Second, 20*time.Millisecond)
	loc = at("p1")
	assert.Nil(t, loctest.Waiting(loc))
	for _, g := range loctest.InGroups(loc) {
		if g.Group == "billing" {
			assert.Equal(t, "worker-1", g.Consumer)
			assert.Equal(t, int64(1), g.Deliveries)
			assert.Equal(t, 1, g.Attempt)
			assert.NotEmpty(t, g.EntryID)
		}
	}

	// audit acknowledges within its ack delay: wait for it.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, map[string]delaystream.PlaceKind{"billing/false": delaystream.PlaceRetrying, "lazy/false": delaystream.PlaceReady}, places(at("r1")))
		assert.Equal(c, map[string]delaystream.PlaceKind{"billing/false": delaystream.PlaceDeadLettered, "lazy/false": delaystream.PlaceReady}, places(at("d1")))
	}, 10*time.Second, 20*time.Millisecond)
	loc = at("r1")
	for _, g := range loctest.InGroups(loc) {
		if g.Kind == delaystream.PlaceRetrying {
			assert.Equal(t, 2, g.Attempt)
			assert.WithinDuration(t, time.Now().Add(time.Hour), g.Due, time.Minute)
			assert.NotEmpty(t, g.EntryID)
		}
	}

	loc = at("d1")
	for _, g := range loctest.InGroups(loc) {
		if g.Kind == delaystream.PlaceDeadLettered {
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
		if assert.Len(c, loctest.Of(loc, delaystream.PlaceQuarantined), 1) {
			assert.Equal(c, "missing envelope", loctest.Of(loc, delaystream.PlaceQuarantined)[0].Reason)
			assert.Empty(c, loctest.Of(loc, delaystream.PlaceQuarantined)[0].Group)
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
	for i := range delaystream.LocateScanLimit {
		pipe.XAdd(ctx, &redis.XAddArgs{Stream: l.Shard(0).Main().Stream, Values: []any{"i", fmt.Sprint("other", i), "d", "1", "e", "x"}})
	}
	_, err = pipe.Exec(ctx)
	require.NoError(t, err)
	loc, err := q.Locate(ctx, "wanted")
	require.NoError(t, err)
	assert.False(t, loc.Partial, "a stream of exactly the limit is searched whole")
	require.NoError(t, rdb.XAdd(ctx, &redis.XAddArgs{Stream: l.Shard(0).Main().Stream, Values: []any{"i", "wanted", "d", "1", "e", "x"}}).Err())
	loc, err = q.Locate(ctx, "wanted")
	require.NoError(t, err)
	assert.True(t, loc.Partial)
	assert.False(t, loc.Found())
	loc, err = q.Locate(ctx, "other3")
	require.NoError(t, err)
	assert.True(t, loc.Found(), "an entry within the limit is found")
	assert.Len(t, loctest.Of(loc, delaystream.PlaceUnread), 1, "in the stream of a queue without groups")
}

// A search that reads more than LocateBatch entries goes on in further
// calls, each reading at most LocateBatch, and finds the message in
// every place: in the stream on either side of a call's boundary, in a
// retry lane's set read over several calls, and in the dead letters.
func TestLocateBatches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	var log redistest.CommandLog
	counted := redis.NewClient(redistest.Options(t, redistest.Addr(t)))
	t.Cleanup(func() { _ = counted.Close() })
	counted.AddHook(&log)
	q, err := delaystream.New(counted, "orders", delaystream.WithPrefix(prefix), delaystream.WithoutPromotion())
	require.NoError(t, err)
	l, err := stream.NewLayout(prefix, "orders", 1)
	require.NoError(t, err)
	k := l.Shard(0)
	const b = delaystream.LocateBatch
	pipe := rdb.Pipeline()
	entry := func(key, id string) {
		pipe.XAdd(ctx, &redis.XAddArgs{Stream: key, Values: []any{wire.FieldDue, "1", wire.FieldID, id, wire.FieldEnvelope, "x"}})
	}
	// The main stream: the message is the last entry of the first call
	// and the last of the stream.
	for i := range 3*b + 7 {
		switch i {
		case b - 1, 3*b + 6:
			entry(k.Main().Stream, "wanted")
		default:
			entry(k.Main().Stream, fmt.Sprint("other", i))
		}
	}
	pipe.XGroupCreate(ctx, k.Main().Stream, "g", "0")
	pipe.SAdd(ctx, k.Groups(), "g")
	// The group's retry lane: a set larger than a call reads.
	r := k.Retry("g")
	for i := range 2*b + 5 {
		pipe.ZAdd(ctx, r.Delayed, redis.Z{Member: wire.RetryMember(fmt.Sprint("other", i), "1-1"), Score: float64(i)})
	}
	pipe.ZAdd(ctx, r.Delayed, redis.Z{Member: wire.RetryMember("wanted", "5-5"), Score: 7})
	// Its dead letters: the message after a call's worth of others.
	for i := range b + 3 {
		entry(k.DeadLetters("g"), fmt.Sprint("other", i))
	}
	entry(k.DeadLetters("g"), "wanted")
	_, err = pipe.Exec(ctx)
	require.NoError(t, err)

	_, err = q.Locate(ctx, "nope") // learns the groups (and loads the script)
	require.NoError(t, err)
	log.Take()
	loc, err := q.Locate(ctx, "wanted")
	require.NoError(t, err)
	calls := log.Take()
	read := (3*b + 7) + (2*b + 6) + (b + 4)
	// ZSCAN's COUNT is a hint: a call may read a few members fewer, and
	// take one call more than the entries' count alone needs.
	assert.GreaterOrEqual(t, len(calls), (read+b-1)/b, "calls %v", calls)
	assert.LessOrEqual(t, len(calls), (read+b-1)/b+3, "calls %v", calls)
	assert.False(t, loc.Partial)
	assert.Nil(t, loctest.Waiting(loc))
	var ready, retrying, dead int
	for _, p := range loctest.InGroups(loc) {
		assert.Equal(t, "g", p.Group)
		switch p.Kind {
		case delaystream.PlaceReady:
			ready++
		case delaystream.PlaceRetrying:
			retrying++
			assert.Equal(t, "5-5", p.EntryID)
			assert.Equal(t, int64(7), p.Due.UnixMilli())
		case delaystream.PlaceDeadLettered:
			dead++
		}
	}
	assert.Equal(t, 2, ready, "%+v", loctest.InGroups(loc))
	assert.Equal(t, 1, retrying, "%+v", loctest.InGroups(loc))
	assert.Equal(t, 1, dead, "%+v", loctest.InGroups(loc))
}

// deadLetterIn runs a queue with consumer groups dead (which dead-letters
// message id and acknowledges the rest) and others (which acknowledge
// everything), schedules id due now, and stops once every group has
// settled it.
func deadLetterIn(t *testing.T, rdb redis.UniversalClient, prefix string, shards int, id, dead string, others ...string) {
	t.Helper()
	ctx := context.Background()
	q, err := delaystream.New(rdb, "orders", delaystream.WithPrefix(prefix), delaystream.WithShards(shards),
		delaystream.WithDrainTimeout(time.Second))
	require.NoError(t, err)
	settled := make(chan string, 8)
	_, err = q.Handle(dead, func(_ context.Context, d *delaystream.Delivery) error {
		if d.ID == id {
			return delaystream.DeadLetter(errors.New("refused"))
		}
		return nil
	}, delaystream.WithHooks(delaystream.Hooks{OnDeadLettered: func(d *delaystream.Delivery, _ string) {
		settled <- dead + "/" + d.ID
	}}))
	require.NoError(t, err)
	for _, g := range others {
		_, err = q.Handle(g, func(context.Context, *delaystream.Delivery) error { return nil },
			delaystream.WithHooks(delaystream.Hooks{OnAcked: func(d *delaystream.Delivery, _ time.Duration) {
				settled <- g + "/" + d.ID
			}}))
		require.NoError(t, err)
	}
	stop := startRun(t, q)
	_, err = q.Schedule(ctx, delaystream.Message{ID: id}, delaystream.After(0))
	require.NoError(t, err)
	want := map[string]bool{dead + "/" + id: true}
	for _, g := range others {
		want[g+"/"+id] = true
	}
	deadline := time.After(30 * time.Second)
	for len(want) > 0 {
		select {
		case s := <-settled:
			delete(want, s)
		case <-deadline:
			t.Fatalf("not settled: %v", want)
		}
	}
	// A group new here reads the stream from its start: it also gets the
	// messages of earlier calls, which a stop could leave read and not
	// handled. Wait until each group run here has read everything and
	// holds nothing.
	l, err := stream.NewLayout(prefix, "orders", shards)
	require.NoError(t, err)
	ran := map[string]bool{dead: true}
	for _, g := range others {
		ran[g] = true
	}
	require.Eventually(t, func() bool {
		for s := range shards {
			gs, err := rdb.XInfoGroups(ctx, l.Shard(s).Main().Stream).Result()
			if err != nil {
				return false
			}
			for _, g := range gs {
				if ran[g.Name] && (g.Pending != 0 || g.Lag != 0) {
					return false
				}
			}
		}
		return true
	}, 10*time.Second, 5*time.Millisecond, "groups with messages unread or unacknowledged")
	stop() // the acknowledgements are flushed
}

// groupsOf returns the groups a location lists, with their places.
func groupsOf(loc delaystream.Location) map[string]delaystream.PlaceKind {
	out := map[string]delaystream.PlaceKind{}
	for _, g := range loctest.InGroups(loc) {
		out[g.Group] = g.Kind
	}
	return out
}

// Locate makes one call to the message's shard once the Queue knows the
// groups: the script, no SMEMBERS. A group recorded after that costs one
// call more, once, and is searched; a forgotten group is no longer
// listed, still in one call. Concurrent first Locates of a Queue agree.
func TestLocateRoundTrips(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	const shards = 4
	var log redistest.CommandLog
	counted := redis.NewClient(redistest.Options(t, redistest.Addr(t)))
	t.Cleanup(func() { _ = counted.Close() })
	counted.AddHook(&log)
	q, err := delaystream.New(counted, "orders", delaystream.WithPrefix(prefix), delaystream.WithShards(shards),
		delaystream.WithoutPromotion())
	require.NoError(t, err)
	at := func(id string, calls ...string) delaystream.Location {
		t.Helper()
		log.Take()
		loc, err := q.Locate(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, calls, log.Take(), "the calls locating %s", id)
		return loc
	}

	deadLetterIn(t, rdb, prefix, shards, "x1", "a")
	_, err = q.Locate(ctx, "x1") // learns the groups (and loads the script)
	require.NoError(t, err)
	loc := at("x1", "evalsha")
	assert.Equal(t, map[string]delaystream.PlaceKind{"a": delaystream.PlaceDeadLettered}, groupsOf(loc))

	// Group b is recorded after the Queue learnt the groups.
	deadLetterIn(t, rdb, prefix, shards, "x2", "b", "a")
	loc = at("x2", "evalsha", "evalsha")
	assert.Equal(t, map[string]delaystream.PlaceKind{"b": delaystream.PlaceDeadLettered}, groupsOf(loc))
	loc = at("x2", "evalsha")
	assert.Equal(t, map[string]delaystream.PlaceKind{"b": delaystream.PlaceDeadLettered}, groupsOf(loc))
	loc = at("x1", "evalsha")
	assert.Equal(t, map[string]delaystream.PlaceKind{"a": delaystream.PlaceDeadLettered}, groupsOf(loc))

	// Shards that record different groups (c on x1's only, d on x2's):
	// the Queue keeps every name it learnt, so they do not take turns
	// refreshing it.
	l, err := stream.NewLayout(prefix, "orders", shards)
	require.NoError(t, err)
	require.NotEqual(t, l.ShardOf("x1"), l.ShardOf("x2"))
	require.NoError(t, rdb.SAdd(ctx, l.Shard(l.ShardOf("x1")).Groups(), "c").Err())
	require.NoError(t, rdb.SAdd(ctx, l.Shard(l.ShardOf("x2")).Groups(), "d").Err())
	at("x1", "evalsha", "evalsha")
	at("x2", "evalsha", "evalsha")
	loc = at("x1", "evalsha")
	assert.Equal(t, map[string]delaystream.PlaceKind{"a": delaystream.PlaceDeadLettered}, groupsOf(loc))
	at("x2", "evalsha")
	require.NoError(t, rdb.SRem(ctx, l.Shard(l.ShardOf("x1")).Groups(), "c").Err())
	require.NoError(t, rdb.SRem(ctx, l.Shard(l.ShardOf("x2")).Groups(), "d").Err())

	// Group b is forgotten: its dead letters stay but are no longer listed.
	in, err := admin.New(rdb, prefix)
	require.NoError(t, err)
	require.NoError(t, in.ForgetGroup(ctx, "orders", "b"))
	loc = at("x2", "evalsha")
	assert.False(t, loc.Found(), "%+v", loc)
	loc = at("x1", "evalsha")
	assert.Equal(t, map[string]delaystream.PlaceKind{"a": delaystream.PlaceDeadLettered}, groupsOf(loc))

	// A fresh Queue located from many goroutines at once.
	fresh, err := delaystream.New(counted, "orders", delaystream.WithPrefix(prefix), delaystream.WithShards(shards),
		delaystream.WithoutPromotion())
	require.NoError(t, err)
	var wg sync.WaitGroup
	locs := make([]delaystream.Location, 8)
	errs := make([]error, len(locs))
	for i := range locs {
		wg.Go(func() { locs[i], errs[i] = fresh.Locate(ctx, "x1") })
	}
	wg.Wait()
	for i := range locs {
		require.NoError(t, errs[i])
		assert.Equal(t, map[string]delaystream.PlaceKind{"a": delaystream.PlaceDeadLettered}, groupsOf(locs[i]))
	}
	log.Take()
	_, err = fresh.Locate(ctx, "x2")
	require.NoError(t, err)
	assert.Equal(t, []string{"evalsha"}, log.Take())
}

// On a Cluster of three masters, a sharded queue locates messages on
// shards of every master, in each state: waiting, pending in a consumer,
// retrying, dead-lettered.
func TestLocateCluster(t *testing.T) {
	t.Parallel()
	c, err := redistest.SpawnCluster(3, 0)
	require.NoError(t, err)
	t.Cleanup(c.Stop)
	rdb := c.Client()
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	prefix := redistest.Prefix(t)
	const shards = 6
	l, err := stream.NewLayout(prefix, "orders", shards)
	require.NoError(t, err)

	// For each state, ids whose shards are on every master.
	masterOf := func(id string) string {
		n, err := rdb.MasterForKey(ctx, l.Shard(l.ShardOf(id)).Main().Stream)
		require.NoError(t, err)
		return n.Options().Addr
	}
	ids := map[string][]string{}
	for _, s := range []string{"w", "p", "r", "d"} {
		masters := map[string]bool{}
		for i := 0; len(masters) < 3; i++ {
			require.Less(t, i, 1000, "no id of state %s on every master", s)
			id := fmt.Sprintf("%s%d", s, i)
			if m := masterOf(id); !masters[m] {
				masters[m] = true
				ids[s] = append(ids[s], id)
			}
		}
	}

	q, err := delaystream.New(rdb, "orders", delaystream.WithPrefix(prefix), delaystream.WithShards(shards),
		delaystream.WithDrainTimeout(100*time.Millisecond))
	require.NoError(t, err)
	release := make(chan struct{})
	holding := make(chan string, 8)
	settled := make(chan string, 8)
	_, err = q.Handle("billing", func(ctx context.Context, d *delaystream.Delivery) error {
		switch d.ID[0] {
		case 'p':
			holding <- d.ID
			<-release
		case 'r':
			return delaystream.RetryAfter(time.Hour, errors.New("try later"))
		case 'd':
			return delaystream.DeadLetter(errors.New("bad order"))
		}
		return nil
	}, delaystream.WithWorkers(8), delaystream.WithConsumerName("worker-1"), delaystream.WithHooks(delaystream.Hooks{
		OnHandled: func(d *delaystream.Delivery, _ delaystream.HandlerOutcome, _ time.Duration) { settled <- d.ID },
	}))
	require.NoError(t, err)
	stop := startRun(t, q)
	defer func() {
		close(release)
		stop()
	}()
	for s, list := range ids {
		for _, id := range list {
			when := delaystream.After(0)
			if s == "w" {
				when = delaystream.After(time.Hour)
			}
			_, err = q.Schedule(ctx, delaystream.Message{ID: id}, when)
			require.NoError(t, err)
		}
	}
	want := map[string]bool{}
	for _, id := range slices.Concat(ids["p"], ids["r"], ids["d"]) {
		want[id] = true
	}
	deadline := time.After(60 * time.Second)
	for len(want) > 0 {
		select {
		case id := <-settled:
			delete(want, id)
		case id := <-holding:
			delete(want, id)
		case <-deadline:
			t.Fatalf("not handled: %v", want)
		}
	}

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for s, list := range ids {
			for _, id := range list {
				loc, err := q.Locate(ctx, id)
				if !assert.NoError(c, err) {
					return
				}
				assert.Equal(c, l.ShardOf(id), loc.Shard, id)
				switch s {
				case "w":
					assert.NotNil(c, loctest.Waiting(loc), id)
					assert.Empty(c, loctest.InGroups(loc), id)
				case "p":
					if assert.Len(c, loctest.InGroups(loc), 1, id) {
						assert.Equal(c, delaystream.PlacePending, loctest.InGroups(loc)[0].Kind, id)
						assert.Equal(c, "worker-1", loctest.InGroups(loc)[0].Consumer, id)
					}
				case "r":
					if assert.Len(c, loctest.InGroups(loc), 1, id) {
						assert.Equal(c, delaystream.PlaceRetrying, loctest.InGroups(loc)[0].Kind, id)
						assert.Equal(c, 2, loctest.InGroups(loc)[0].Attempt, id)
					}
				case "d":
					if assert.Len(c, loctest.InGroups(loc), 1, id) {
						assert.Equal(c, delaystream.PlaceDeadLettered, loctest.InGroups(loc)[0].Kind, id)
						assert.Regexp(c, fmt.Sprintf(`^\d+-\d+@%d$`, loc.Shard), loctest.InGroups(loc)[0].EntryID, id)
					}
				}
			}
		}
	}, 10*time.Second, 50*time.Millisecond)
}
