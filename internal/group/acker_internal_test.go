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
	a.buf = []ackReq{{stream: "a", id: "1", success: true}, {stream: "b", id: "2", success: true}, {stream: "b", id: "3", success: false}, {stream: "a", id: "4", success: true}, {stream: "c", id: "5", success: true}}
	asked := 0
	got := a.take(nil, func(s string) bool { asked++; return s == "a" || s == "c" })
	assert.Equal(t, []ackReq{{stream: "a", id: "1", success: true}, {stream: "a", id: "4", success: true}, {stream: "c", id: "5", success: true}}, got)
	assert.Equal(t, []ackReq{{stream: "b", id: "2", success: true}, {stream: "b", id: "3", success: false}}, a.buf, "the others stay queued, in order")
	assert.Equal(t, 4, asked, "asked once per run of one stream")

	got = a.take(got, nil)
	assert.Equal(t, []ackReq{{stream: "b", id: "2", success: true}, {stream: "b", id: "3", success: false}}, got, "nil takes everything")
	assert.Empty(t, a.buf)
}
