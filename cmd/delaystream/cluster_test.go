package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/admin"
	"github.com/delaystream/delaystream/internal/redistest"
)

// TestClusterQueues finds every queue of a 3-master Cluster, wherever its
// record lives, without being told their names, and reads a sharded
// queue's figures shard by shard.
func TestClusterQueues(t *testing.T) {
	t.Parallel()
	cl, err := redistest.SpawnCluster(3, 0)
	require.NoError(t, err)
	t.Cleanup(cl.Stop)
	rdb := cl.Client()
	t.Cleanup(func() { _ = rdb.Close() })
	tg := newTarget(t, strings.Join(cl.Addrs, ","))
	ctx := context.Background()

	var want []string
	for i := range 8 {
		name := fmt.Sprintf("q%d", i)
		q, err := delaystream.New(rdb, name, delaystream.WithPrefix(tg.prefix))
		require.NoError(t, err)
		_, err = q.Schedule(ctx, delaystream.Message{ID: "m"}, delaystream.After(time.Hour))
		require.NoError(t, err)
		want = append(want, name)
	}
	sharded, err := delaystream.New(rdb, "wide", delaystream.WithPrefix(tg.prefix), delaystream.WithShards(6))
	require.NoError(t, err)
	for i := range 30 {
		_, err := sharded.Schedule(ctx, delaystream.Message{ID: fmt.Sprintf("m%d", i)}, delaystream.After(time.Hour))
		require.NoError(t, err)
	}
	want = append(want, "wide")

	// The records really are spread: more than one master holds some.
	var mu sync.Mutex
	holders := 0
	require.NoError(t, rdb.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
		keys, _, err := n.Scan(ctx, 0, tg.prefix+":*:q", 10000).Result()
		mu.Lock()
		defer mu.Unlock()
		if len(keys) > 0 {
			holders++
		}
		return err
	}))
	require.Greater(t, holders, 1)

	check := func(t *testing.T, tg target, args ...string) {
		var rows []admin.QueueInfo
		tg.json(t, &rows, append([]string{"queues", "--no-stats"}, args...)...)
		var got []string
		for _, r := range rows {
			got = append(got, r.Name)
			want := 1
			if r.Name == "wide" {
				want = 6
			}
			assert.Equal(t, want, r.Shards, r.Name)
		}
		assert.Equal(t, want, got)
	}
	t.Run("seeds", func(t *testing.T) { check(t, tg) })
	t.Run("one seed", func(t *testing.T) {
		one := newTarget(t, cl.Addrs[1])
		one.prefix = tg.prefix
		check(t, one, "--cluster")
	})

	var st admin.QueueReport
	tg.json(t, &st, "stats", "wide", "--per-shard")
	assert.Equal(t, int64(30), st.Waiting)
	require.Len(t, st.PerShard, 6)
	var sum int64
	for _, s := range st.PerShard {
		sum += s.Waiting
	}
	assert.Equal(t, int64(30), sum)
	var ms []waitingRow
	tg.json(t, &ms, "peek", "wide", "-n", "50")
	assert.Len(t, ms, 30)
}
