package wire_test

import (
	"crypto/rand"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/internal/wire"
)

// A producer routes a message with a generated id by its random part,
// before Redis has fixed the id's time part (its due time): the shard must
// be the one every other part computes from the complete id.
func TestShardOfRandomMatchesShardOfGeneratedID(t *testing.T) {
	t.Parallel()
	dues := []int64{
		0, 1, 31, 32, 1_700_000_000_000, 1_900_000_000_123,
		253402300799999, // the latest due time a producer accepts (year 9999)
		1<<48 - 1,       // the largest time part of a generated id
	}
	counts := []int{1, 2, 3, 7, 8, 16, 100, 1024}
	for range 2000 {
		var rnd [10]byte
		_, _ = rand.Read(rnd[:])
		random := string(wire.AppendRandomPart(nil, rnd))
		require.Len(t, random, 16)
		for _, due := range dues {
			id := wire.GeneratedID(due, random)
			require.True(t, wire.GeneratedLayout(id), "id %s (due %d) must have the generated layout", id, due)
			for _, n := range counts {
				got := wire.ShardOfRandom(random, n)
				require.Equal(t, wire.ShardOf(id, n), got, "id %s, %d shards", id, n)
				require.True(t, got >= 0 && got < n)
			}
		}
	}
	// Extreme random parts.
	for _, random := range []string{"0000000000000000", "ZZZZZZZZZZZZZZZZ", "7ZZZZZZZZZZZZZZZ"} {
		for _, n := range counts {
			assert.Equal(t, wire.ShardOf(wire.GeneratedID(1_700_000_000_000, random), n), wire.ShardOfRandom(random, n), random)
		}
	}
}

// Not parallel: AllocsPerRun counts the allocations of the whole process.
func TestShardOfRandomDoesNotAllocate(t *testing.T) {
	random := "RC8JEFXHRF88SGQA"
	allocs := testing.AllocsPerRun(100, func() { _ = wire.ShardOfRandom(random, 16) })
	assert.Zero(t, allocs)
}
