package group_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/internal/delay"
	"github.com/delaystream/delaystream/internal/group"
	"github.com/delaystream/delaystream/internal/margin"
	"github.com/delaystream/delaystream/internal/redistest"
	"github.com/delaystream/delaystream/internal/stream"
)

// emptyReads counts the XREADGROUP calls made through a client (its hook)
// and those that found nothing, and of both those of the streams the
// client's consumer does not own (foreign reports whether it owns a
// stream key; nil: it owns every stream).
type emptyReads struct {
	foreign                             func(stream string) bool
	all, empty, foreignAll, foreignFull atomic.Int64 // foreignFull: filled to their count
	foreignEmpty, foreignTrips          atomic.Int64 // foreignTrips: round trips with such reads
}

func (h *emptyReads) hook() redis.Hook {
	return roundTrips(func(cmds []redis.Cmder) {
		foreign := false
		for _, cmd := range cmds {
			foreign = h.see(cmd) || foreign
		}
		if foreign {
			h.foreignTrips.Add(1)
		}
	})
}

// see counts cmd and reports whether it read a stream not owned.
func (h *emptyReads) see(cmd redis.Cmder) bool {
	c, ok := cmd.(*redis.XStreamSliceCmd)
	if !ok || !strings.EqualFold(c.Name(), "xreadgroup") {
		return false
	}
	h.all.Add(1)
	n := 0
	for _, s := range c.Val() {
		n += len(s.Messages)
	}
	if n == 0 {
		h.empty.Add(1)
	}
	if h.foreign == nil || !h.foreign(readStream(c.Args())) {
		return false
	}
	h.foreignAll.Add(1)
	switch {
	case n == 0:
		h.foreignEmpty.Add(1)
	case int64(n) >= readArg(c.Args(), "count", 0) && readArg(c.Args(), "count", 0) > 0:
		h.foreignFull.Add(1) // filled to its count: the stream is read again
	}
	return true
}

// readStream returns the first stream key of XREADGROUP args.
func readStream(args []any) string {
	for i, a := range args {
		if s, ok := a.(string); ok && strings.EqualFold(s, "streams") && i+1 < len(args) {
			return fmt.Sprint(args[i+1])
		}
	}
	return ""
}

// readArg returns the number after the word name in XREADGROUP args, or
// def.
func readArg(args []any, name string, def int64) int64 {
	for i, a := range args {
		if s, ok := a.(string); ok && strings.EqualFold(s, name) && i+1 < len(args) {
			if v, err := strconv.ParseInt(fmt.Sprint(args[i+1]), 10, 64); err == nil {
				return v
			}
		}
	}
	return def
}

// membersListed counts the membership lists (PUBSUB SHARDCHANNELS
// replies) of a client that name a given number of consumers.
type membersListed struct{ n atomic.Int64 }

func (l *membersListed) hook(members int) redis.Hook {
	return roundTrips(func(cmds []redis.Cmder) {
		for _, cmd := range cmds {
			args := cmd.Args()
			c, ok := cmd.(*redis.StringSliceCmd)
			if ok && len(args) > 1 && strings.EqualFold(fmt.Sprint(args[1]), "shardchannels") && c.Err() == nil && len(c.Val()) == members {
				l.n.Add(1)
			}
		}
	})
}

// Two consumers of one group on a queue of 8 shards split the shards
// between them: an announced shard is read at once by its owner only, the
// other consumer reading it in a stray round 100 ms later, once the owner
// has taken the entries. Without the split both read every announcement
// and one of the two finds nothing, so about one read per message is
// empty; with it, a consumer reads the shards it does not own only in its
// stray rounds (at most one a stray delay, each one round trip for the
// shards announced meanwhile), its polls and after a read of them that
// filled its count: a budget of round trips set by the time the trickle
// took, whatever the load. Then one consumer, still running, stops reading
// (its workers are stuck): the other takes its shards' messages in stray
// rounds, not at the 5 s poll.
func TestShardedConsumersSplitTheReads(t *testing.T) {
	t.Parallel()
	const shards, n = 8, 600
	h := newShardedHarness(t, shards)
	h.startMover()
	ctx := context.Background()
	rec := newRecorder()
	release := make(chan struct{})
	var held atomic.Int64
	stuck := func(ctx context.Context, m *group.Message) error {
		if strings.HasPrefix(m.ID, "busy") {
			held.Add(1)
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return rec.ack(ctx, m)
	}
	layout, err := stream.NewLayout(h.prefix, h.queue, shards)
	require.NoError(t, err)
	// Consumer ck owns the shards i with i%2 == k (the names sorted).
	shardOf := map[string]int{}
	for i := range shards {
		shardOf[layout.Shard(i).Main().Stream] = i
		shardOf[layout.Shard(i).Retry("g").Stream] = i
	}
	var hooks [2]emptyReads
	var lists [2]membersListed
	for k, hd := range []group.Handler{rec.ack, stuck} {
		hooks[k].foreign = func(key string) bool { i, ok := shardOf[key]; return ok && i%2 != k }
		rdb := redistest.Client(t)
		rdb.AddHook(hooks[k].hook())
		rdb.AddHook(lists[k].hook(2))
		c := h.consumerOn(rdb, "g", hd, group.WithConsumerName(fmt.Sprintf("c%d", k)),
			group.WithPrefetch(0), group.WithMembersEvery(100*time.Millisecond), group.WithoutPromotion())
		start(t, c.Run)
	}
	waitFor(t, 10*time.Second, func() bool { return lists[0].n.Load() > 0 && lists[1].n.Load() > 0 },
		"each consumer listed both: each knows the other")

	// A trickle: n messages, one due every 2.5 ms.
	trickle := func(prefix string, n int) []string {
		all := ids(prefix, n)
		items := make([]delay.Item, n)
		for i, id := range all {
			items[i] = delay.Item{Message: delay.Message{ID: id, Payload: []byte(id)}, When: delay.After(200*time.Millisecond + time.Duration(i)*2500*time.Microsecond)}
		}
		_, err := h.q.ScheduleBatch(ctx, items)
		require.NoError(t, err)
		return all
	}
	var all0, empty0, trips0, full0 [2]int64
	for k := range hooks {
		all0[k], empty0[k] = hooks[k].all.Load(), hooks[k].empty.Load()
		trips0[k], full0[k] = hooks[k].foreignTrips.Load(), hooks[k].foreignFull.Load()
	}
	begin := time.Now()
	first := trickle("split", n)
	waitFor(t, 30*time.Second, func() bool { return rec.total() >= n }, "the trickle delivered")
	elapsed := time.Since(begin)
	var reads, empty int64
	for k := range hooks {
		reads += hooks[k].all.Load() - all0[k]
		empty += hooks[k].empty.Load() - empty0[k]
		trips := hooks[k].foreignTrips.Load() - trips0[k]
		full := hooks[k].foreignFull.Load() - full0[k]
		t.Logf("c%d: %d reads, %d empty; %d round trips read shards it does not own, %d of those reads full",
			k, hooks[k].all.Load()-all0[k], hooks[k].empty.Load()-empty0[k], trips, full)
		// A round trip per stray round and per poll (one more of each for
		// their phase, one for a resubscription), one after each full read.
		rounds := 1 + int64(elapsed/group.StrayDelay)
		polls := 1 + int64(elapsed/group.ArrivalsPoll)
		margin.LessOrEqual(t, fmt.Sprintf("c%d foreign round trips", k), trips, rounds+polls+1+full,
			"c%d read the shards it does not own outside its stray rounds and polls (%s of trickle)", k, elapsed)
	}
	t.Logf("%d messages in %s: %d reads, %d of them empty", n, elapsed, reads, empty)
	for _, id := range first {
		assert.Len(t, rec.get(id), 1, id)
	}

	// c1's workers take a message each of the second trickle and are stuck: its
	// shards' other messages are read by c0 in stray rounds.
	second := trickle("busy", 200)
	waitFor(t, 20*time.Second, func() bool { return rec.total()+int(held.Load()) >= n+len(second) }, "the second trickle delivered but the stuck ones")
	require.LessOrEqual(t, held.Load(), int64(group.DefaultWorkers), "c1 holds one message per worker")
	// How long after its promotion (its entry's id, by the Redis clock)
	// each was handled: a stray round is a stray delay after the
	// announcement, the poll up to 5 s.
	var worst time.Duration
	for _, id := range second {
		if ds := rec.get(id); len(ds) == 1 {
			ms, _, _ := strings.Cut(ds[0].EntryID, "-")
			at, err := strconv.ParseInt(ms, 10, 64)
			require.NoError(t, err)
			worst = max(worst, ds[0].At.Sub(time.UnixMilli(at)))
		}
	}
	t.Logf("with c1 stuck: worst time from promotion to handling %v", worst)
	margin.Less(t, "stuck shards read", worst, group.ArrivalsPoll/2, "the stuck consumer's shards waited for the poll")
	close(release)
	waitFor(t, 10*time.Second, func() bool { return rec.total() == n+len(second) }, "the stuck ones delivered")
	for _, id := range second {
		assert.Len(t, rec.get(id), 1, id)
	}
}
