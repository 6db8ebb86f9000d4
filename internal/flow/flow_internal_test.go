package flow

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestParseLimits(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want Limits
	}{
		{"none", "", Limits{}},
		{"cap and rate", "3 200 1000000 20", Limits{Concurrency: 3, Rate: 200, Per: time.Second, Burst: 20}},
		{"cap only", "5 0 0 0", Limits{Concurrency: 5}},
		{"rate without interval: no rate", "0 10 0 1", Limits{}},
		{"rate without burst: no rate", "2 10 1000 0", Limits{Concurrency: 2}},
		{"too few fields", "3 200 1000000", Limits{}},
		{"not numbers", "a b c d", Limits{}},
		{"negative", "-1 0 0 0", Limits{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, parseLimits(tt.in))
		})
	}
	l := Limits{Rate: 200, Per: time.Second, Burst: 20}
	assert.Equal(t, 5*time.Millisecond, l.Interval())
	assert.InDelta(t, 200, l.PerSecond(), 1e-9)
	assert.False(t, l.Zero())
	assert.True(t, Limits{}.Zero())
	assert.Zero(t, Limits{}.Interval())
}

func TestEarliest(t *testing.T) {
	t.Parallel()
	t1, t2 := time.UnixMilli(2000), time.UnixMilli(1000)
	assert.Equal(t, t1, earliest(time.Time{}, 2000))
	assert.Equal(t, t2, earliest(t1, 1000))
	assert.Equal(t, t2, earliest(t2, 2000))
	assert.Equal(t, time.UnixMilli(0), earliest(time.Time{}, -5), "a pause of unknown start shows as the epoch")
}
