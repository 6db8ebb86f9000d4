package group

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestReadAheadFor(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		workers int64
		each    time.Duration
		want    int64
	}{
		{"fast: capped", 8, 2 * time.Microsecond, 256},
		{"nothing measured yet: capped", 8, 0, 256},
		{"100 ms of work for 8 workers", 8, 10 * time.Millisecond, 80},
		{"slower than a horizon's worth: floor", 8, 50 * time.Millisecond, 32},
		{"slow: none", 8, 100 * time.Millisecond, 0},
		{"slower than the horizon: none", 8, time.Second, 0},
		{"one worker", 1, time.Millisecond, 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, readAheadFor(tt.workers, tt.each, 4*tt.workers, 256))
		})
	}
}
