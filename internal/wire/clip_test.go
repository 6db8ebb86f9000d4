package wire

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A foreign value quoted in a decode error is clipped: a 16 MiB field must
// not become a 16 MiB log line or dead-letter error.
func TestDecodeClipsForeignValues(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "short", Clip("short"))
	huge := strings.Repeat("9x", 8<<20)
	_, err := Decode("k", "1-0", map[string]any{FieldDue: huge, FieldID: "a", FieldEnvelope: "e"})
	require.ErrorIs(t, err, ErrMalformed)
	assert.Less(t, len(err.Error()), 256)
	assert.Contains(t, err.Error(), "more bytes)")
	_, err = Decode("k", "1-0", map[string]any{FieldDue: "1", FieldID: RetrySep + huge, FieldEnvelope: "e"})
	require.ErrorIs(t, err, ErrMalformed)
	assert.Less(t, len(err.Error()), 256)
}
