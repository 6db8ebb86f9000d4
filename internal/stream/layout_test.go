package stream_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/internal/stream"
	"github.com/delaystream/delaystream/internal/wire"
)

func TestLayoutUnshardedIsTheOldLayout(t *testing.T) {
	t.Parallel()
	l, err := stream.NewLayout("ds", "orders", 1)
	require.NoError(t, err)
	k, err := stream.NewKeys("ds", "orders", 0, 1)
	require.NoError(t, err)
	assert.Equal(t, k, l.Shard(0))
	assert.Equal(t, 1, l.Shards())
	assert.Equal(t, 0, l.ShardOf("anything"))
	assert.Equal(t, "ds:1:{orders}:q", l.Meta())
	assert.Equal(t, "ds:1:{orders}:o", l.Movers())
	assert.Equal(t, "ds:1:{orders}:n", l.Shard(0).Main().Arrivals, "an unsharded queue announces arrivals too")
	assert.False(t, l.Shard(0).Main().Sharded)

	s, err := stream.NewLayout("ds", "orders", 4)
	require.NoError(t, err)
	k3 := s.Shard(3)
	main, retry := k3.Main(), k3.Retry("billing")
	assert.True(t, main.Sharded && retry.Sharded)
	assert.Equal(t, "ds:1:{"+k3.Tag()+"}:n", main.Arrivals)
	assert.Equal(t, "ds:1:{"+k3.Tag()+"}:r:billing:n", retry.Arrivals)
	assert.Equal(t, wire.Slot(main.Stream), wire.Slot(main.Arrivals), "a lane's channels are in its shard's slot")
	assert.Equal(t, wire.Slot(main.Stream), wire.Slot(retry.Wake))
}

// Shard i's tag hashes near the centre of the i-th of n equal slot ranges, so that the
// shards of a queue spread over a cluster's masters as evenly as n allows.
func TestLayoutShardsSpreadOverSlots(t *testing.T) {
	t.Parallel()
	for _, n := range []int{2, 3, 7, 16, 100, stream.MaxShards} {
		queues := []string{"orders", "q", "notifications:eu-west-1"}
		if n == stream.MaxShards {
			queues = queues[:1]
		}
		for _, queue := range queues {
			l, err := stream.NewLayout("ds", queue, n)
			require.NoError(t, err)
			require.Equal(t, n, l.Shards())
			seen := map[string]bool{}
			for i := range n {
				k := l.Shard(i)
				slot := wire.Slot(k.Main().Stream)
				lo, hi := i*wire.Slots/n, (i+1)*wire.Slots/n
				centre, half := (lo+hi)/2, max((hi-lo)/32, 8)
				lo, hi = max(lo, centre-half), min(hi, centre+half+1)
				require.GreaterOrEqual(t, slot, lo, "n=%d %s shard %d tag %s", n, queue, i, k.Tag())
				require.Less(t, slot, hi, "n=%d %s shard %d tag %s", n, queue, i, k.Tag())
				require.False(t, seen[k.Tag()], "duplicate tag %s", k.Tag())
				seen[k.Tag()] = true
				want, err := stream.NewKeys("ds", queue, i, n)
				require.NoError(t, err)
				require.Equal(t, want, k)
			}
		}
	}
}

// On a cluster made by redis-cli --cluster create (equal slot ranges), no
// master holds more than one shard above an even split. Naive tags do not
// have this property: the test shows one queue name where they fail.
func TestLayoutEvenOverMasters(t *testing.T) {
	t.Parallel()
	masterOf := func(slot, masters int) int {
		// redis-cli gives master m the slots [m*16384/M, (m+1)*16384/M)
		// (rounded the same way), as CLUSTER SLOTS shows.
		for m := range masters {
			if slot < (m+1)*wire.Slots/masters {
				return m
			}
		}
		return masters - 1
	}
	spread := func(tags []string, masters int) (lo, hi int) {
		count := make([]int, masters)
		for _, tag := range tags {
			count[masterOf(wire.Slot(tag), masters)]++
		}
		lo, hi = count[0], count[0]
		for _, c := range count {
			lo, hi = min(lo, c), max(hi, c)
		}
		return lo, hi
	}
	// Whatever the queue's name: a window around the centre of each
	// shard's range, not anywhere in it (a range that straddles two
	// masters would then go either way, by name).
	for _, n := range []int{2, 8, 16, 32, 100} {
		for q := range 200 {
			l, err := stream.NewLayout("ds", fmt.Sprintf("q%d", q), n)
			require.NoError(t, err)
			tags := make([]string, n)
			for i := range tags {
				tags[i] = l.Shard(i).Tag()
			}
			for _, masters := range []int{3, 5, 6} {
				lo, hi := spread(tags, masters)
				want := n / masters
				require.True(t, lo >= want-1 && hi <= want+1 && hi-lo <= 1 || n < masters && hi == 1,
					"masters=%d n=%d queue q%d: %d..%d shards per master", masters, n, q, lo, hi)
			}
		}
	}
	naive := make([]string, 8)
	for i := range naive {
		naive[i] = fmt.Sprintf("q:%d", i)
	}
	lo, hi := spread(naive, 3)
	assert.Equal(t, 2, hi-lo, "naive tags q:0..q:7 spread %d..%d over 3 masters", lo, hi)
}

func TestLayoutErrors(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, -1, stream.MaxShards + 1} {
		_, err := stream.NewLayout("ds", "q", n)
		require.ErrorIs(t, err, stream.ErrInvalidName, "n=%d", n)
	}
	_, err := stream.NewLayout("ds", "a{b", 2)
	require.ErrorIs(t, err, stream.ErrInvalidName)
}
