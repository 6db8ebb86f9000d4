package logpace

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestInterval(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		n    int
		want time.Duration
	}{{1, time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second}, {9, 256 * time.Second}, {10, Max}, {1000, Max}} {
		assert.Equal(t, tc.want, Interval(tc.n), "line %d", tc.n)
	}
}

// A run of failures retried every 100 ms for ten minutes logs its first
// failure, then lines 1, 2, 4 ... s apart, then one every Max.
func TestPaceRising(t *testing.T) {
	t.Parallel()
	start := time.Unix(1000, 0)
	var p Pace
	var at []time.Duration
	for d := time.Duration(0); d <= 10*time.Minute; d += 100 * time.Millisecond {
		if p.Due(start.Add(d)) {
			at = append(at, d)
		}
	}
	want := []time.Duration{0}
	next := time.Duration(0)
	for n := 1; ; n++ {
		next += Interval(n)
		if next > 10*time.Minute {
			break
		}
		want = append(want, next)
	}
	assert.Equal(t, want, at)
	assert.Len(t, at, 10, "0, 1, 3, 7 ... 511 s; the next, at 811 s, is past ten minutes")

	p.Reset()
	assert.True(t, p.Due(start.Add(11*time.Minute)), "a new run logs its first failure at once")
	assert.False(t, p.Due(start.Add(11*time.Minute+500*time.Millisecond)))
}
