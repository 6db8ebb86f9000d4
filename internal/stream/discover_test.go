package stream_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/internal/redistest"
	"github.com/delaystream/delaystream/internal/stream"
)

// record writes the record of queue with n shards, as a part of the queue
// does at its first call.
func record(t *testing.T, rdb redis.UniversalClient, prefix, queue string, n any) string {
	t.Helper()
	l, err := stream.NewLayout(prefix, queue, 1)
	require.NoError(t, err)
	require.NoError(t, rdb.HSet(context.Background(), l.Meta(), "shards", n, "epoch", "e").Err())
	return l.Meta()
}

func TestDiscover(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"redis", "miniredis"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			var rdb redis.UniversalClient = redistest.Client(t)
			if backend == "miniredis" {
				mr := miniredis.RunT(t)
				c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
				t.Cleanup(func() { _ = c.Close() })
				rdb = c
			}
			ctx := context.Background()
			prefix := redistest.Prefix(t) + "*?[x]" // glob characters match only themselves
			record(t, rdb, prefix, "orders", 1)
			meta := record(t, rdb, prefix, "wide:eu", 8)
			record(t, rdb, prefix, "broken", "many")
			// Not records: other keys of a queue, another prefix, a
			// prefix that only starts like this one, a key of another type.
			l, err := stream.NewLayout(prefix, "orders", 1)
			require.NoError(t, err)
			require.NoError(t, rdb.ZAdd(ctx, l.Shard(0).Main().Delayed, redis.Z{Member: "m", Score: 1}).Err())
			require.NoError(t, rdb.ZAdd(ctx, l.Shard(0).Retry("g").Delayed, redis.Z{Member: "m", Score: 1}).Err())
			record(t, rdb, prefix+"x", "other", 1)
			record(t, rdb, "a"+prefix, "other", 1)
			require.NoError(t, rdb.Set(ctx, prefix+":1:{str}:q", "x", 0).Err())
			require.NoError(t, rdb.HSet(ctx, prefix+":1:{a}b}:q", "shards", 1).Err())
			for i := range 2500 { // several SCAN pages
				require.NoError(t, rdb.Set(ctx, fmt.Sprintf("%s:1:{filler}:%d", prefix, i), 1, 0).Err())
			}

			found, err := stream.Discover(ctx, rdb, prefix)
			require.NoError(t, err)
			assert.Equal(t, []stream.Found{
				{Queue: "broken", Shards: 0, Meta: prefix + ":1:{broken}:q"},
				{Queue: "orders", Shards: 1, Meta: l.Meta()},
				{Queue: "wide:eu", Shards: 8, Meta: meta},
			}, found)

			none, err := stream.Discover(ctx, rdb, prefix+"-none")
			require.NoError(t, err)
			assert.Empty(t, none)
			_, err = stream.Discover(ctx, rdb, "bad prefix")
			require.ErrorIs(t, err, stream.ErrInvalidName)
		})
	}
}

// TestDiscoverCluster finds the records on every master of a Cluster.
func TestDiscoverCluster(t *testing.T) {
	t.Parallel()
	cl, err := redistest.SpawnCluster(3, 0)
	require.NoError(t, err)
	t.Cleanup(cl.Stop)
	rdb := cl.Client()
	t.Cleanup(func() { _ = rdb.Close() })
	prefix := redistest.Prefix(t)
	var want []stream.Found
	for i := range 12 {
		name := fmt.Sprintf("q%02d", i)
		want = append(want, stream.Found{Queue: name, Shards: i%3 + 1, Meta: record(t, rdb, prefix, name, i%3+1)})
	}
	found, err := stream.Discover(context.Background(), rdb, prefix)
	require.NoError(t, err)
	assert.Equal(t, want, found)
}
