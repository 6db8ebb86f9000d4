package integration

import (
	"context"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/integration/internal/harness"
	"github.com/delaystream/delaystream/internal/stream"
)

// TestShardedLoadSpread measures how a queue of 16 shards spreads its load
// over the masters of a Cluster of its own (3 masters, 3 replicas): the
// commands each master served (INFO commandstats, before and after) while
// 20k messages were scheduled, promoted and consumed by one group. Each
// master's share of the script calls (EVALSHA) must be within ±15 % of an
// even share. With 16 shards over 3 masters the best split is 5/6/5, so
// the master with 6 shards is expected at about 6/16 = +12.5 % of even.
func TestShardedLoadSpread(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	_, rdb := harness.ClusterWithReplicas(t)
	heavy.Lock()
	defer heavy.Unlock()
	prefix := harness.Prefix(t, rdb)
	const (
		queue  = "load"
		shards = 16
		n      = 20000
	)
	q, err := delaystream.New(rdb, queue, delaystream.WithPrefix(prefix), delaystream.WithShards(shards),
		delaystream.WithLogger(testLogger(t)), delaystream.WithDrainTimeout(time.Second))
	require.NoError(t, err)
	layout, err := stream.NewLayout(prefix, queue, shards)
	require.NoError(t, err)
	byMaster := checkPlacement(ctx, t, rdb, layout, []string{"g"})
	var handled atomic.Int64
	all := make(chan struct{})
	g, err := q.Handle("g", func(context.Context, *delaystream.Delivery) error {
		if handled.Add(1) == n {
			close(all)
		}
		return nil
	}, delaystream.WithWorkers(8))
	require.NoError(t, err)

	before := masterCommandStats(ctx, t, rdb)
	start := time.Now()
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	done := make(chan error, 1)
	go func() { done <- q.Run(runCtx) }()
	const chunk = 1000
	for i := 0; i < n; i += chunk {
		items := make([]delaystream.Item, chunk)
		for j := range items {
			items[j] = delaystream.Item{Message: delaystream.Message{Payload: []byte("load")}, When: delaystream.After(rand.N(time.Second))}
		}
		_, err := q.ScheduleBatch(ctx, items)
		require.NoError(t, err)
	}
	scheduled := time.Since(start)
	select {
	case <-all:
	case <-time.After(60 * time.Second):
		t.Fatalf("%d of %d messages handled within 60s", handled.Load(), n)
	}
	took := time.Since(start)
	after := masterCommandStats(ctx, t, rdb)
	stop()
	select {
	case err := <-done:
		require.NoError(t, err, "Run")
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return within 15s of cancel")
	}

	masters := slices.Sorted(maps.Keys(after))
	require.Len(t, masters, 3)
	delta := map[string]map[string]int64{}
	var evalsha, total int64
	for _, m := range masters {
		delta[m] = map[string]int64{}
		for cmd, calls := range after[m] {
			if d := calls - before[m][cmd]; d > 0 && cmd != "info" {
				delta[m][cmd] = d
				total += d
			}
		}
		evalsha += delta[m]["evalsha"] + delta[m]["eval"]
	}
	require.Positive(t, evalsha)
	even := 1 / float64(len(masters))
	var lines []string
	for _, m := range masters {
		var sum int64
		for _, d := range delta[m] {
			sum += d
		}
		scripts := delta[m]["evalsha"] + delta[m]["eval"]
		share := float64(scripts) / float64(evalsha)
		dev := share/even - 1
		lines = append(lines, fmt.Sprintf("%s: %d shards (%.1f %%), evalsha %d = %.1f %% (%+.1f %% of even), all commands %d = %.1f %% (%+.1f %% of even); top: %s",
			m, len(byMaster[m]), 100*float64(len(byMaster[m]))/shards, scripts, 100*share, 100*dev,
			sum, 100*float64(sum)/float64(total), 100*(float64(sum)/float64(total)/even-1), topCommands(delta[m], 6)))
		assert.LessOrEqual(t, math.Abs(dev), 0.15, "master %s's share of script calls is %.1f %% (%+.1f %% of even)", m, 100*share, 100*dev)
	}
	t.Logf("%d messages scheduled in %s, all handled %s after the start (one group, 8 workers); %.2f commands and %.2f script calls per message, on the masters:\n%s",
		n, scheduled.Round(time.Millisecond), took.Round(time.Millisecond), float64(total)/n, float64(evalsha)/n, strings.Join(lines, "\n"))
	t.Logf("group counters %+v", g.Counters())
}

// masterCommandStats returns INFO commandstats (command -> calls) of every
// master, by address.
func masterCommandStats(ctx context.Context, t *testing.T, rdb *redis.ClusterClient) map[string]map[string]int64 {
	t.Helper()
	var mu sync.Mutex
	infos := map[string]string{}
	require.NoError(t, rdb.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		info, err := c.Info(ctx, "commandstats").Result()
		mu.Lock()
		infos[c.Options().Addr] = info
		mu.Unlock()
		return err
	}))
	out := map[string]map[string]int64{}
	for addr, info := range infos {
		out[addr] = commandStats(t, info)
	}
	return out
}

// topCommands formats the k commands with the most calls.
func topCommands(calls map[string]int64, k int) string {
	names := slices.SortedFunc(maps.Keys(calls), func(a, b string) int {
		if calls[a] != calls[b] {
			return int(calls[b] - calls[a])
		}
		return strings.Compare(a, b)
	})
	var parts []string
	for _, name := range names[:min(k, len(names))] {
		parts = append(parts, fmt.Sprintf("%s=%d", name, calls[name]))
	}
	return strings.Join(parts, " ")
}
