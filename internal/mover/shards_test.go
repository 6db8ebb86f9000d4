package mover_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/codec"
	"github.com/delaystream/delaystream/internal/margin"
	"github.com/delaystream/delaystream/internal/mover"
	"github.com/delaystream/delaystream/internal/redistest"
	"github.com/delaystream/delaystream/internal/stream"
	"github.com/delaystream/delaystream/internal/wire"
)

func TestWithShards(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	t.Cleanup(func() { _ = rdb.Close() })
	for _, tt := range []struct {
		n   int
		msg string
	}{
		{n: 1}, {n: 16}, {n: stream.MaxShards},
		{n: 0, msg: "shard count must be 1..1024, got 0"},
		{n: stream.MaxShards + 1, msg: "shard count must be 1..1024, got 1025"},
	} {
		t.Run(fmt.Sprint(tt.n), func(t *testing.T) {
			t.Parallel()
			m, err := mover.New(rdb, "q", mover.WithShards(tt.n))
			if tt.msg != "" {
				require.ErrorIs(t, err, mover.ErrInvalidOption)
				assert.Contains(t, err.Error(), tt.msg)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.n, m.Shards())
			assert.Nil(t, m.Owned(), "nothing owned before Run")
		})
	}
}

// ownedLog records a mover's OnOwnership calls.
type ownedLog struct {
	mu   sync.Mutex
	last []int
}

func (o *ownedLog) hook(owned []int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.last = owned
}

func (o *ownedLog) get() []int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.last
}

// Two movers of an 8-shard queue split it 4 and 4, deliver every message
// once into its shard's stream, and when one stops the other takes every
// shard at once.
func TestShardedMovers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	const n = 8
	layout, err := stream.NewLayout(prefix, "q", n)
	require.NoError(t, err)
	logs := []*ownedLog{{}, {}}
	var movers []*mover.Mover
	var stops []func() (time.Duration, error)
	for i := range 2 {
		m, err := mover.New(redistest.Client(t), "q", mover.WithPrefix(prefix), mover.WithShards(n),
			mover.WithHooks(mover.Hooks{OnOwnership: logs[i].hook}))
		require.NoError(t, err)
		movers = append(movers, m)
		stops = append(stops, run(t, m))
	}
	// Each wait below is a round trip or a few by design; its limit is a
	// deadline for a hang, ample for two loaded cores (make stress shows
	// how near each came).
	margin.Eventually(t, "split", func() bool {
		a, b := movers[0].Owned(), movers[1].Owned()
		return len(a) == n/2 && len(b) == n/2 && !slices.ContainsFunc(a, func(i int) bool { return slices.Contains(b, i) })
	}, 10*time.Second, 5*time.Millisecond, "an even, disjoint split")
	margin.Eventually(t, "split reported", func() bool {
		return slices.Equal(logs[0].get(), movers[0].Owned()) && slices.Equal(logs[1].get(), movers[1].Owned())
	}, 5*time.Second, 5*time.Millisecond, "the hook reports the split")

	// Messages written straight into their shards' delayed sets, due now.
	const count = 400
	pipe := rdb.Pipeline()
	due := time.Now().Add(-time.Millisecond).UnixMilli()
	for i := range count {
		id := fmt.Sprint("m-", i)
		lane := layout.Shard(layout.ShardOf(id)).Main()
		// The envelope first: a running mover may promote the member as
		// soon as it is in the set (the pipeline is no transaction), and
		// would quarantine it without one.
		pipe.HSet(ctx, lane.Envelopes, id, wire.MarshalEnvelope(&codec.Envelope{Payload: []byte(id), Attempt: 1}))
		pipe.ZAdd(ctx, lane.Delayed, redis.Z{Member: id, Score: float64(due)})
	}
	for i := range n {
		pipe.SPublish(ctx, layout.Shard(i).Main().Wake, due) // a sharded lane's wake channel is a shard channel
	}
	_, err = pipe.Exec(ctx)
	require.NoError(t, err)
	margin.Eventually(t, "promoted", func() bool {
		return movers[0].Counters().Promoted+movers[1].Counters().Promoted == count
	}, 10*time.Second, 5*time.Millisecond, "every message promoted")
	assert.Positive(t, movers[0].Counters().Promoted, "both movers promote their shares")
	assert.Positive(t, movers[1].Counters().Promoted)
	seen := map[string]int{}
	for i := range n {
		key := layout.Shard(i).Main().Stream
		xs, err := rdb.XRange(ctx, key, "-", "+").Result()
		require.NoError(t, err)
		for _, x := range xs {
			e, err := wire.Decode(key, x.ID, x.Values)
			require.NoError(t, err)
			assert.Equal(t, i, layout.ShardOf(e.Envelope.ID))
			seen[e.Envelope.ID]++
		}
	}
	assert.Len(t, seen, count)
	for id, c := range seen {
		assert.Equal(t, 1, c, id)
	}

	_, err = stops[0]()
	require.NoError(t, err)
	stopped := time.Now()
	margin.Eventually(t, "takeover", func() bool { return len(movers[1].Owned()) == n }, 5*time.Second, 5*time.Millisecond,
		"a mover that stops leaves: the other takes every shard")
	t.Logf("took over in %s", time.Since(stopped))
	assert.Nil(t, movers[0].Owned())
	assert.Empty(t, logs[0].get())
}
