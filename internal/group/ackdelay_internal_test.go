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
	assert.Equal(t, 50*time.Millisecond, ackDelayFor(DefaultVisibility))
	assert.Equal(t, 25*time.Millisecond, ackDelayFor(100*time.Millisecond), "the shortest visibility timeout allowed")
	for _, vis := range []time.Duration{100 * time.Millisecond, 150 * time.Millisecond, 200 * time.Millisecond, time.Second, DefaultVisibility, time.Hour} {
		d := ackDelayFor(vis)
		assert.Positive(t, d, vis)
		assert.Less(t, vis/3+d, vis*3/5, "visibility %s: ack delay %s", vis, d)
	}
}
