package engine

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/internal/delay"
	"github.com/delaystream/delaystream/internal/redistest"
	"github.com/delaystream/delaystream/internal/stream"
	"github.com/delaystream/delaystream/internal/wire"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// offline is a client that is never dialled: New talks to no server.
func offline(t *testing.T) redis.UniversalClient {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestLaneWait(t *testing.T) {
	t.Parallel()
	m, err := New(offline(t), "q", WithBatchSize(10))
	require.NoError(t, err)
	l := m.lanes[0]
	const nowMs = 1_700_000_000_000
	const nowUs = nowMs * 1000
	tests := []struct {
		name  string
		r     result
		d     time.Duration
		until int64
	}{
		{"full batch", result{moved: 10, next: nowMs, nowUs: nowUs, leaseTTL: -1}, 0, nowMs},
		{"full batch with quarantined", result{moved: 6, quarantined: 4, next: -1, nowUs: nowUs, leaseTTL: -1}, 0, -1},
		{"nothing due", result{next: -1, nowUs: nowUs, leaseTTL: -1}, DefaultMaxIdle, -1},
		{"partial batch, nothing left", result{moved: 3, next: -1, nowUs: nowUs, leaseTTL: -1}, DefaultMaxIdle, -1},
		{"next due in 300ms", result{next: nowMs + 300, nowUs: nowUs, leaseTTL: -1}, 300 * time.Millisecond, nowMs + 300},
		{"next due in 299.5ms", result{next: nowMs + 300, nowUs: nowUs + 500, leaseTTL: -1}, 299500 * time.Microsecond, nowMs + 300},
		{"next due after max idle", result{next: nowMs + 5000, nowUs: nowUs, leaseTTL: -1}, DefaultMaxIdle, nowMs + 5000},
		{"next due already passed", result{moved: 1, next: nowMs - 5, nowUs: nowUs, leaseTTL: -1}, 0, nowMs - 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d, until := l.wait(tt.r)
			assert.Equal(t, tt.d, d)
			assert.Equal(t, tt.until, until)
		})
	}

	standby := []struct {
		name     string
		leaseTTL int64 // ms left on the holder's lease
		min, max time.Duration
	}{
		{"standby", 500, 501 * time.Millisecond, 520 * time.Millisecond},
		{"standby, lease about to lapse", 0, time.Millisecond, 20 * time.Millisecond},
		{"standby, holder has a longer lease", 60_000, DefaultLeaseTTL, DefaultLeaseTTL},
		{"standby, full batch reply is ignored", 100, 101 * time.Millisecond, 120 * time.Millisecond},
	}
	for _, tt := range standby {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for range 200 { // the jitter is random
				d, until := l.wait(result{moved: 10, next: nowMs, nowUs: nowUs, leaseTTL: tt.leaseTTL})
				require.GreaterOrEqual(t, d, tt.min)
				require.LessOrEqual(t, d, tt.max)
				require.LessOrEqual(t, d, m.cfg.leaseTTL, "a standby never sleeps longer than a lease")
				require.Equal(t, int64(-1), until)
			}
		})
	}
}

func TestLaneNotify(t *testing.T) {
	t.Parallel()
	m, err := New(offline(t), "q")
	require.NoError(t, err)
	newLane := func(until int64) *lane {
		l := m.newLane(stream.Lane{})
		l.wake = make(chan int64, 1)
		l.until.Store(until)
		return l
	}
	pending := func(l *lane) []int64 {
		var got []int64
		for {
			select {
			case d := <-l.wake:
				got = append(got, d)
			default:
				return got
			}
		}
	}
	tests := []struct {
		name   string
		until  int64
		notify []int64
		want   []int64
	}{
		{"awake keeps every wake-up", noDue, []int64{5000}, []int64{5000}},
		{"earlier than the sleep target wakes", 1000, []int64{500}, []int64{500}},
		{"later than the sleep target is ignored", 1000, []int64{2000, 1000}, nil},
		{"one pending wake-up at most", noDue, []int64{300, 200}, []int64{300}},
		{"a released lease is never lost behind a due time", noDue, []int64{5000, 0}, []int64{0}},
		{"a released lease wakes whatever the target", 1000, []int64{0}, []int64{0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := newLane(tt.until)
			for _, d := range tt.notify {
				l.notify(d) // never blocks
			}
			assert.Equal(t, tt.want, pending(l))
		})
	}
}

// promoteHook records OnPromote calls.
type promoteHook struct {
	mu    sync.Mutex
	calls []promoteCall
}

type promoteCall struct {
	lane               string
	moved, quarantined int
	took               time.Duration
}

func (h *promoteHook) hooks() Hooks {
	return Hooks{OnPromote: func(lane string, moved, quarantined int, took time.Duration) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.calls = append(h.calls, promoteCall{lane, moved, quarantined, took})
	}}
}

func (h *promoteHook) get() []promoteCall {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]promoteCall(nil), h.calls...)
}

func TestRunOnceMovesDueEntriesOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	q, err := delay.New(rdb, "q", delay.WithPrefix(prefix))
	require.NoError(t, err)
	lane := q.Keys().Main()

	past := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	future := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	var items []delay.Item
	for i, id := range []string{"due-1", "due-2", "due-3"} {
		items = append(items, delay.Item{Message: delay.Message{ID: id, Payload: []byte(id)}, When: delay.At(past.Add(time.Duration(i) * time.Second))})
	}
	items = append(items,
		delay.Item{Message: delay.Message{ID: "later-1"}, When: delay.At(future)},
		delay.Item{Message: delay.Message{ID: "later-2"}, When: delay.At(future.Add(time.Hour))})
	_, err = q.ScheduleBatch(ctx, items)
	require.NoError(t, err)

	hook := &promoteHook{}
	m, err := New(rdb, "q", WithPrefix(prefix), WithHooks(hook.hooks()))
	require.NoError(t, err)
	l := m.lanes[0]

	before := time.Now()
	r, err := l.runOnce(ctx)
	require.NoError(t, err)
	assert.Equal(t, 3, r.moved)
	assert.Equal(t, 0, r.quarantined)
	assert.Equal(t, future.UnixMilli(), r.next, "next due is the earliest one left")
	assert.Equal(t, int64(-1), r.leaseTTL, "the first mover takes the lease")
	assert.WithinDuration(t, before, time.UnixMicro(r.nowUs), 5*time.Second)

	msgs, err := rdb.XRange(ctx, lane.Stream, "-", "+").Result()
	require.NoError(t, err)
	require.Len(t, msgs, 3)
	for i, x := range msgs {
		e, err := wire.Decode(lane.Stream, x.ID, x.Values)
		require.NoError(t, err)
		assert.Equal(t, items[i].Message.ID, e.Envelope.ID, "promoted in due order")
		assert.Equal(t, items[i].Message.Payload, e.Envelope.Payload)
		assert.Equal(t, 1, e.Envelope.Attempt)
		assert.True(t, past.Add(time.Duration(i)*time.Second).Equal(e.Envelope.Due))
		assert.False(t, e.Appended().Before(e.Envelope.Due), "never early")
	}
	zs, err := rdb.ZRange(ctx, lane.Delayed, 0, -1).Result()
	require.NoError(t, err)
	assert.Equal(t, []string{"later-1", "later-2"}, zs)
	hkeys, err := rdb.HKeys(ctx, lane.Envelopes).Result()
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"later-1", "later-2"}, hkeys)

	assert.Equal(t, Counters{Promoted: 3, Batches: 1}, m.Counters())
	calls := hook.get()
	require.Len(t, calls, 1)
	assert.Equal(t, lane.Stream, calls[0].lane)
	assert.Equal(t, 3, calls[0].moved)
	assert.Equal(t, 0, calls[0].quarantined)
	assert.Positive(t, calls[0].took)

	// Nothing more is due: the call changes nothing and is not a batch.
	r, err = l.runOnce(ctx)
	require.NoError(t, err)
	assert.Equal(t, 0, r.moved)
	assert.Equal(t, future.UnixMilli(), r.next)
	assert.Equal(t, Counters{Promoted: 3, Batches: 1}, m.Counters())
	assert.Len(t, hook.get(), 1, "OnPromote only for calls that moved something")

	// A second mover finds the lease taken and does nothing.
	other, err := New(rdb, "q", WithPrefix(prefix))
	require.NoError(t, err)
	require.NoError(t, rdb.ZAdd(ctx, lane.Delayed, redis.Z{Member: "later-1", Score: float64(past.UnixMilli())}).Err())
	r, err = other.lanes[0].runOnce(ctx)
	require.NoError(t, err)
	assert.Equal(t, 0, r.moved)
	assert.Greater(t, r.leaseTTL, int64(0))
	assert.LessOrEqual(t, r.leaseTTL, DefaultLeaseTTL.Milliseconds())
	n, err := rdb.XLen(ctx, lane.Stream).Result()
	require.NoError(t, err)
	assert.Equal(t, int64(3), n, "a standby promotes nothing")

	// The lease holder does.
	r, err = l.runOnce(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, r.moved)
}

func TestRunOnceBatchLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	q, err := delay.New(rdb, "q", delay.WithPrefix(prefix))
	require.NoError(t, err)
	items := make([]delay.Item, 5)
	for i := range items {
		items[i] = delay.Item{Message: delay.Message{}, When: delay.At(time.UnixMilli(int64(1000 + i)))}
	}
	_, err = q.ScheduleBatch(ctx, items)
	require.NoError(t, err)

	m, err := New(rdb, "q", WithPrefix(prefix), WithBatchSize(2), WithoutLease())
	require.NoError(t, err)
	l := m.lanes[0]
	var moved []int
	var waits []time.Duration
	for range 3 {
		r, err := l.runOnce(ctx)
		require.NoError(t, err)
		assert.Equal(t, int64(-1), r.leaseTTL, "without a lease every call works")
		moved = append(moved, r.moved)
		d, _ := l.wait(r)
		waits = append(waits, d)
	}
	assert.Equal(t, []int{2, 2, 1}, moved)
	assert.Equal(t, []time.Duration{0, 0, DefaultMaxIdle}, waits, "loop at once while batches are full")
	assert.Equal(t, Counters{Promoted: 5, Batches: 3}, m.Counters())
	exists, err := rdb.Exists(ctx, q.Keys().Main().Lease).Result()
	require.NoError(t, err)
	assert.Zero(t, exists, "WithoutLease takes no lease")
}

func TestRunOnceQuarantine(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	keys, err := stream.NewKeys(prefix, "q", 0, 1)
	require.NoError(t, err)
	lane := keys.Main()
	q, err := delay.New(rdb, "q", delay.WithPrefix(prefix))
	require.NoError(t, err)

	due := time.Now().Add(-time.Second).Truncate(time.Millisecond)
	_, err = q.Schedule(ctx, delay.Message{ID: "good", Payload: []byte("ok")}, delay.At(due))
	require.NoError(t, err)
	// An orphan: in the delayed set with no envelope.
	require.NoError(t, rdb.ZAdd(ctx, lane.Delayed, redis.Z{Member: "orphan", Score: float64(due.UnixMilli() + 1)}).Err())
	// A foreign value: written by something else.
	require.NoError(t, rdb.ZAdd(ctx, lane.Delayed, redis.Z{Member: "foreign", Score: float64(due.UnixMilli() + 2)}).Err())
	require.NoError(t, rdb.HSet(ctx, lane.Envelopes, "foreign", "\x00\x01garbage").Err())
	// A generated id: a packed member, promoted like the plain one.
	gen, err := q.Schedule(ctx, delay.Message{Payload: []byte("gen")}, delay.At(due.Add(3*time.Millisecond)))
	require.NoError(t, err)
	// A packed member whose envelope is foreign, and a member of a kind
	// this version does not know.
	require.NoError(t, rdb.ZAdd(ctx, lane.Delayed,
		redis.Z{Member: "\x01ABCDEFGHJKMNPQRS\x00\x01garbage", Score: float64(due.UnixMilli() + 4)},
		redis.Z{Member: "\x02future", Score: float64(due.UnixMilli() + 5)}).Err())

	hook := &promoteHook{}
	m, err := New(rdb, "q", WithPrefix(prefix), WithHooks(hook.hooks()))
	require.NoError(t, err)
	r, err := m.lanes[0].runOnce(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, r.moved)
	assert.Equal(t, 4, r.quarantined)
	assert.Equal(t, int64(-1), r.next)

	qs, err := stream.ReadQuarantine(ctx, rdb, lane.Quarantine, "", 10)
	require.NoError(t, err)
	require.Len(t, qs, 4)
	assert.Equal(t, "orphan", qs[0].MessageID)
	assert.Equal(t, "missing envelope", qs[0].Reason)
	assert.Nil(t, qs[0].Raw)
	assert.True(t, due.Add(time.Millisecond).Equal(qs[0].Due))
	assert.Equal(t, "foreign", qs[1].MessageID)
	assert.Equal(t, "unknown envelope format", qs[1].Reason)
	assert.Equal(t, []byte("\x00\x01garbage"), qs[1].Raw)
	assert.True(t, due.Add(2*time.Millisecond).Equal(qs[1].Due))
	assert.Equal(t, "unknown envelope format", qs[2].Reason)
	assert.Equal(t, wire.GeneratedID(due.UnixMilli()+4, "ABCDEFGHJKMNPQRS"), qs[2].MessageID, "the id rebuilt from the member")
	assert.Equal(t, []byte("\x01ABCDEFGHJKMNPQRS\x00\x01garbage"), qs[2].Member)
	assert.Equal(t, []byte("\x00\x01garbage"), qs[2].Raw)
	assert.Equal(t, "unknown member format", qs[3].Reason)
	assert.Equal(t, []byte("\x02future"), qs[3].Member, "the whole member is kept")
	assert.Nil(t, qs[3].Raw)
	assert.Empty(t, qs[3].MessageID)
	assert.True(t, due.Add(5*time.Millisecond).Equal(qs[3].Due))

	msgs, err := rdb.XRange(ctx, lane.Stream, "-", "+").Result()
	require.NoError(t, err)
	require.Len(t, msgs, 2)
	assert.Equal(t, "good", msgs[0].Values[wire.FieldID])
	assert.Nil(t, msgs[1].Values[wire.FieldID], "a packed member is appended as is")
	entry, err := wire.Decode(lane.Stream, msgs[1].ID, msgs[1].Values)
	require.NoError(t, err)
	assert.Equal(t, gen.ID, entry.Envelope.ID)
	assert.Equal(t, []byte("gen"), entry.Envelope.Payload)
	assert.True(t, gen.Due.Equal(entry.Envelope.Due), "due %v, want %v", entry.Envelope.Due, gen.Due)

	n, err := rdb.Exists(ctx, lane.Delayed, lane.Envelopes).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "nothing left in the delayed set or the envelopes")

	assert.Equal(t, Counters{Promoted: 2, Quarantined: 4, Batches: 1}, m.Counters())
	calls := hook.get()
	require.Len(t, calls, 1)
	assert.Equal(t, promoteCall{lane: lane.Stream, moved: 2, quarantined: 4, took: calls[0].took}, calls[0])
}

func TestRunOnceErrorIsCounted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	keys, err := stream.NewKeys(prefix, "q", 0, 1)
	require.NoError(t, err)
	// The delayed set is a string: the script fails.
	require.NoError(t, rdb.Set(ctx, keys.Main().Delayed, "x", 0).Err())
	m, err := New(rdb, "q", WithPrefix(prefix), WithoutLease())
	require.NoError(t, err)
	_, err = m.lanes[0].runOnce(ctx)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "promote "+keys.Main().Delayed+": ")
	var kerr *stream.KeyTypeError
	require.ErrorAs(t, err, &kerr, "a WRONGTYPE reply is explained")
	assert.Equal(t, stream.KeyTypeError{Key: keys.Main().Delayed, Want: "zset", Got: "string"}, *kerr)
	assert.ErrorIs(t, err, stream.ErrWrongType)
	assert.Equal(t, Counters{Errors: 1, Stuck: 1}, m.Counters())
}

// The promote script rebuilds a generated id from its packed member and due
// time; the ids in the stream are the ones Schedule returned, across due
// times that differ in every character of the id's time part.
func TestPromoteRebuildsGeneratedIDs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	q, err := delay.New(rdb, "q", delay.WithPrefix(prefix))
	require.NoError(t, err)
	base := time.Now().Add(-10 * time.Hour).Truncate(time.Millisecond) // all due
	var items []delay.Item
	for i := range 300 {
		items = append(items, delay.Item{
			Message: delay.Message{Payload: fmt.Appendf(nil, "%d", i)},
			When:    delay.At(base.Add(time.Duration(i*i*i) * time.Millisecond)), // up to 27e6 ms apart
		})
	}
	items = append(items, delay.Item{Message: delay.Message{Payload: []byte("epoch")}, When: delay.At(time.UnixMilli(1))})
	res, err := q.ScheduleBatch(ctx, items)
	require.NoError(t, err)
	want := map[string]string{}
	for i, r := range res {
		want[r.ID] = string(items[i].Message.Payload)
	}
	require.Len(t, want, len(items))

	m, err := New(rdb, "q", WithPrefix(prefix), WithBatchSize(64))
	require.NoError(t, err)
	for {
		r, err := m.lanes[0].runOnce(ctx)
		require.NoError(t, err)
		if r.moved == 0 {
			break
		}
	}
	msgs, err := rdb.XRange(ctx, q.Keys().Main().Stream, "-", "+").Result()
	require.NoError(t, err)
	got := map[string]string{}
	for _, msg := range msgs {
		e, err := wire.Decode(q.Keys().Main().Stream, msg.ID, msg.Values)
		require.NoError(t, err)
		got[e.Envelope.ID] = string(e.Envelope.Payload)
	}
	assert.Equal(t, want, got)
}
