package group

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A read takes the acknowledgements of the streams it goes to (those on the
// nodes it reads) and leaves the others queued, in order.
func TestAckerTakesAlongOnlyWhatItIsAskedFor(t *testing.T) {
	t.Parallel()
	a := &acker{}
	a.buf = []ackReq{{"a", "1", true}, {"b", "2", true}, {"b", "3", false}, {"a", "4", true}, {"c", "5", true}}
	asked := 0
	got := a.take(nil, func(s string) bool { asked++; return s == "a" || s == "c" })
	assert.Equal(t, []ackReq{{"a", "1", true}, {"a", "4", true}, {"c", "5", true}}, got)
	assert.Equal(t, []ackReq{{"b", "2", true}, {"b", "3", false}}, a.buf, "the others stay queued, in order")
	assert.Equal(t, 4, asked, "asked once per run of one stream")

	got = a.take(got, nil)
	assert.Equal(t, []ackReq{{"b", "2", true}, {"b", "3", false}}, got, "nil takes everything")
	assert.Empty(t, a.buf)
}
