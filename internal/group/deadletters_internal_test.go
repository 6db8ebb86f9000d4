package group

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
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
