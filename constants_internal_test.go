package delaystream

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/delaystream/delaystream/internal/delay"
	"github.com/delaystream/delaystream/internal/stream"
)

// The exported limits and defaults are the internal parts' own.
func TestConstantsMatchTheParts(t *testing.T) {
	assert.Equal(t, stream.DefaultPrefix, DefaultPrefix)
	assert.Equal(t, delay.DefaultMaxPayload, DefaultMaxPayload)
	assert.Equal(t, stream.MaxShards, MaxShards)
	assert.Equal(t, delay.MaxHeaders, MaxHeaders)
	assert.Equal(t, delay.ReservedHeaderPrefix, ReservedHeaderPrefix)
}
