package margin

import (
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
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
