package engine

import (
	"context"
	"fmt"
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

// fakeTaker offers a fixed take for every call and records what comes back.
type fakeTaker struct {
	mu     sync.Mutex
	offer  func(stream string) *Take
	offers int
	took   []*Take
}

func (f *fakeTaker) Offer(s string, _ bool) *Take {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.offers++
	return f.offer(s)
}

func (f *fakeTaker) Took(t *Take) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.took = append(f.took, t)
}

func (f *fakeTaker) last(t *testing.T) *Take {
	f.mu.Lock()
	defer f.mu.Unlock()
	require.Equal(t, f.offers, len(f.took), "every offer handed back once")
	require.NotEmpty(t, f.took)
	return f.took[len(f.took)-1]
}

// takeQueue returns a client, the main lane's keys and an engine of a new
// queue with the given messages due now, its group g created when group.
func takeQueue(t *testing.T, n int, group bool) (redis.UniversalClient, stream.Lane, *Engine) {
	t.Helper()
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	q, err := delay.New(rdb, "q", delay.WithPrefix(prefix))
	require.NoError(t, err)
	lane := q.Keys().Main()
	if group {
		require.NoError(t, rdb.XGroupCreateMkStream(ctx, lane.Stream, "g", "$").Err())
	}
	// Due in the past, in order: due at once, read in this order.
	past := time.Now().Add(-time.Minute)
	for i := range n {
		_, err := q.Schedule(ctx, delay.Message{Payload: []byte(fmt.Sprint("p", i))}, delay.At(past.Add(time.Duration(i)*time.Millisecond)))
		require.NoError(t, err)
	}
	m, err := New(rdb, "q", WithPrefix(prefix))
	require.NoError(t, err)
	// Loaded: a server that does not have the script yet runs the call
	// on its own after the pipeline, whose read then found nothing.
	require.NoError(t, scripts.Promote.Load(ctx, rdb).Err())
	return rdb, lane, m
}

// announced subscribes to the lane's arrivals channel and returns a
// function that waits for the next announcement's payload.
func announced(t *testing.T, rdb redis.UniversalClient, lane stream.Lane) func() string {
	t.Helper()
	ps := rdb.Subscribe(context.Background(), lane.Arrivals)
	t.Cleanup(func() { _ = ps.Close() })
	_, err := ps.Receive(context.Background()) // the subscription's confirmation
	require.NoError(t, err)
	ch := ps.Channel()
	return func() string {
		select {
		case m := <-ch:
			return m.Payload
		case <-time.After(5 * time.Second):
			require.FailNow(t, "no announcement")
			return ""
		}
	}
}

// A promote call that appends entries reads the taker's group's new ones
// for its consumer, and its announcement says the group has nothing new
// when the read asked for more than there was; asked for fewer, the rest
// stays for the group's reads, and the announcement is the plain one.
func TestTakeReadsInPromoteCall(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		count int64
		want  int
	}{{5, 3}, {3, 3}, {2, 2}} {
		t.Run(fmt.Sprint("count=", tc.count), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			rdb, lane, m := takeQueue(t, 3, true)
			next := announced(t, rdb, lane)
			ft := &fakeTaker{offer: func(s string) *Take {
				return &Take{Stream: s, Group: "g", Consumer: "c1", Count: tc.count}
			}}
			m.setTaker(ft)
			r, err := m.lanes[0].runOnce(ctx)
			require.NoError(t, err)
			require.Equal(t, 3, r.moved, "%+v", r)
			tk := ft.last(t)
			require.NoError(t, tk.ReadErr)
			require.Len(t, tk.Entries, tc.want)
			for i, x := range tk.Entries {
				en, err := wire.Decode(lane.Stream, x.ID, x.Values)
				require.NoError(t, err)
				assert.Equal(t, fmt.Sprint("p", i), string(en.Envelope.Payload), "in due order")
			}
			assert.Equal(t, "0\ng\nc1", next(), "the announcement names the consumer that read")
			pend, err := rdb.XPending(ctx, lane.Stream, "g").Result()
			require.NoError(t, err)
			assert.EqualValues(t, tc.want, pend.Count, "read for the consumer: pending")
			assert.Equal(t, map[string]int64{"c1": int64(tc.want)}, pend.Consumers)
		})
	}
}

// A take's acknowledgements go out with every call: one that moves
// nothing, and one refused because another mover holds the lease. An id
// XACK refuses fails the acknowledgement, not the promotion.
func TestTakeAcknowledges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, lane, m := takeQueue(t, 3, true)
	read := &fakeTaker{offer: func(s string) *Take { return &Take{Stream: s, Group: "g", Consumer: "c1", Count: 10} }}
	m.setTaker(read)
	_, err := m.lanes[0].runOnce(ctx)
	require.NoError(t, err)
	ids := []string{}
	for _, x := range read.last(t).Entries {
		ids = append(ids, x.ID)
	}
	require.Len(t, ids, 3)

	ack := func(ids ...string) *fakeTaker {
		ft := &fakeTaker{offer: func(s string) *Take { return &Take{Stream: s, Group: "g", Consumer: "c1", Acks: ids} }}
		m.setTaker(ft)
		return ft
	}
	ft := ack(ids[0])
	r, err := m.lanes[0].runOnce(ctx)
	require.NoError(t, err)
	assert.Zero(t, r.moved)
	tk := ft.last(t)
	assert.True(t, tk.AckSent)
	assert.NoError(t, tk.AckErr)
	assert.EqualValues(t, 1, tk.Acked)
	assert.Empty(t, tk.Entries, "nothing moved: nothing read")

	// Another mover's lease: the call promotes nothing, acknowledges.
	require.NoError(t, rdb.Set(ctx, lane.Lease, "someone-else", time.Minute).Err())
	ft = ack(ids[1], ids[2])
	r, err = m.lanes[0].runOnce(ctx)
	require.NoError(t, err)
	assert.Positive(t, r.leaseTTL, "refused: another mover's lease")
	assert.EqualValues(t, 2, ft.last(t).Acked)
	pend, err := rdb.XPending(ctx, lane.Stream, "g").Result()
	require.NoError(t, err)
	assert.Zero(t, pend.Count)

	require.NoError(t, rdb.Del(ctx, lane.Lease).Err())
	ft = ack("not-an-id")
	_, err = m.lanes[0].runOnce(ctx)
	require.NoError(t, err, "a refused acknowledgement does not fail the call")
	assert.Error(t, ft.last(t).AckErr)
}

// A missing group fails the take's read, not the promotion: the entries
// are appended and announced as usual, and the error names NOGROUP, which
// the consumer's own read then meets and handles.
func TestTakeMissingGroup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, lane, m := takeQueue(t, 2, false)
	next := announced(t, rdb, lane)
	ft := &fakeTaker{offer: func(s string) *Take { return &Take{Stream: s, Group: "g", Consumer: "c1", Count: 5} }}
	m.setTaker(ft)
	r, err := m.lanes[0].runOnce(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, r.moved)
	tk := ft.last(t)
	require.Error(t, tk.ReadErr)
	assert.True(t, redis.HasErrorPrefix(tk.ReadErr, "NOGROUP"), "%v", tk.ReadErr)
	assert.Empty(t, tk.Entries)
	assert.Equal(t, "0\ng\nc1", next())
	n, err := rdb.XLen(ctx, lane.Stream).Result()
	require.NoError(t, err)
	assert.EqualValues(t, 2, n)
}

// A call that fails before a reply hands its take back unsent, and an
// engine without a taker (or whose taker offers nothing) sends the plain
// call.
func TestTakeCallFailed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, _, m := takeQueue(t, 1, true)
	// An engine on a client that is closed: its call fails.
	closed := redis.NewClient(redistest.Options(t, redistest.Addr(t)))
	require.NoError(t, closed.Close())
	dead, err := New(closed, "q", WithPrefix(m.cfg.prefix))
	require.NoError(t, err)
	ft := &fakeTaker{offer: func(s string) *Take {
		return &Take{Stream: s, Group: "g", Consumer: "c1", Count: 5, Acks: []string{"1-1"}}
	}}
	dead.setTaker(ft)
	_, err = dead.lanes[0].runOnce(ctx)
	require.Error(t, err)
	assert.False(t, ft.last(t).AckSent)
	assert.Error(t, ft.last(t).ReadErr)

	none := &fakeTaker{offer: func(string) *Take { return nil }}
	m.setTaker(none)
	r, err := m.lanes[0].runOnce(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, r.moved)
	assert.Equal(t, 1, none.offers)
	assert.Empty(t, none.took, "nothing offered: nothing handed back")
}
