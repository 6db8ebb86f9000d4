package dsprom

import (
	"os"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
)

// The reason table of the package doc is the table the code uses: every
// delaystream.Reason* constant has one row, with its stored string and
// its label value.
func TestReasonTableMatchesDoc(t *testing.T) {
	t.Parallel()
	constants := map[string]string{
		"ReasonAttempts":    delaystream.ReasonAttempts,
		"ReasonDeliveries":  delaystream.ReasonDeliveries,
		"ReasonHandler":     delaystream.ReasonHandler,
		"ReasonUndecodable": delaystream.ReasonUndecodable,
		"ReasonDeleted":     delaystream.ReasonDeleted,
		"ReasonExpired":     delaystream.ReasonExpired,
	}
	doc, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	row := regexp.MustCompile(`(?m)^//\t(\w+) +delaystream\.(Reason\w+) +("[^"]*")$`)
	rows := row.FindAllStringSubmatch(string(doc), -1)
	require.Len(t, rows, len(constants), "one doc row per reason")
	fromDoc := map[string]string{}
	for _, r := range rows {
		label, name := r[1], r[2]
		stored, err := strconv.Unquote(r[3])
		require.NoError(t, err)
		require.Contains(t, constants, name)
		assert.Equal(t, constants[name], stored, "%s: stored reason in the doc", name)
		fromDoc[stored] = label
	}
	assert.Equal(t, reasonLabels, fromDoc, "doc table and reasonLabels")
	for name, stored := range constants {
		assert.Contains(t, reasonLabels, stored, name)
	}
	assert.Equal(t, reasonOther, reasonLabel("a reason of a later release"))
}
