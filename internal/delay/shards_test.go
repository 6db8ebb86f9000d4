package delay_test

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/internal/delay"
	"github.com/delaystream/delaystream/internal/redistest"
	"github.com/delaystream/delaystream/internal/scripts"
	"github.com/delaystream/delaystream/internal/stream"
	"github.com/delaystream/delaystream/internal/wire"
)

// placement reads every shard's main lane of l: for each message id, the
// shards whose delayed set holds it (plain or packed member) and the
// shards whose envelope hash has an entry for it.
func placement(t *testing.T, rdb redis.UniversalClient, l *stream.Layout) (delayed, envelopes map[string][]int) {
	t.Helper()
	ctx := context.Background()
	delayed, envelopes = map[string][]int{}, map[string][]int{}
	for s := range l.Shards() {
		lane := l.Shard(s).Main()
		zs, err := rdb.ZRangeWithScores(ctx, lane.Delayed, 0, -1).Result()
		require.NoError(t, err)
		for _, z := range zs {
			m := z.Member.(string)
			id := m
			if len(m) > 0 && m[0] == wire.PackedKind {
				id, _, err = wire.Unpack(int64(z.Score), m)
				require.NoError(t, err, "packed member in shard %d", s)
			}
			delayed[id] = append(delayed[id], s)
		}
		ids, err := rdb.HKeys(ctx, lane.Envelopes).Result()
		require.NoError(t, err)
		for _, id := range ids {
			envelopes[id] = append(envelopes[id], s)
		}
	}
	return delayed, envelopes
}

// snapshot returns every key under prefix (found with SCAN) with its
// DUMP, so that two snapshots are equal only if nothing was written.
func snapshot(t *testing.T, rdb redis.UniversalClient, prefix string) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	iter := rdb.Scan(ctx, 0, prefix+":*", 1000).Iterator()
	for iter.Next(ctx) {
		if strings.Contains(iter.Val(), "}:k:") {
			continue // a call token: expires by itself (TestCallTokens)
		}
		v, err := rdb.Dump(ctx, iter.Val()).Result()
		require.NoError(t, err, iter.Val())
		out[iter.Val()] = v
	}
	require.NoError(t, iter.Err())
	return out
}

// A batch of mixed ids over 8 shards: every message waits in the shard of
// its id and nowhere else, is found there by id, and the figures add up.
func TestShardedScheduleBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	const shards, n = 8, 1000
	// Chunks of 50: each shard's ~125 messages take several calls, and an
	// id repeated at the end of the batch meets its first occurrence in
	// an earlier call of the same shard.
	q, err := delay.New(rdb, "orders", delay.WithPrefix(redistest.Prefix(t)), delay.WithShards(shards), delay.WithBatchSize(50))
	require.NoError(t, err)
	l := q.Layout()
	require.Equal(t, shards, q.Shards())
	require.Equal(t, shards, l.Shards())
	assert.Equal(t, l.Shard(0), q.Keys())

	now := time.Now().Truncate(time.Millisecond)
	var overdue int64
	earliest := time.Time{}
	items := make([]delay.Item, n)
	for i := range items {
		m := delay.Message{Payload: []byte("p" + strconv.Itoa(i))}
		if i%3 == 0 {
			m.ID = fmt.Sprintf("order:%d:cancel", i)
		}
		var w delay.When
		switch {
		case i%10 == 1: // already due: Overdue counts it
			at := now.Add(-time.Hour - time.Duration(i)*time.Second)
			w, overdue = delay.At(at), overdue+1
			if earliest.IsZero() || at.Before(earliest) {
				earliest = at
			}
		case i%2 == 0:
			w = delay.After(time.Hour + time.Duration(i)*time.Millisecond)
		default:
			w = delay.At(now.Add(2*time.Hour + time.Duration(i)*time.Second))
		}
		items[i] = delay.Item{Message: m, When: w}
	}
	// Two ids repeated: replaced by the later item, which comes later in
	// the same shard's calls.
	items = append(items,
		delay.Item{Message: delay.Message{ID: "order:0:cancel", Payload: []byte("again 0"), OnDuplicate: delay.Replace}, When: delay.After(3 * time.Hour)},
		delay.Item{Message: delay.Message{ID: "order:3:cancel", Payload: []byte("again 3")}, When: delay.After(3 * time.Hour)},
	)
	res, err := q.ScheduleBatch(ctx, items)
	require.NoError(t, err)
	require.Len(t, res, len(items))

	want := map[string]string{} // id -> payload
	genShards := map[int]int{}
	for i, r := range res {
		switch i {
		case n:
			assert.Equal(t, delay.Replaced, r.Outcome)
			want[r.ID] = "again 0"
			continue
		case n + 1:
			assert.Equal(t, delay.Kept, r.Outcome)
			continue
		}
		require.Equal(t, delay.Created, r.Outcome, "item %d", i)
		if items[i].Message.ID != "" {
			assert.Equal(t, items[i].Message.ID, r.ID)
		} else {
			require.Len(t, r.ID, 26, "item %d", i)
			assert.Equal(t, r.Due, ulidTime(t, r.ID), "the time part of a generated id is its due time")
			genShards[l.ShardOf(r.ID)]++
		}
		want[r.ID] = string(items[i].Message.Payload)
	}
	require.Len(t, want, n)
	assert.Len(t, genShards, shards, "generated ids spread over every shard: %v", genShards)

	delayed, envelopes := placement(t, rdb, l)
	require.Len(t, delayed, n, "one member per message, in one shard only")
	perShard := make([]int64, shards)
	for id := range want {
		s := l.ShardOf(id)
		require.Equal(t, []int{s}, delayed[id], "id %s must wait in shard %d only", id, s)
		perShard[s]++
	}
	for id, ss := range envelopes {
		assert.Equal(t, []int{l.ShardOf(id)}, ss, "envelope of %s", id)
		assert.False(t, wire.GeneratedLayout(id), "envelope of generated id %s", id)
	}
	assert.Len(t, envelopes, (n+2)/3, "one envelope per caller-chosen id")

	for id, payload := range want {
		env, err := q.Get(ctx, id)
		require.NoError(t, err, id)
		assert.Equal(t, payload, string(env.Payload), id)
		assert.Equal(t, id, env.ID)
	}

	total, err := q.Len(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(n), total)
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(n), st.Waiting)
	assert.Equal(t, overdue, st.Overdue)
	assert.True(t, earliest.Equal(st.NextDue), "next due %v, want %v", st.NextDue, earliest)
	assert.WithinDuration(t, time.Now(), st.Now, 5*time.Second)
	per, err := q.ShardStats(ctx)
	require.NoError(t, err)
	require.Len(t, per, shards)
	var sum delay.Stats
	for s, p := range per {
		assert.Equal(t, perShard[s], p.Waiting, "shard %d", s)
		sum.Waiting += p.Waiting
		sum.Overdue += p.Overdue
		if !p.NextDue.IsZero() && (sum.NextDue.IsZero() || p.NextDue.Before(sum.NextDue)) {
			sum.NextDue = p.NextDue
		}
		assert.False(t, p.Now.After(st.Now.Add(time.Second)), "shard %d clock", s)
	}
	assert.Equal(t, st.Waiting, sum.Waiting)
	assert.Equal(t, st.Overdue, sum.Overdue)
	assert.True(t, st.NextDue.Equal(sum.NextDue))

	// Reschedule every fifth message: found by id, moved within its shard.
	later := now.Add(5 * time.Hour)
	k := 0
	for id := range want {
		k++
		if k%5 != 0 {
			continue
		}
		due, err := q.Reschedule(ctx, id, delay.At(later))
		require.NoError(t, err, id)
		assert.True(t, later.Equal(due))
		env, err := q.Get(ctx, id)
		require.NoError(t, err, id)
		assert.True(t, later.Equal(env.Due), id)
		assert.Equal(t, want[id], string(env.Payload), id)
	}
	delayed, _ = placement(t, rdb, l)
	require.Len(t, delayed, n)
	for id := range want {
		require.Equal(t, []int{l.ShardOf(id)}, delayed[id], "after reschedule, id %s", id)
	}

	// Cancel every message: each is found by id, once.
	for id := range want {
		ok, err := q.Cancel(ctx, id)
		require.NoError(t, err, id)
		require.True(t, ok, id)
		ok, err = q.Cancel(ctx, id)
		require.NoError(t, err, id)
		require.False(t, ok, id)
	}
	total, err = q.Len(ctx)
	require.NoError(t, err)
	assert.Zero(t, total)
	st, err = q.Stats(ctx)
	require.NoError(t, err)
	assert.Zero(t, st.Waiting)
	assert.True(t, st.NextDue.IsZero())
	// Nothing left but the queue's record of its shard count.
	assert.Equal(t, []string{l.Meta()}, slices.Sorted(maps.Keys(snapshot(t, rdb, l.Prefix()))))
	count, err := rdb.HGet(ctx, l.Meta(), "shards").Result()
	require.NoError(t, err)
	assert.Equal(t, strconv.Itoa(shards), count)
}

// shardCountOps are the calls of a producer that touch Redis, each
// checked to fail on a shard-count mismatch and write nothing.
func shardCountOps() []struct {
	name string
	run  func(context.Context, *testing.T, *delay.Queue) error
	msg  string // prefix of the error
} {
	return []struct {
		name string
		run  func(context.Context, *testing.T, *delay.Queue) error
		msg  string
	}{
		{"Schedule", func(ctx context.Context, t *testing.T, q *delay.Queue) error {
			res, err := q.Schedule(ctx, delay.Message{ID: "new", Payload: []byte("x")}, delay.After(time.Hour))
			assert.Equal(t, delay.Result{}, res)
			return err
		}, "schedule q: "},
		{"Schedule generated", func(ctx context.Context, t *testing.T, q *delay.Queue) error {
			_, err := q.Schedule(ctx, delay.Message{Payload: []byte("x")}, delay.After(time.Hour))
			return err
		}, "schedule q: "},
		{"ScheduleBatch", func(ctx context.Context, t *testing.T, q *delay.Queue) error {
			res, err := q.ScheduleBatch(ctx, []delay.Item{
				{Message: delay.Message{ID: "b1"}, When: delay.After(time.Minute)},
				{Message: delay.Message{}, When: delay.After(time.Minute)},
			})
			assert.Equal(t, []delay.Result{{ID: "b1"}, {}}, res, "every result Unknown, no generated id")
			return err
		}, "schedule q: "},
		{"Cancel", func(ctx context.Context, t *testing.T, q *delay.Queue) error {
			ok, err := q.Cancel(ctx, "m1")
			assert.False(t, ok)
			return err
		}, "cancel m1: "},
		{"Reschedule", func(ctx context.Context, t *testing.T, q *delay.Queue) error {
			_, err := q.Reschedule(ctx, "m1", delay.After(time.Second))
			return err
		}, "reschedule m1: "},
		{"Get", func(ctx context.Context, t *testing.T, q *delay.Queue) error {
			_, err := q.Get(ctx, "m1")
			return err
		}, "get m1: "},
		{"Stats", func(ctx context.Context, t *testing.T, q *delay.Queue) error {
			_, err := q.Stats(ctx)
			return err
		}, "stats q: "},
		{"ShardStats", func(ctx context.Context, t *testing.T, q *delay.Queue) error {
			per, err := q.ShardStats(ctx)
			assert.Nil(t, per)
			return err
		}, "shard stats q: "},
		{"Len", func(ctx context.Context, t *testing.T, q *delay.Queue) error {
			n, err := q.Len(ctx)
			assert.Zero(t, n)
			return err
		}, "len q: "},
	}
}

// refused checks that every call of a producer with shards shards fails
// with stream.ErrShardCount (with msg in the error) and writes nothing.
func refused(t *testing.T, rdb redis.UniversalClient, prefix string, shards int, msg string) {
	t.Helper()
	ctx := context.Background()
	before := snapshot(t, rdb, prefix)
	require.NotEmpty(t, before)
	for _, op := range shardCountOps() {
		t.Run(op.name, func(t *testing.T) {
			// A new Queue each time: its first call makes the check.
			q, err := delay.New(rdb, "q", delay.WithPrefix(prefix), delay.WithShards(shards))
			require.NoError(t, err)
			err = op.run(ctx, t, q)
			require.ErrorIs(t, err, stream.ErrShardCount)
			assert.True(t, strings.HasPrefix(err.Error(), op.msg), "error %q should start with %q", err, op.msg)
			assert.Contains(t, err.Error(), msg)
			// The check is not cached on failure: the next call fails too.
			_, err = q.Get(ctx, "m1")
			assert.ErrorIs(t, err, stream.ErrShardCount)
		})
	}
	// Input is validated before the check.
	q, err := delay.New(rdb, "q", delay.WithPrefix(prefix), delay.WithShards(shards))
	require.NoError(t, err)
	_, err = q.Schedule(ctx, delay.Message{ID: "bad\n"}, delay.After(time.Hour))
	assert.ErrorIs(t, err, delay.ErrInvalidMessage)
	assert.NotErrorIs(t, err, stream.ErrShardCount)
	assert.Equal(t, before, snapshot(t, rdb, prefix), "a refused producer wrote to Redis")
}

func TestShardCountMismatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("recorded count", func(t *testing.T) {
		t.Parallel()
		rdb := redistest.Client(t)
		prefix := redistest.Prefix(t)
		q4, err := delay.New(rdb, "q", delay.WithPrefix(prefix), delay.WithShards(4))
		require.NoError(t, err)
		_, err = q4.ScheduleBatch(ctx, []delay.Item{
			{Message: delay.Message{ID: "m1", Payload: []byte("one")}, When: delay.After(time.Hour)},
			{Message: delay.Message{ID: "m2"}, When: delay.After(time.Hour)},
			{Message: delay.Message{Payload: []byte("gen")}, When: delay.After(time.Hour)},
		})
		require.NoError(t, err)
		for _, shards := range []int{8, 1, 3} {
			t.Run(fmt.Sprint(shards, " shards"), func(t *testing.T) {
				refused(t, rdb, prefix, shards, fmt.Sprintf("queue q has 4 shard(s) (recorded in %s); this producer was built with %d", q4.Layout().Meta(), shards))
			})
		}
		// A producer with the recorded count still works.
		again, err := delay.New(rdb, "q", delay.WithPrefix(prefix), delay.WithShards(4))
		require.NoError(t, err)
		env, err := again.Get(ctx, "m1")
		require.NoError(t, err)
		assert.Equal(t, "one", string(env.Payload))
		n, err := again.Len(ctx)
		require.NoError(t, err)
		assert.Equal(t, int64(3), n)
	})

	t.Run("unsharded queue used before counts were recorded", func(t *testing.T) {
		t.Parallel()
		rdb := redistest.Client(t)
		prefix := redistest.Prefix(t)
		q1, err := delay.New(rdb, "q", delay.WithPrefix(prefix))
		require.NoError(t, err)
		_, err = q1.Schedule(ctx, delay.Message{ID: "m1", Payload: []byte("old")}, delay.After(time.Hour))
		require.NoError(t, err)
		// A queue written by a release that recorded no count.
		require.NoError(t, rdb.Del(ctx, q1.Layout().Meta()).Err())
		refused(t, rdb, prefix, 4, "queue q has 1 shard(s)")
		exists, err := rdb.Exists(ctx, q1.Layout().Meta()).Result()
		require.NoError(t, err)
		assert.Zero(t, exists, "a refused producer records nothing")

		// An unsharded producer takes the queue as it is and records 1.
		q1, err = delay.New(rdb, "q", delay.WithPrefix(prefix))
		require.NoError(t, err)
		env, err := q1.Get(ctx, "m1")
		require.NoError(t, err)
		assert.Equal(t, "old", string(env.Payload))
		count, err := rdb.HGet(ctx, q1.Layout().Meta(), "shards").Result()
		require.NoError(t, err)
		assert.Equal(t, "1", count)
	})

	t.Run("record holds garbage", func(t *testing.T) {
		t.Parallel()
		rdb := redistest.Client(t)
		prefix := redistest.Prefix(t)
		l, err := stream.NewLayout(prefix, "q", 1)
		require.NoError(t, err)
		require.NoError(t, rdb.HSet(ctx, l.Meta(), "shards", "many").Err())
		for _, shards := range []int{1, 4} {
			t.Run(fmt.Sprint(shards, " shards"), func(t *testing.T) {
				refused(t, rdb, prefix, shards, l.Meta()+" field shards holds no count")
			})
		}
	})
}

// The shard-count check costs one call on a Queue's first use and none
// after it, with one shard or many.
func TestShardCountCheckedOnce(t *testing.T) {
	t.Parallel()
	for _, shards := range []int{1, 4} {
		t.Run(fmt.Sprint(shards, " shards"), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b := countedMiniredis(t, false)
			q, err := delay.New(b.rdb, "q", delay.WithPrefix(redistest.Prefix(t)), delay.WithShards(shards))
			require.NoError(t, err)
			b.reset(t)
			var ids []string
			for range 3 {
				// Generated ids: the scripts they take read no hash.
				r, err := q.Schedule(ctx, delay.Message{Payload: []byte("x")}, delay.After(time.Hour))
				require.NoError(t, err)
				ids = append(ids, r.ID)
			}
			_, err = q.Get(ctx, ids[0])
			require.NoError(t, err)
			_, err = q.Reschedule(ctx, ids[1], delay.After(time.Minute))
			require.NoError(t, err)
			ok, err := q.Cancel(ctx, ids[2])
			require.NoError(t, err)
			assert.True(t, ok)
			_, err = q.Stats(ctx)
			require.NoError(t, err)
			n, err := q.Len(ctx)
			require.NoError(t, err)
			assert.Equal(t, int64(2), n)
			calls := b.calls(t)
			assert.Equal(t, 1, calls["hmget"], "one read of the record (meta.lua): %v", calls)
			assert.Equal(t, 4, calls["zadd"], "three schedules and a reschedule: %v", calls)
		})
	}
}

// evalRecorder records the script calls a client sends: each pipeline's
// size and every call's script (by SHA).
type evalRecorder struct {
	mu        sync.Mutex
	pipelines []int          // script calls per pipeline
	single    int            // script calls sent on their own
	bySHA     map[string]int // calls per script
}

func (h *evalRecorder) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *evalRecorder) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.record(cmd) {
			h.mu.Lock()
			h.single++
			h.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}
func (h *evalRecorder) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		n := 0
		for _, c := range cmds {
			if h.record(c) {
				n++
			}
		}
		if n > 0 { // not a connection's handshake (HELLO, CLIENT SETINFO)
			h.mu.Lock()
			h.pipelines = append(h.pipelines, n)
			h.mu.Unlock()
		}
		return next(ctx, cmds)
	}
}

func (h *evalRecorder) record(cmd redis.Cmder) bool {
	if cmd.Name() != "evalsha" {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.bySHA[fmt.Sprint(cmd.Args()[1])]++
	return true
}

func (h *evalRecorder) reset() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.pipelines, h.single, h.bySHA = nil, 0, map[string]int{}
}

// ScheduleBatch chooses the fast script per call: a call whose messages
// all get generated ids takes it, whatever the rest of the batch holds;
// all calls of all shards go in one pipeline.
func TestScheduleBatchScriptPerCall(t *testing.T) {
	t.Parallel()
	for _, shards := range []int{1, 4} {
		t.Run(fmt.Sprint(shards, " shards"), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			rdb := redistest.Client(t)
			hook := &evalRecorder{bySHA: map[string]int{}}
			rdb.AddHook(hook)
			q, err := delay.New(rdb, "q", delay.WithPrefix(redistest.Prefix(t)), delay.WithShards(shards), delay.WithBatchSize(3))
			require.NoError(t, err)
			// The check made and the scripts loaded: no NOSCRIPT retries below.
			_, err = q.Len(ctx)
			require.NoError(t, err)
			require.NoError(t, scripts.Schedule.Load(ctx, rdb).Err())
			require.NoError(t, scripts.ScheduleGenerated.Load(ctx, rdb).Err())

			// Mostly generated ids; two caller-chosen ones.
			items := make([]delay.Item, 40)
			for i := range items {
				items[i] = delay.Item{Message: delay.Message{Payload: []byte{byte(i)}}, When: delay.After(time.Hour)}
			}
			items[4].Message.ID, items[30].Message.ID = "caller-a", "caller-b"
			hook.reset()
			res, err := q.ScheduleBatch(ctx, items)
			require.NoError(t, err)

			// The calls the batch should make: each shard's items in
			// order, in chunks of 3; a chunk with a caller id is slow.
			l := q.Layout()
			perShard := make([][]int, shards)
			for i, r := range res {
				require.Equal(t, delay.Created, r.Outcome)
				s := l.ShardOf(r.ID)
				perShard[s] = append(perShard[s], i)
			}
			fast, slow := 0, 0
			for _, idx := range perShard {
				for c := 0; c < len(idx); c += 3 {
					caller := false
					for _, i := range idx[c:min(c+3, len(idx))] {
						caller = caller || items[i].Message.ID != ""
					}
					if caller {
						slow++
					} else {
						fast++
					}
				}
			}
			require.Positive(t, fast)
			require.Positive(t, slow)
			hook.mu.Lock()
			defer hook.mu.Unlock()
			assert.Equal(t, []int{fast + slow}, hook.pipelines, "one pipeline with every call")
			assert.Zero(t, hook.single)
			assert.Equal(t, map[string]int{scripts.ScheduleGenerated.Hash(): fast, scripts.Schedule.Hash(): slow}, hook.bySHA)
		})
	}
}

// A pipeline of both schedule scripts on a server that has neither loaded
// (a restart, SCRIPT FLUSH) retries the calls that got NOSCRIPT.
func TestScheduleBatchMixedScriptsNoScript(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := redistest.Spawn()
	require.NoError(t, err)
	t.Cleanup(s.Stop)
	rdb := redis.NewClient(redistest.Options(t, s.Addr))
	t.Cleanup(func() { _ = rdb.Close() })
	q, err := delay.New(rdb, "q", delay.WithPrefix(redistest.Prefix(t)), delay.WithShards(4), delay.WithBatchSize(2))
	require.NoError(t, err)
	_, err = q.Len(ctx) // the check, before the flush
	require.NoError(t, err)
	require.NoError(t, rdb.ScriptFlush(ctx).Err())

	items := make([]delay.Item, 30)
	for i := range items {
		items[i] = delay.Item{Message: delay.Message{Payload: []byte(strconv.Itoa(i))}, When: delay.After(time.Hour)}
	}
	items[0].Message.ID, items[17].Message.ID = "a", "b"
	res, err := q.ScheduleBatch(ctx, items)
	require.NoError(t, err)
	for i, r := range res {
		require.Equal(t, delay.Created, r.Outcome, "item %d", i)
		env, err := q.Get(ctx, r.ID)
		require.NoError(t, err, "item %d", i)
		assert.Equal(t, strconv.Itoa(i), string(env.Payload))
	}
	loaded, err := rdb.ScriptExists(ctx, scripts.Schedule.Hash(), scripts.ScheduleGenerated.Hash()).Result()
	require.NoError(t, err)
	assert.Equal(t, []bool{true, true}, loaded)
}

// When one shard's calls fail, the others' results are filled in; the
// failed shard's are Unknown, and the error names the shard.
func TestShardedScheduleBatchPartialFailure(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	q, err := delay.New(rdb, "q", delay.WithPrefix(redistest.Prefix(t)), delay.WithShards(4), delay.WithBatchSize(5))
	require.NoError(t, err)
	l := q.Layout()
	bad := l.ShardOf("victim")
	// Something else's value where the shard's delayed set should be.
	require.NoError(t, rdb.Set(ctx, l.Shard(bad).Main().Delayed, "not a zset", 0).Err())

	items := make([]delay.Item, 200)
	for i := range items {
		items[i] = delay.Item{Message: delay.Message{Payload: []byte(strconv.Itoa(i))}, When: delay.After(time.Hour)}
		if i%2 == 0 {
			items[i].Message.ID = "id-" + strconv.Itoa(i)
		}
	}
	items[0].Message.ID = "victim"
	res, err := q.ScheduleBatch(ctx, items)
	require.Error(t, err)
	assert.Contains(t, err.Error(), fmt.Sprintf("schedule q: shard %d chunk ", bad))
	assert.Contains(t, err.Error(), "the first item 0)")
	wrong := &stream.KeyTypeError{Key: l.Shard(bad).Main().Delayed, Want: "zset", Got: "string"}
	assert.ErrorContains(t, err, wrong.Error(), "the error names the key")
	require.Len(t, res, len(items))
	var created, unknownGenerated int
	for i, r := range res {
		if id := items[i].Message.ID; id != "" {
			assert.Equal(t, id, r.ID, "a caller-chosen id is reported as given")
			if l.ShardOf(id) == bad {
				assert.Equal(t, delay.Unknown, r.Outcome, "item %d", i)
				continue
			}
		}
		if r.Outcome == delay.Unknown {
			assert.Empty(t, r.ID, "item %d: an Unknown result has no generated id", i)
			unknownGenerated++
			continue
		}
		require.Equal(t, delay.Created, r.Outcome, "item %d", i)
		require.NotEqual(t, bad, l.ShardOf(r.ID))
		env, err := q.Get(ctx, r.ID)
		require.NoError(t, err, "item %d", i)
		assert.Equal(t, strconv.Itoa(i), string(env.Payload))
		created++
	}
	assert.Positive(t, unknownGenerated, "generated ids routed to the failed shard")
	_, err = q.Len(ctx)
	require.Error(t, err)
	assert.Contains(t, err.Error(), fmt.Sprintf("len q: shard %d: %v", bad, wrong))
	_, err = q.Stats(ctx)
	require.Error(t, err)
	assert.Contains(t, err.Error(), fmt.Sprintf("stats q: shard %d: %v", bad, wrong))

	require.NoError(t, rdb.Del(ctx, l.Shard(bad).Main().Delayed).Err())
	n, err := q.Len(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(created), n, "only the completed calls wrote")
}

// On a Redis Cluster, a sharded queue's work spreads over every master:
// each shard's calls go to the master that holds its slot, all in one
// pipeline per batch.
func TestShardedCluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, err := redistest.SpawnCluster(3, 0)
	require.NoError(t, err)
	t.Cleanup(c.Stop)
	rdb := c.Client()
	t.Cleanup(func() { _ = rdb.Close() })

	const shards, n = 16, 2000
	q, err := delay.New(rdb, "orders", delay.WithPrefix(redistest.Prefix(t)), delay.WithShards(shards))
	require.NoError(t, err)
	l := q.Layout()
	// The check made and the scripts loaded on every master (a
	// ClusterClient's SCRIPT LOAD goes to all): every call below is one
	// EVALSHA, with no NOSCRIPT retry.
	_, err = q.Len(ctx)
	require.NoError(t, err)
	require.NoError(t, scripts.Schedule.Load(ctx, rdb).Err())
	require.NoError(t, scripts.ScheduleGenerated.Load(ctx, rdb).Err())

	// The master of each shard, from the cluster's slot map.
	cshards, err := rdb.ClusterShards(ctx).Result()
	require.NoError(t, err)
	masterOf := func(slot int) string {
		for _, cs := range cshards {
			for _, r := range cs.Slots {
				if int64(slot) < r.Start || int64(slot) > r.End {
					continue
				}
				for _, node := range cs.Nodes {
					if node.Role == "master" {
						port := node.Port
						if port == 0 { // TLS mode: the node has a TLS port only
							port = node.TLSPort
						}
						return net.JoinHostPort(node.IP, strconv.FormatInt(port, 10))
					}
				}
			}
		}
		t.Fatalf("no master for slot %d", slot)
		return ""
	}
	shardsOn := map[string]int{}
	for s := range shards {
		shardsOn[masterOf(wire.Slot(l.Shard(s).Main().Delayed))]++
	}
	require.Len(t, shardsOn, 3, "the shards' tags spread over every master: %v", shardsOn)

	var mu sync.Mutex
	require.NoError(t, rdb.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		return m.ConfigResetStat(ctx).Err()
	}))

	items := make([]delay.Item, n)
	for i := range items {
		items[i] = delay.Item{Message: delay.Message{Payload: []byte(strconv.Itoa(i))}, When: delay.After(time.Hour + time.Duration(i)*time.Millisecond)}
		if i%2 == 0 {
			items[i].Message.ID = "order:" + strconv.Itoa(i)
		}
	}
	res, err := q.ScheduleBatch(ctx, items)
	require.NoError(t, err)

	evals := map[string]int{}
	require.NoError(t, rdb.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		info, err := m.Info(ctx, "commandstats").Result()
		if err != nil {
			return err
		}
		calls := 0
		for _, line := range strings.Split(info, "\r\n") {
			for _, cmd := range []string{"cmdstat_evalsha:calls=", "cmdstat_eval:calls="} {
				if rest, ok := strings.CutPrefix(line, cmd); ok {
					v, err := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
					if err != nil {
						return err
					}
					calls += v
				}
			}
		}
		mu.Lock()
		evals[m.Options().Addr] = calls
		mu.Unlock()
		return nil
	}))
	// ~125 messages per shard, default batch size 500: one call per shard.
	assert.Equal(t, shardsOn, evals, "script calls per master: one per shard it holds")
	for addr, calls := range evals {
		assert.Positive(t, calls, "master %s ran no script: the work does not spread", addr)
	}

	for i, r := range res {
		require.Equal(t, delay.Created, r.Outcome, "item %d", i)
		env, err := q.Get(ctx, r.ID)
		require.NoError(t, err, "item %d", i)
		require.Equal(t, strconv.Itoa(i), string(env.Payload), "item %d", i)
	}
	for i, r := range res {
		if i%2 == 1 {
			ok, err := q.Cancel(ctx, r.ID)
			require.NoError(t, err, "item %d", i)
			require.True(t, ok, "item %d", i)
		}
	}
	left, err := q.Len(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(n/2), left)
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(n/2), st.Waiting)
	per, err := q.ShardStats(ctx)
	require.NoError(t, err)
	var sum int64
	for _, p := range per {
		assert.Positive(t, p.Waiting)
		sum += p.Waiting
	}
	assert.Equal(t, int64(n/2), sum)
}
