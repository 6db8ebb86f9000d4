package admin

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/internal/delay"
)

// The constants are the core's.
func TestConstants(t *testing.T) {
	t.Parallel()
	assert.Equal(t, delay.MaxPeek, MaxPeek)
}

// The package doc names every dead-letter reason a filter takes.
func TestReasonsDocumented(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	var doc strings.Builder
	for _, l := range strings.Split(string(src), "\n") {
		doc.WriteString(strings.TrimPrefix(strings.TrimPrefix(l, "//"), " ") + " ")
	}
	for _, r := range delaystream.Reasons() {
		assert.Contains(t, doc.String(), strconv.Quote(r))
	}
	assert.NoError(t, filter{}.check())
	for _, r := range delaystream.Reasons() {
		assert.NoError(t, filter{reason: r}.check(), r)
		assert.NoError(t, filter{reason: delaystream.ReasonLabel(r)}.check(), "the label of %s", r)
	}
	assert.Error(t, filter{reason: "declined"}.check())
}
