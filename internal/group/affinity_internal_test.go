package group

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Each shard has exactly one owner whichever member computes the split,
// and the shares are even (n/len or one more), also after a member leaves.
func TestOwnedBySplitsShardsOnce(t *testing.T) {
	t.Parallel()
	const n = 16
	for _, names := range [][]string{{"host-1-aa", "host-2-bb", "host-3-cc"}, {"host-1-aa", "host-2-bb"}} {
		owners := make([]int, n)
		for _, self := range names {
			owned := ownedBy(self, names, n)
			share := 0
			for i, o := range owned {
				if o {
					owners[i]++
					share++
				}
			}
			assert.GreaterOrEqual(t, share, n/len(names), "%s's share of %d", self, len(names))
			assert.LessOrEqual(t, share, n/len(names)+1, "%s's share of %d", self, len(names))
			// The list need not hold self, and order does not matter.
			reversed := slices.Clone(names)
			slices.Reverse(reversed)
			assert.Equal(t, owned, ownedBy(self, reversed, n))
			assert.Equal(t, owned, ownedBy(self, without(names, self), n))
		}
		for i, k := range owners {
			require.Equal(t, 1, k, "owners of shard %d among %d", i, len(names))
		}
	}
	alone := ownedBy("solo", nil, 16)
	for i, o := range alone {
		assert.True(t, o, "a consumer alone owns shard %d", i)
	}
}

func without(names []string, drop string) []string {
	var out []string
	for _, n := range names {
		if n != drop {
			out = append(out, n)
		}
	}
	return out
}

// A shard gained (owned now, not before) is reported; the first split
// reports none, since the consumer owned every shard until then.
func TestAffinitySetReportsGains(t *testing.T) {
	t.Parallel()
	var f affinity
	for i := range 4 {
		assert.True(t, f.owns(i), "before the first split")
	}
	assert.Empty(t, f.set([]bool{true, false, false, true}))
	assert.False(t, f.owns(1))
	assert.Equal(t, []int{1, 2}, f.set([]bool{true, true, true, false}))
	assert.False(t, f.owns(3))
}

// Streams marked later are taken strayDelay after the first of them, all
// in one round; a stream already dirty is not deferred.
func TestStrayMarksWaitAndComeTogether(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		a := newArrivals(6)
		a.mark(0)
		a.markLater(0) // dirty already: read at once
		a.markLater(3)
		time.Sleep(strayDelay / 2)
		a.markLater(5) // joins the round under way
		assert.Equal(t, []int{0}, a.take(0, 10, nil))
		<-a.kick // mark(0)'s
		time.Sleep(strayDelay/2 - time.Millisecond)
		synctest.Wait()
		assert.Empty(t, a.take(0, 10, nil), "before strayDelay")
		time.Sleep(time.Millisecond)
		synctest.Wait()
		select {
		case <-a.kick:
		default:
			t.Fatal("no kick when the strays were marked")
		}
		assert.Equal(t, []int{3, 5}, a.take(0, 10, nil))
		a.markLater(3) // a new round
		time.Sleep(strayDelay)
		synctest.Wait()
		assert.Equal(t, []int{3}, a.take(0, 10, nil), "second round")
	})
}
