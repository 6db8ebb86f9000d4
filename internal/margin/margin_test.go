package margin

import (
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		op              string
		observed, bound float64
		want            float64
	}{
		{"<=", 9, 10, 0.1},
		{"<", 10, 10, 0},
		{"<=", 12, 10, -0.2},
		{">=", 15, 10, 0.5},
		{">", 8, 10, -0.2},
		{">=", 3, 0, 3}, // a zero bound: the distance itself
		{"<=", -5, -10, -0.5},
	}
	for _, tt := range tests {
		assert.InDelta(t, tt.want, Of(tt.op, tt.observed, tt.bound), 1e-9, "%v %s %v", tt.observed, tt.op, tt.bound)
	}
}

// With the variable set, every check appends its line, passing or not; a
// failing check still fails.
func TestRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "margins")
	t.Setenv(Env, path)
	assert.True(t, LessOrEqual(t, "count", 7, 10))
	assert.True(t, Greater(t, "took", 1500*time.Millisecond, time.Second))
	took := Eventually(t, "settled", func() bool { return true }, time.Second, time.Millisecond)
	assert.Less(t, took, time.Second)
	inner := &failing{TB: t}
	assert.False(t, Less(inner, "over", 11, 10), "a failing check reports false")
	assert.True(t, inner.failed, "and fails its test")

	b, err := os.ReadFile(path)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	require.Len(t, lines, 4)
	assert.Equal(t, "0.3000\tTestRecord/count\t7 <= 10", lines[0])
	assert.Equal(t, "0.5000\tTestRecord/took\t1.5s > 1s", lines[1])
	// A check that passed at once is far from its bound: 0.9 and up
	// (printed as 1.0000 when it took microseconds).
	m, err := strconv.ParseFloat(strings.SplitN(lines[2], "\t", 2)[0], 64)
	require.NoError(t, err, lines[2])
	assert.GreaterOrEqual(t, m, 0.9, lines[2])
	assert.Contains(t, lines[2], "\tTestRecord/settled\t")
	assert.True(t, strings.HasPrefix(lines[3], "-0.1000\t"), lines[3])
	assert.False(t, math.IsNaN(Of("<=", 1, 0)))
}

// failing is a test that records its failure instead of failing t.
type failing struct {
	testing.TB
	failed bool
}

func (f *failing) Errorf(string, ...any) { f.failed = true }
func (f *failing) Helper()               {}

// Progress passes slow work that keeps going, however long it takes
// within the limit, and fails work that stops or never ends.
func TestProgress(t *testing.T) {
	t.Setenv(Env, "") // its failures are on purpose: not margins of the suite
	// work counts one step per 300 ms from the bubble's start, up to end.
	work := func(end int) func() int {
		begin := time.Now()
		return func() int { return min(end, int(time.Since(begin)/(300*time.Millisecond))) }
	}
	synctest.Test(t, func(t *testing.T) {
		p := work(20) // 6 s, with no gap of a second
		tb := &failing{TB: t}
		ok := Progress(tb, "slow", func() bool { return p() == 20 }, p, time.Second, time.Minute, 10*time.Millisecond)
		assert.True(t, ok, "slow work that keeps going passes")
		assert.False(t, tb.failed)
	})
	synctest.Test(t, func(t *testing.T) {
		p := work(5) // stops at 5, after 1.5 s
		tb := &failing{TB: t}
		begin := time.Now()
		ok := Progress(tb, "stopped", func() bool { return false }, p, time.Second, time.Minute, 10*time.Millisecond)
		assert.False(t, ok, "work that stops fails")
		assert.True(t, tb.failed)
		assert.Equal(t, 2500*time.Millisecond, time.Since(begin).Round(100*time.Millisecond), "a stall after the last step")
	})
	synctest.Test(t, func(t *testing.T) {
		p := work(1 << 30) // goes on for ever
		tb := &failing{TB: t}
		begin := time.Now()
		ok := Progress(tb, "endless", func() bool { return false }, p, time.Second, 10*time.Second, 10*time.Millisecond)
		assert.False(t, ok, "work that never ends fails at the limit")
		assert.True(t, tb.failed)
		assert.Equal(t, 10*time.Second, time.Since(begin).Round(100*time.Millisecond))
	})
}
