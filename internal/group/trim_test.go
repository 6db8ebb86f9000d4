package group_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/internal/group"
	"github.com/delaystream/delaystream/internal/redistest"
	"github.com/delaystream/delaystream/internal/scripts"
	"github.com/delaystream/delaystream/internal/stream"
)

// With one group that keeps up, the trim loop removes what it acknowledged:
// the stream ends empty.
func TestTrimSingleGroupEmptiesStream(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	const n = 2000
	h.startMover()
	rec := newRecorder()
	c := h.consumer("g", rec.ack, group.WithWorkers(32), group.WithTrimInterval(100*time.Millisecond))
	r := start(t, c.Run)
	h.schedule(ids("t", n), 0)
	waitFor(t, 20*time.Second, func() bool { return rec.total() >= n })
	waitFor(t, 5*time.Second, func() bool {
		l, err := h.rdb.XLen(ctx, h.mainStream()).Result()
		return err == nil && l == 0
	}, "stream not trimmed to 0")
	r.stop(t)
	info, err := h.rdb.XInfoStream(ctx, h.mainStream()).Result()
	require.NoError(t, err)
	assert.EqualValues(t, n, info.EntriesAdded, "every entry went through the stream")
	assert.Zero(t, info.Length)
}

// A stalled group keeps everything it has not acknowledged or read, however
// often the fast group's consumer trims; once it catches up, the entries
// both groups acknowledged are trimmed.
func TestTrimKeepsWhatAStalledGroupNeeds(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	key := h.mainStream()
	const phase1, phase2, stuck = 50, 300, 3
	h.startMover()

	// The fast consumer's client counts its trim passes over the queue stream.
	fastClient := redis.NewClient(redistest.Options(t, redistest.Addr(t)))
	t.Cleanup(func() { _ = fastClient.Close() })
	trims := newScriptCounter(scripts.Trim, key)
	fastClient.AddHook(trims)

	fastRec, slowRec := newRecorder(), newRecorder()
	release := make(chan struct{})
	fast := h.consumerOn(fastClient, "fast", fastRec.ack, group.WithWorkers(32), group.WithTrimInterval(100*time.Millisecond))
	slow := h.consumer("slow", func(ctx context.Context, m *group.Message) error {
		slowRec.add(m)
		if strings.HasPrefix(m.ID, "p2") {
			select { // stalled until released
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}, group.WithWorkers(stuck), group.WithPrefetch(0), group.WithTrimInterval(100*time.Millisecond))
	start(t, fast.Run)
	start(t, slow.Run)

	h.schedule(ids("p1-", phase1), 0)
	waitFor(t, 10*time.Second, func() bool { return fast.Counters().Acked == phase1 && slow.Counters().Acked == phase1 })
	h.schedule(ids("p2-", phase2), 0)
	waitFor(t, 10*time.Second, func() bool { return fast.Counters().Acked == phase1+phase2 && slowRec.total() == phase1+stuck })

	// The slow group now holds its first three phase-2 entries and has not
	// read the rest. The fast consumer trims after each round of entries it
	// acknowledges (the slow group, its workers stuck, reads none of them).
	sp, err := h.rdb.XPending(ctx, key, "slow").Result()
	require.NoError(t, err)
	require.EqualValues(t, stuck, sp.Count)
	const rounds, perRound = 3, 20
	before := trims.n.Load()
	for round := range rounds {
		h.schedule(ids(fmt.Sprintf("p3-%d-", round), perRound), 0)
		want := uint64(phase1 + phase2 + (round+1)*perRound)
		waitFor(t, 10*time.Second, func() bool { return fast.Counters().Acked == want })
		waitFor(t, 10*time.Second, func() bool { return trims.n.Load() >= before+int64(round)+1 }, "trim passes")
	}

	var kept []string
	for _, ds := range fastRec.snapshot() {
		if !strings.HasPrefix(ds[0].ID, "p1") {
			kept = append(kept, ds[0].EntryID)
		}
	}
	sort.Slice(kept, func(i, j int) bool { return compareEntryIDs(kept[i], kept[j]) < 0 })
	require.Len(t, kept, phase2+rounds*perRound)
	assert.Equal(t, kept[0], sp.Lower, "the slow group holds the oldest phase-2 entry")
	assert.Equal(t, kept, streamIDs(t, h.rdb, key, sp.Lower), "every entry from the slow group's oldest pending on is kept")
	assert.Equal(t, kept, streamIDs(t, h.rdb, key, "-"), "entries both groups acknowledged (phase 1) are trimmed")

	// The slow group catches up: now everything is acknowledged by both.
	close(release)
	waitFor(t, 20*time.Second, func() bool { return slow.Counters().Acked == phase1+phase2+rounds*perRound })
	waitFor(t, 5*time.Second, func() bool {
		l, err := h.rdb.XLen(ctx, key).Result()
		return err == nil && l == 0
	}, "stream not trimmed after the slow group caught up")
}

// The trim script's threshold, step by step, on a stream of ten entries:
// it never removes an entry some group has pending or has not yet read.
func TestTrimScriptThreshold(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	ctx := context.Background()
	key := redistest.Prefix(t) + ":s"
	var entry []string
	for i := range 10 {
		id, err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: key, ID: fmt.Sprintf("%d-1", 1000+i), Values: []any{"i", i}}).Result()
		require.NoError(t, err)
		entry = append(entry, id)
	}
	trim := func(retention time.Duration) (int64, string) {
		t.Helper()
		v, err := scripts.Trim.Run(ctx, rdb, []string{key}, retention.Milliseconds(), 1000).Slice()
		require.NoError(t, err)
		n, _ := v[0].(int64)
		th, _ := v[1].(string)
		return n, th
	}
	read := func(g, consumer string, count int64) []string {
		t.Helper()
		res, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: g, Consumer: consumer, Streams: []string{key, ">"}, Count: count, Block: -1}).Result()
		require.NoError(t, err)
		var out []string
		for _, m := range res[0].Messages {
			out = append(out, m.ID)
		}
		return out
	}
	remaining := func() []string { return streamIDs(t, rdb, key, "-") }

	n, th := trim(0)
	assert.Zero(t, n, "no groups: nothing is trimmed")
	assert.Empty(t, th)

	require.NoError(t, rdb.XGroupCreate(ctx, key, "a", "0").Err())
	n, th = trim(0)
	assert.Zero(t, n, "a group that has read nothing keeps everything")
	assert.Equal(t, "0-1", th)

	// a reads four and acknowledges the first two.
	got := read("a", "a1", 4)
	require.Equal(t, entry[:4], got)
	require.NoError(t, rdb.XAck(ctx, key, "a", entry[0], entry[1]).Err())
	n, th = trim(0)
	assert.EqualValues(t, 2, n)
	assert.Equal(t, entry[2], th, "oldest pending of a")
	assert.Equal(t, entry[2:], remaining())

	// b, created at the start of what is left, reads and acknowledges six.
	require.NoError(t, rdb.XGroupCreate(ctx, key, "b", "0").Err())
	got = read("b", "b1", 6)
	require.Equal(t, entry[2:8], got)
	require.NoError(t, rdb.XAck(ctx, key, "b", got...).Err())
	n, _ = trim(0)
	assert.Zero(t, n, "a still holds entry 2")

	// a acknowledges all it read: the threshold is the entry after a's
	// last delivered one, which b has acknowledged too.
	require.NoError(t, rdb.XAck(ctx, key, "a", entry[2], entry[3]).Err())
	n, th = trim(0)
	assert.EqualValues(t, 2, n)
	assert.Equal(t, "1003-2", th, "a's last delivered + 1")
	assert.Equal(t, entry[4:], remaining(), "entries a has not read stay")

	// Repeating changes nothing.
	n, _ = trim(0)
	assert.Zero(t, n)

	// A pending entry deleted from the stream still bounds the threshold.
	got = read("a", "a1", 1)
	require.Equal(t, entry[4:5], got)
	require.NoError(t, rdb.XDel(ctx, key, entry[4]).Err())
	n, th = trim(0)
	assert.Zero(t, n)
	assert.Equal(t, entry[4], th)
	assert.Equal(t, entry[5:], remaining())
}

// Retention keeps acknowledged entries younger than it; older acknowledged
// entries go.
func TestTrimScriptRetention(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	ctx := context.Background()
	key := redistest.Prefix(t) + ":s"
	now, err := rdb.Time(ctx).Result()
	require.NoError(t, err)
	old := now.Add(-time.Minute).UnixMilli()
	for i := range 3 {
		require.NoError(t, rdb.XAdd(ctx, &redis.XAddArgs{Stream: key, ID: fmt.Sprintf("%d-%d", old, i+1), Values: []any{"old", i}}).Err())
	}
	var recent []string
	for i := range 2 {
		id, err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: key, Values: []any{"new", i}}).Result()
		require.NoError(t, err)
		recent = append(recent, id)
	}
	require.NoError(t, rdb.XGroupCreate(ctx, key, "g", "$").Err()) // has read (and needs) nothing here
	v, err := scripts.Trim.Run(ctx, rdb, []string{key}, (10 * time.Second).Milliseconds(), 1000).Slice()
	require.NoError(t, err)
	assert.EqualValues(t, 3, v[0], "entries older than the retention")
	assert.Equal(t, recent, streamIDs(t, rdb, key, "-"), "entries younger than the retention stay")
	v, err = scripts.Trim.Run(ctx, rdb, []string{key}, 0, 1000).Slice()
	require.NoError(t, err)
	assert.EqualValues(t, 2, v[0], "without retention, acknowledged entries go")
}

// One trim call removes at most its limit (invariant 5: bounded work) and
// says there is more; the next call continues from there.
func TestTrimScriptIsBounded(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	ctx := context.Background()
	key := redistest.Prefix(t) + ":s"
	pipe := rdb.Pipeline()
	for i := range 250 {
		pipe.XAdd(ctx, &redis.XAddArgs{Stream: key, ID: fmt.Sprintf("%d-1", 1000+i), Values: []any{"i", i}})
	}
	_, err := pipe.Exec(ctx)
	require.NoError(t, err)
	require.NoError(t, rdb.XGroupCreate(ctx, key, "g", "$").Err()) // read and acknowledged nothing: all below its position
	// Each call removes at most the limit plus less than one stream node
	// (100 entries by default), says whether there is more, and the calls
	// together remove everything below the threshold.
	const limit = 100
	calls := 0
	for more := int64(1); more == 1; calls++ {
		require.Less(t, calls, 20, "trim did not finish")
		v, err := scripts.Trim.Run(ctx, rdb, []string{key}, 0, limit).Slice()
		require.NoError(t, err)
		n, _ := v[0].(int64)
		more, _ = v[2].(int64)
		assert.LessOrEqual(t, n, int64(limit+100), "call %d trimmed too much", calls)
	}
	assert.GreaterOrEqual(t, calls, 3, "250 entries with a limit of 100 take several calls")
	assert.Zero(t, rdb.XLen(ctx, key).Val(), "everything below the group's position is trimmed")
}

// Stale consumer removal never drops pending entries: the delconsumer script
// removes an idle consumer without pending entries and leaves one that
// holds entries alone.
func TestDelConsumerScriptKeepsPending(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	ctx := context.Background()
	key := redistest.Prefix(t) + ":s"
	for i := range 2 {
		require.NoError(t, rdb.XAdd(ctx, &redis.XAddArgs{Stream: key, Values: []any{"i", i}}).Err())
	}
	require.NoError(t, rdb.XGroupCreate(ctx, key, "g", "0").Err())
	require.NoError(t, rdb.XGroupCreateConsumer(ctx, key, "g", "idle").Err())
	_, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: "busy", Streams: []string{key, ">"}, Count: 1, Block: -1}).Result()
	require.NoError(t, err)

	removed, err := scripts.DelConsumer.Run(ctx, rdb, []string{key}, "g", "idle").Int64()
	require.NoError(t, err)
	assert.EqualValues(t, 1, removed)
	removed, err = scripts.DelConsumer.Run(ctx, rdb, []string{key}, "g", "busy").Int64()
	require.NoError(t, err)
	assert.Zero(t, removed, "a consumer with pending entries is never removed")

	cons, err := rdb.XInfoConsumers(ctx, key, "g").Result()
	require.NoError(t, err)
	require.Len(t, cons, 1)
	assert.Equal(t, "busy", cons[0].Name)
	assert.EqualValues(t, 1, cons[0].Pending)
	p, err := rdb.XPending(ctx, key, "g").Result()
	require.NoError(t, err)
	assert.EqualValues(t, 1, p.Count)
}

func compareEntryIDs(a, b string) int {
	var am, as, bm, bs uint64
	fmt.Sscanf(a, "%d-%d", &am, &as)
	fmt.Sscanf(b, "%d-%d", &bm, &bs)
	switch {
	case am != bm:
		if am < bm {
			return -1
		}
		return 1
	case as != bs:
		if as < bs {
			return -1
		}
		return 1
	}
	return 0
}

// WithoutTrim: the consumer never runs the trim script, however long it
// runs (measured in the iterations of its reclaim loop, 20 ms apart,
// against a 100 ms trim interval it would otherwise use).
func TestWithoutTrim(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	key := h.mainStream()
	h.startMover()
	client := redis.NewClient(redistest.Options(t, redistest.Addr(t)))
	t.Cleanup(func() { _ = client.Close() })
	trims := newScriptCounter(scripts.Trim, key)
	client.AddHook(trims)
	rec := newRecorder()
	ticks := &loopTicks{}
	c := h.consumerOn(client, "g", rec.ack, group.WithoutTrim(), group.WithTrimInterval(100*time.Millisecond),
		group.WithReclaimInterval(20*time.Millisecond), ticks.option())
	r := start(t, c.Run)
	h.schedule(ids("k", 20), 0)
	waitFor(t, 10*time.Second, func() bool { return c.Counters().Acked == 20 })
	ticks.waitReclaims(t, 50) // ten trim intervals
	r.stop(t)
	assert.Zero(t, ticks.trims.Load(), "trim loop iterations")
	assert.Zero(t, trims.n.Load(), "trim script runs")
	l, err := h.rdb.XLen(ctx, key).Result()
	require.NoError(t, err)
	assert.EqualValues(t, 20, l, "acknowledged entries stay")
}

// An idle consumer does not trim: the trim script runs only after the
// consumer settled entries of the stream since its last trim (and in a slow
// periodic pass, first 10 minutes after start, which this test does not
// reach). Measured in the iterations of its trim loop, 100 ms apart.
func TestTrimOnlyAfterActivity(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	key, retryKey := h.mainStream(), h.retryStream("g")
	h.startMover()
	client := redis.NewClient(redistest.Options(t, redistest.Addr(t)))
	t.Cleanup(func() { _ = client.Close() })
	trims, retryTrims := newScriptCounter(scripts.Trim, key), newScriptCounter(scripts.Trim, retryKey)
	for _, hk := range []redis.Hook{trims, retryTrims} {
		client.AddHook(hk)
	}
	rec := newRecorder()
	ticks := &loopTicks{}
	c := h.consumerOn(client, "g", rec.ack, group.WithTrimInterval(100*time.Millisecond),
		group.WithReclaimInterval(20*time.Millisecond), ticks.option())
	r := start(t, c.Run)

	ticks.waitTrims(t, 10)
	assert.Zero(t, trims.n.Load(), "idle: no trim of the queue stream")
	assert.Zero(t, retryTrims.n.Load(), "idle: no trim of the retry lane")

	var n int64
	for round := range 2 {
		h.schedule(ids(fmt.Sprintf("a%d-", round), 30), 0)
		waitFor(t, 10*time.Second, func() bool { return c.Counters().Acked == uint64(30*(round+1)) })
		waitFor(t, 10*time.Second, func() bool { return trims.n.Load() > n }, "round %d: trimmed after acknowledging", round)
		waitFor(t, 10*time.Second, func() bool {
			l, err := h.rdb.XLen(ctx, key).Result()
			return err == nil && l == 0
		}, "acknowledged entries trimmed")
		ticks.waitTrims(t, 2) // a pass already due when the last acks came runs
		n = trims.n.Load()
		ticks.waitTrims(t, 10)
		assert.Equal(t, n, trims.n.Load(), "round %d: no trims once idle again", round)
	}
	r.stop(t)
	assert.Zero(t, retryTrims.n.Load(), "nothing settled on the retry lane: never trimmed")
}

// A group created ahead with CreateGroup, whose consumer starts only after
// the other group's consumer has acknowledged and trimmed everything,
// still gets every message: trimming keeps what a recorded group has not
// read. CreateGroup is idempotent.
func TestCreateGroupAheadKeepsEverything(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	const n = 200
	late := newRecorder()
	lateC := h.consumer("late", late.ack, group.WithTrimInterval(100*time.Millisecond))
	require.NoError(t, lateC.CreateGroup(ctx))
	require.NoError(t, lateC.CreateGroup(ctx), "a second call changes nothing")
	h.startMover()
	// The fast consumer's client counts its trim passes over the queue stream.
	fastClient := redis.NewClient(redistest.Options(t, redistest.Addr(t)))
	t.Cleanup(func() { _ = fastClient.Close() })
	trims := newScriptCounter(scripts.Trim, h.mainStream())
	fastClient.AddHook(trims)
	fast := newRecorder()
	r := start(t, h.consumerOn(fastClient, "fast", fast.ack, group.WithTrimInterval(100*time.Millisecond)).Run)
	h.schedule(ids("c", n), 0)
	waitFor(t, 20*time.Second, func() bool { return fast.total() >= n })
	// The fast consumer trims only after acknowledging, so each of its
	// passes had entries that it had acknowledged: they kept every entry,
	// since "late" has read none of them.
	waitFor(t, 10*time.Second, func() bool { return trims.n.Load() >= 1 }, "a trim pass")
	l, err := h.rdb.XLen(ctx, h.mainStream()).Result()
	require.NoError(t, err)
	assert.EqualValues(t, n, l, "nothing trimmed while the recorded group has read nothing")

	r2 := start(t, lateC.Run)
	waitFor(t, 20*time.Second, func() bool { return late.total() >= n })
	waitFor(t, 10*time.Second, func() bool {
		l, err := h.rdb.XLen(ctx, h.mainStream()).Result()
		return err == nil && l == 0
	}, "both groups acknowledged everything: trimmed to 0")
	r2.stop(t)
	r.stop(t)
	assert.Equal(t, n, late.total())
}

// CreateGroup with a queue stream of the wrong type returns the error,
// naming the key (Run logs it and reads the other streams).
func TestCreateGroupWrongType(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	require.NoError(t, h.rdb.Set(ctx, h.mainStream(), "x", 0).Err())
	err := h.consumer("g", newRecorder().ack).CreateGroup(ctx)
	require.ErrorIs(t, err, stream.ErrWrongType)
	assert.Contains(t, err.Error(), h.mainStream())
}

// Under a heavy load the stream is trimmed as the group acknowledges, not
// once per trim interval: with an interval of an hour, a burst of 25,000
// entries leaves fewer than 10,000 (the volume that brings a pass
// forward) in the stream once they are all acknowledged.
func TestTrimKeepsUpWithVolume(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	const n = 25_000
	h.startMover()
	rec := newRecorder()
	r := start(t, h.consumer("g", rec.ack, group.WithWorkers(32), group.WithTrimInterval(time.Hour)).Run)
	h.schedule(ids("v", n), 0)
	waitFor(t, 60*time.Second, func() bool { return rec.total() >= n })
	waitFor(t, 10*time.Second, func() bool {
		l, err := h.rdb.XLen(ctx, h.mainStream()).Result()
		return err == nil && l < 10_000
	}, "trimmed while acknowledging")
	r.stop(t)
	info, err := h.rdb.XInfoStream(ctx, h.mainStream()).Result()
	require.NoError(t, err)
	assert.EqualValues(t, n, info.EntriesAdded)
	assert.Positive(t, n-info.Length, "trimmed")
}
