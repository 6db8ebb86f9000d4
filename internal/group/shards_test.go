package group_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/internal/delay"
	"github.com/delaystream/delaystream/internal/group"
	"github.com/delaystream/delaystream/internal/redistest"
	"github.com/delaystream/delaystream/internal/stream"
)

// On a queue of 8 shards, two groups each get every message from every
// shard; one retries its failures through its retry lanes (per shard), the
// other dead-letters some, which List merges across shards with ids that
// name their shard, and which Get, Redrive and Purge take back.
func TestShardedFanOutRetryAndDeadLetters(t *testing.T) {
	t.Parallel()
	const n, shards = 1000, 8
	h := newShardedHarness(t, shards)
	ctx := context.Background()
	h.startMover()

	var mu sync.Mutex
	attempts := map[string]int{} // group a: deliveries per id
	fromShard := map[string]bool{}
	handledB := map[string]int{}
	var redriven atomic.Bool
	a := h.consumer("a", func(_ context.Context, m *group.Message) error {
		mu.Lock()
		attempts[m.ID]++
		k := attempts[m.ID]
		fromShard[m.Stream] = true
		mu.Unlock()
		if strings.HasSuffix(m.ID, "0") && k == 1 {
			return errors.New("first attempt fails")
		}
		return nil
	}, group.WithBackoff(func(int) time.Duration { return 50 * time.Millisecond }))
	b := func(name string) *group.Consumer {
		return h.consumer("b", func(_ context.Context, m *group.Message) error {
			if strings.HasSuffix(m.ID, "00") && !redriven.Load() {
				return group.DeadLetter(errors.New("poison"))
			}
			mu.Lock()
			handledB[m.ID]++
			mu.Unlock()
			return nil
		}, group.WithConsumerName(name))
	}
	b1, b2 := b("b1"), b("b2")
	runs := []*runner{start(t, a.Run), start(t, b1.Run), start(t, b2.Run)}

	all := ids("fan", n)
	h.schedule(all, 100*time.Millisecond)
	dl := b1.DeadLetters()
	waitFor(t, 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		total := 0
		for _, k := range attempts {
			total += k
		}
		return total >= n+n/10 && len(handledB) == n-n/100 && dlLen(t, dl) == n/100
	}, "every message in both groups, and group a's retries")
	mu.Lock()
	for _, id := range all {
		want := 1
		if strings.HasSuffix(id, "0") {
			want = 2
		}
		assert.GreaterOrEqual(t, attempts[id], want, id)
	}
	assert.Len(t, fromShard, 2*shards, "group a read every shard's stream and retry lane")
	mu.Unlock()
	assert.Equal(t, uint64(n/10), a.Counters().Retried)

	// Dead letters: 10, spread over shards, listed in pages across shards.
	layout := h.q.Layout()
	var listed []group.DeadEntry
	after := ""
	for {
		page, err := dl.List(ctx, after, 3)
		require.NoError(t, err)
		if len(page) == 0 {
			break
		}
		listed = append(listed, page...)
		after = page[len(page)-1].EntryID
	}
	require.Len(t, listed, n/100)
	seen := map[string]bool{}
	for i, e := range listed {
		assert.False(t, seen[e.Envelope.ID], "listed twice: %s", e.Envelope.ID)
		seen[e.Envelope.ID] = true
		assert.Equal(t, layout.ShardOf(e.Envelope.ID), e.Shard, e.Envelope.ID)
		assert.True(t, strings.HasSuffix(e.EntryID, fmt.Sprintf("@%d", e.Shard)), e.EntryID)
		assert.Equal(t, group.ReasonHandler, e.Reason)
		if i > 0 {
			assert.False(t, e.At().Before(listed[i-1].At()), "merged in entry order")
		}
		got, err := dl.Get(ctx, e.EntryID)
		require.NoError(t, err)
		assert.Equal(t, e.Envelope.ID, got.Envelope.ID)
	}
	id, _, _ := strings.Cut(listed[0].EntryID, "@")
	_, err := dl.Get(ctx, id)
	require.ErrorIs(t, err, group.ErrInvalidOption, "an unqualified id on a sharded queue")
	_, err = dl.Purge(ctx, listed[0].EntryID, id)
	require.ErrorIs(t, err, group.ErrInvalidOption)
	require.Equal(t, int64(n/100), dlLen(t, dl), "an invalid id purges nothing")

	// Redrive 5 (now handled), purge 5.
	redriven.Store(true)
	var redrive, purge []string
	for i, e := range listed {
		if i < 5 {
			redrive = append(redrive, e.EntryID)
		} else {
			purge = append(purge, e.EntryID)
		}
	}
	k, err := dl.Redrive(ctx, 0, redrive...)
	require.NoError(t, err)
	assert.Equal(t, 5, k)
	p, err := dl.Purge(ctx, purge...)
	require.NoError(t, err)
	assert.Equal(t, int64(5), p)
	waitFor(t, 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(handledB) == n-n/100+5
	}, "redriven dead letters handled")
	assert.Equal(t, int64(0), dlLen(t, dl))

	// Stats add up the shards; per shard they sum to the total.
	waitFor(t, 10*time.Second, func() bool {
		st, err := b1.Stats(ctx)
		return err == nil && st.Pending == 0 && st.Lag == 0
	}, "nothing pending")
	// The trimmer may shorten streams between two reads (every entry is
	// acknowledged by both groups by now), so compare until they agree.
	// (That every shard got messages is checked above: group a read every
	// shard's stream.)
	// The condition runs on another goroutine: no require in it, and why
	// it last failed is kept for the message.
	var (
		latest group.Stats
		whyMu  sync.Mutex
		whyNot string
	)
	ok := assert.Eventually(t, func() bool {
		why := ""
		defer func() { whyMu.Lock(); whyNot = why; whyMu.Unlock() }()
		cur, err := b1.Stats(ctx)
		if err != nil {
			why = err.Error()
			return false
		}
		per, err := b1.ShardStats(ctx)
		if err != nil || len(per) != shards {
			why = fmt.Sprintf("%d shards' stats: %v", len(per), err)
			return false
		}
		var streamLen int64
		for _, s := range per {
			streamLen += s.Queue.StreamLength
		}
		why = fmt.Sprintf("the shards hold %d entries, the total says %d", streamLen, cur.Queue.StreamLength)
		whyMu.Lock()
		latest = cur
		whyMu.Unlock()
		return streamLen == cur.Queue.StreamLength
	}, 10*time.Second, 10*time.Millisecond)
	whyMu.Lock()
	st := latest // read under the lock: the condition may still be running
	why := whyNot
	whyMu.Unlock()
	require.True(t, ok, "the shards' stream lengths add up to the total: %s", why)
	// Consumers is the most any shard's stream knows: both consumers of
	// b, or one when each read only the shards it owns (affinity) from
	// the start.
	var most int64
	for s := range shards {
		cs, err := h.rdb.XInfoConsumers(ctx, layout.Shard(s).Main().Stream, "b").Result()
		require.NoError(t, err)
		most = max(most, int64(len(cs)))
	}
	assert.Equal(t, most, st.Consumers)
	assert.Contains(t, []int64{1, 2}, st.Consumers)
	stopAll(t, runs...)
}

// A shard with a backlog does not starve the others: messages of the other
// shards, due with the backlog, are handled long before it is worked off.
func TestShardedReaderIsFair(t *testing.T) {
	t.Parallel()
	const shards = 4
	h := newShardedHarness(t, shards)
	layout := h.q.Layout()
	var backlog, others []string
	for i := 0; len(backlog) < 2000 || len(others) < 30; i++ {
		id := fmt.Sprintf("m%d", i)
		if layout.ShardOf(id) == 0 {
			if len(backlog) < 2000 {
				backlog = append(backlog, id)
			}
		} else if len(others) < 30 {
			others = append(others, id)
		}
	}
	h.schedule(backlog, 0)
	h.schedule(others, 0)
	h.startMover()
	waitFor(t, 10*time.Second, func() bool {
		n, err := h.q.Len(context.Background())
		return err == nil && n == 0
	}, "everything promoted before the consumer starts")

	var mu sync.Mutex
	var order []string
	c := h.consumer("g", func(_ context.Context, m *group.Message) error {
		// The handler's work: it makes the backlog take many reads to
		// work off, which the other shards must not wait behind (a
		// duration of work, not a wait for an event).
		time.Sleep(200 * time.Microsecond)
		mu.Lock()
		order = append(order, m.ID)
		mu.Unlock()
		return nil
	}, group.WithWorkers(2))
	r := start(t, c.Run)
	waitFor(t, 60*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(order) == len(backlog)+len(others)
	}, "everything handled")
	r.stop(t)
	isOther := map[string]bool{}
	for _, id := range others {
		isOther[id] = true
	}
	last := 0
	for i, id := range order {
		if isOther[id] {
			last = i
		}
	}
	t.Logf("the last of %d other-shard messages was handled %d-th of %d", len(others), last+1, len(order))
	assert.Less(t, last, len(order)/5, "other shards waited behind the backlog")
}

// A consumer process of a sharded queue killed with SIGKILL while it holds
// entries of several shards: a consumer in this process handles them once
// they were idle for the visibility timeout (2 s), within a reclaim
// interval (1 s), as on one shard.
func TestShardedKilledConsumerWorkIsReclaimed(t *testing.T) {
	t.Parallel()
	const n, shards = 8, 4
	h := newShardedHarness(t, shards)
	h.startMover()
	h.schedule(ids("crash", n), 0)
	ch := h.startChild("g", "doomed", helperConfig{Workers: n})
	held := ch.waitHeld(t, n, 30*time.Second)
	heldShards := map[int]bool{}
	for _, l := range held {
		heldShards[h.q.Layout().ShardOf(l.ID)] = true
	}
	require.Greater(t, len(heldShards), 1, "the held entries span shards")

	rec := newRecorder()
	c := h.consumer("g", rec.ack, group.WithConsumerName("survivor"))
	r := start(t, c.Run)
	killed := time.Now()
	ch.kill(t)
	var streams []string
	for i := range shards {
		streams = append(streams, h.q.Layout().Shard(i).Main().Stream)
	}
	touched := h.touched("g", "doomed", streams...)
	waitFor(t, 10*time.Second, func() bool { return rec.total() >= n })
	var last time.Duration
	for id, d := range rec.snapshot() {
		last = max(last, d[0].At.Sub(killed))
		assert.Len(t, d, 1, id)
		assert.GreaterOrEqual(t, d[0].Deliveries, int64(2), id)
	}
	late := reclaimedInTime(t, "killed sharded consumer", touched, firsts(rec.snapshot()))
	t.Logf("kill -9 to handled elsewhere on %d shards: last %s, %s after it became reclaimable", shards, last, late)
	r.stop(t)
}

// A consumer built with another shard count than the queue's fails at Run
// with stream.ErrShardCount and creates nothing.
func TestShardedConsumerCountMismatch(t *testing.T) {
	t.Parallel()
	h := newShardedHarness(t, 4)
	h.schedule([]string{"x"}, time.Hour) // records 4 shards
	c, err := group.New(h.rdb, h.queue, "g", func(context.Context, *group.Message) error { return nil },
		group.WithPrefix(h.prefix), group.WithShards(8), group.WithLogger(testLogger()))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	before := redistest.Keys(t, h.rdb, h.prefix)
	err = c.Run(ctx)
	require.ErrorIs(t, err, stream.ErrShardCount)
	assert.Contains(t, err.Error(), "4 shard")
	assert.Equal(t, before, redistest.Keys(t, h.rdb, h.prefix), "nothing written")
}

// An idle consumer of a 64-shard queue holds a few connections, not one per
// shard, and does not poll the shards while nothing arrives: no reads, and
// once its reclaimer found every stream's pending list empty, no reclaim
// calls either.
func TestShardedIdleConsumerIsQuiet(t *testing.T) {
	t.Parallel()
	const shards = 64
	h := newShardedHarness(t, shards)
	rdb := redis.NewClient(redistest.Options(t, redistest.Addr(t)))
	t.Cleanup(func() { _ = rdb.Close() })
	reads := &pipelineCounter{cmdCounter{match: func(args []any) bool {
		return len(args) > 0 && strings.EqualFold(fmt.Sprint(args[0]), "xreadgroup")
	}}}
	rdb.AddHook(reads)
	claims := &pipelineCounter{cmdCounter{match: func(args []any) bool {
		if len(args) == 0 {
			return false
		}
		name := fmt.Sprint(args[0])
		return strings.EqualFold(name, "xautoclaim") || strings.EqualFold(name, "xpending")
	}}}
	rdb.AddHook(claims)
	_, err := h.q.Schedule(context.Background(), delay.Message{ID: "later"}, delay.After(time.Hour))
	require.NoError(t, err)
	rec := newRecorder()
	// Its own mover (see TestConsumersPromoteTheirQueue) would add its
	// connections and calls to the counts: the mover started below promotes.
	ticks := &loopTicks{watch: func() int64 { return reads.n.Load() + claims.n.Load() }}
	c := h.consumerOn(rdb, "g", rec.ack, group.WithoutPromotion(), ticks.option())
	r := start(t, c.Run)
	// The first round reads all 128 streams (main and retry lane per
	// shard); afterwards nothing arrives, so nothing is read.
	waitFor(t, 10*time.Second, func() bool { return reads.n.Load() >= 2*shards })
	// The reclaimer passes over every stream, then finds them untouched
	// for a tick and their pending lists empty (XPENDING): quiet.
	waitFor(t, 10*time.Second, func() bool { return claims.n.Load() >= 2*2*shards })
	// Then two reclaim intervals (its loop's iterations) without a read or
	// a reclaim call (the poll of every shard, once per 5 s, may come
	// before them).
	waitFor(t, 20*time.Second, func() bool { return ticks.quiet.Load() >= 2 },
		"an idle sharded consumer kept reading or reclaiming")
	conns := rdb.PoolStats().TotalConns
	t.Logf("idle 2 s on %d shards: %d pooled connections", shards, conns)
	assert.LessOrEqual(t, conns, uint32(8), "connections grow with the shard count")

	// An arrival is announced and read at once.
	h.startMover()
	h.schedule([]string{"now"}, 0)
	waitFor(t, 2*time.Second, func() bool { return rec.total() == 1 }, "an arrival read")
	stopAll(t, r)
}

// pipelineCounter is a cmdCounter that also counts the commands of
// pipelines.
type pipelineCounter struct{ cmdCounter }

func (c *pipelineCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			if cmd.Err() == nil || errors.Is(cmd.Err(), redis.Nil) {
				if c.match(cmd.Args()) {
					c.n.Add(1)
				}
			}
		}
		return err
	}
}
