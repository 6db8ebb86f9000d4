package group

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/internal/redistest"
	"github.com/delaystream/delaystream/internal/stream"
)

// Dead-letter ids of a sharded queue carry their shard ("<ms>-<seq>@<shard>"):
// they compare by ms, then seq, never by text. Comparing "5-1@0" as
// "5-0" merged pages out of order, and the next page's cursor then skipped
// entries of other shards (TestShardedFanOutRetryAndDeadLetters listed 8 of
// 10 dead letters once).
func TestCompareIDs(t *testing.T) {
	t.Parallel()
	assert.Equal(t, -1, compareIDs("5-0@1", "5-1@0"))
	assert.Equal(t, 1, compareIDs("5-1@0", "5-0@1"))
	assert.Equal(t, 0, compareIDs("5-1@0", "5-1@3"), "the shard breaks ties elsewhere")
	assert.Equal(t, -1, compareIDs("5-9", "6-0"))
	assert.Equal(t, -1, compareIDs("5-2", "5-10"), "numeric, not text")
	assert.Equal(t, -1, compareIDs("5", "5-1"))

	ids := []string{"7-0@2", "5-1@0", "5-0@1", "6-3@0", "5-10@2"}
	slices.SortFunc(ids, compareIDs)
	assert.Equal(t, []string{"5-0@1", "5-1@0", "5-10@2", "6-3@0", "7-0@2"}, ids)
}

// Listings page through a sharded queue's dead letters in (entry id,
// shard) order, or its reverse newest first, even when every shard holds
// entries with the same ids: each page resumes right after the last entry
// listed, whole or cut.
func TestListPagesAcrossShards(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	layout, err := stream.NewLayout(redistest.Prefix(t), "q", 3)
	require.NoError(t, err)
	d := newDeadLetters(rdb, layout, "g")
	var want []string
	for _, id := range []string{"5-0", "5-1", "6-0"} {
		for i := range 3 {
			require.NoError(t, rdb.XAdd(ctx, &redis.XAddArgs{Stream: d.shards[i].key, ID: id, Values: []string{"x", "1"}}).Err())
			want = append(want, fmt.Sprintf("%s@%d", id, i))
		}
	}
	reversed := slices.Clone(want)
	slices.Reverse(reversed)
	page := func(list func(after string) ([]string, error)) []string {
		var got []string
		after := ""
		for range 20 {
			ids, err := list(after)
			require.NoError(t, err)
			if len(ids) == 0 {
				return got
			}
			got = append(got, ids...)
			after = ids[len(ids)-1]
		}
		t.Fatal("the pages never end")
		return nil
	}
	entryIDs := func(es []DeadEntry, err error) ([]string, error) {
		var out []string
		for _, e := range es {
			out = append(out, e.EntryID)
		}
		return out, err
	}
	cutIDs := func(es []CutDeadEntry, err error) ([]string, error) {
		var out []string
		for _, e := range es {
			out = append(out, e.EntryID)
		}
		return out, err
	}
	for _, count := range []int64{1, 2, 4} {
		assert.Equal(t, want, page(func(after string) ([]string, error) { return entryIDs(d.List(ctx, after, count)) }), "oldest first, %d a page", count)
		assert.Equal(t, reversed, page(func(after string) ([]string, error) { return entryIDs(d.ListNewest(ctx, after, count)) }), "newest first, %d a page", count)
		assert.Equal(t, want, page(func(after string) ([]string, error) { return cutIDs(d.ListCut(ctx, after, count, 8, false)) }), "cut, oldest first, %d a page", count)
		assert.Equal(t, reversed, page(func(after string) ([]string, error) { return cutIDs(d.ListCut(ctx, after, count, 8, true)) }), "cut, newest first, %d a page", count)
	}
}
