package history

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/internal/redistest"
	"github.com/delaystream/delaystream/internal/stream"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// A script's keys are built once a minute: the same slice within a
// minute, the next minute's buckets after it.
func TestKeysAt(t *testing.T) {
	t.Parallel()
	shard, err := stream.NewKeys("ds", "orders", 0, 1)
	require.NoError(t, err)
	k := NewKeys(shard, "ds:1:{orders}:s")
	at := time.Unix(1_800_000_000, 0) // minute 30000000, hour 500000
	got := k.At(at)
	assert.Equal(t, []string{"ds:1:{orders}:s", "ds:1:{orders}:h", "ds:1:{orders}:h:m:30000000", "ds:1:{orders}:h:h:500000"}, got)
	again := k.At(at.Add(59 * time.Second))
	assert.Same(t, &got[0], &again[0], "built once a minute")
	next := k.At(at.Add(time.Minute))
	assert.Equal(t, "ds:1:{orders}:h:m:30000001", next[2])
	assert.Equal(t, "ds:1:{orders}:h:h:500000", next[3])
	assert.Equal(t, []string{"x", "ds:1:{orders}:h", "ds:1:{orders}:h:m:30000000", "ds:1:{orders}:h:h:500000"},
		Append([]string{"x"}, shard, at))
}

// Read sums every shard's fields; fields it does not know, groups no
// group can be named and keys of another type read as nothing.
func TestRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	layout, err := stream.NewLayout(prefix, "orders", 2)
	require.NoError(t, err)
	now := time.Now()
	m := now.Unix() / 60
	for i := range 2 {
		k := layout.Shard(i)
		for _, key := range []string{k.HistoryTotals(), k.HistoryBucket("m", m), k.HistoryBucket("h", m/60)} {
			require.NoError(t, rdb.HSet(ctx, key, Promoted, 5, Quarantined, 1, "handled:billing", 4, "dropped:billing", 1,
				"retried:billing", 2, "dead:audit", 3, "handled:bad name", 7, "handled:", 7, "future:billing", 7, "promoted2", 7).Err())
		}
		require.NoError(t, rdb.HSet(ctx, k.HistoryBucket("m", m-3), "handled:billing", 10).Err())
	}
	// Someone else's key of another type, where a bucket would be.
	require.NoError(t, rdb.Set(ctx, layout.Shard(0).HistoryBucket("m", m-1), "x", 0).Err())

	h, err := Read(ctx, rdb, layout, 5, 2, now)
	require.NoError(t, err)
	want := Counts{Promoted: 10, Quarantined: 2, Groups: map[string]GroupCounts{
		"billing": {Handled: 8, Dropped: 2, Retried: 4}, "audit": {Dead: 6}}}
	assert.Equal(t, want, h.Totals)
	require.Len(t, h.Minutes, 5)
	require.Len(t, h.Hours, 2)
	assert.Equal(t, want, h.Minutes[4].Counts, "the minute in progress")
	assert.Equal(t, int64(20), h.Minutes[1].Counts.Groups["billing"].Handled, "three minutes before")
	assert.Equal(t, Counts{}, h.Minutes[3].Counts, "a key of another type reads as nothing")
	assert.Equal(t, Counts{}, h.Minutes[0].Counts)
	assert.Equal(t, time.Unix((m-4)*60, 0), h.Minutes[0].Start)
	assert.Equal(t, want, h.Hours[1].Counts)
	assert.Equal(t, time.Unix((m/60-1)*3600, 0), h.Hours[0].Start)

	none, err := Read(ctx, rdb, layout, 0, 0, now)
	require.NoError(t, err)
	assert.Equal(t, want, none.Totals)
	assert.Empty(t, none.Minutes)
}
