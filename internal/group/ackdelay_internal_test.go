package group

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// An entry whose handler returned waits for its XACK at most the ack
// delay, after up to a third of the visibility timeout since its last
// extension: the sum must stay below the visibility timeout, or another
// consumer could reclaim an entry whose ack is only waiting.
func TestAckDelayStaysWithinVisibility(t *testing.T) {
	t.Parallel()
	assert.Equal(t, 50*time.Millisecond, ackDelayFor(DefaultVisibility, 0))
	assert.Equal(t, 25*time.Millisecond, ackDelayFor(100*time.Millisecond, 0), "the shortest visibility timeout allowed")
	assert.Equal(t, 50*time.Millisecond, ackDelayFor(DefaultVisibility, 10*time.Millisecond))
	assert.Equal(t, 200*time.Millisecond, ackDelayFor(DefaultVisibility, 100*time.Millisecond), "two buckets at 100 ms")
	assert.Equal(t, 500*time.Millisecond, ackDelayFor(DefaultVisibility, time.Second), "a quarter of the visibility timeout")
	for _, vis := range []time.Duration{100 * time.Millisecond, 150 * time.Millisecond, 200 * time.Millisecond, time.Second, DefaultVisibility, time.Hour} {
		for _, prec := range []time.Duration{0, 10 * time.Millisecond, 100 * time.Millisecond, time.Second} {
			d := ackDelayFor(vis, prec)
			assert.Positive(t, d, vis)
			assert.Less(t, vis/3+d, vis*3/5, "visibility %s, precision %s: ack delay %s", vis, prec, d)
		}
	}
}
