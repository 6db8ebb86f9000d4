package delaystream_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
)

// Both spellings of every reason parse to the stored one, and the label
// of either is the label.
func TestReasonVocabulary(t *testing.T) {
	t.Parallel()
	for _, r := range delaystream.Reasons() {
		label := delaystream.ReasonLabel(r)
		assert.NotEqual(t, delaystream.ReasonOther, label, r)
		assert.Equal(t, label, delaystream.ReasonLabel(label))
		for _, s := range []string{r, label} {
			got, err := delaystream.ParseReason(s)
			require.NoError(t, err, s)
			assert.Equal(t, r, got, s)
		}
	}
	assert.Equal(t, delaystream.ReasonOther, delaystream.ReasonLabel("something else"))
	_, err := delaystream.ParseReason("declined")
	require.ErrorIs(t, err, delaystream.ErrInvalidOption)
	assert.Contains(t, err.Error(), `"attempts" ("attempts exhausted")`)
}

func ExampleParseReason() {
	for _, s := range []string{"attempts", "attempts exhausted", "Handler"} {
		r, _ := delaystream.ParseReason(s)
		fmt.Printf("%s -> %q, label %s\n", s, r, delaystream.ReasonLabel(r))
	}
	// Output:
	// attempts -> "attempts exhausted", label attempts
	// attempts exhausted -> "attempts exhausted", label attempts
	// Handler -> "handler asked to dead-letter", label handler
}
