package wire_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/codec"
	"github.com/delaystream/delaystream/internal/wire"
)

// The payload is an envelope's last field, so an envelope cut anywhere
// after its headers decodes to every field and the payload's first bytes:
// what the listings' scripts (internal/scripts/envcut.lua) rely on to read
// a bounded prefix of each message.
func TestEnvelopePrefixDecodes(t *testing.T) {
	t.Parallel()
	for _, e := range []codec.Envelope{
		{Attempt: 1, Payload: []byte(strings.Repeat("x", 1000))},
		{Attempt: 7, Created: time.UnixMilli(1_700_000_000_123), Deadline: time.UnixMilli(1_800_000_000_000),
			Headers: map[string]string{"a": "1", "trace": strings.Repeat("t", 300)}, Payload: []byte("héllo wörld")},
		{Attempt: 1, Headers: map[string]string{"k": "v"}},
	} {
		enc := wire.MarshalEnvelope(&e)
		var full codec.Envelope
		require.NoError(t, wire.UnmarshalEnvelope(enc, &full))
		head := len(enc) - len(full.Payload)
		for cut := head; cut <= len(enc); cut++ {
			var got codec.Envelope
			require.NoError(t, wire.UnmarshalEnvelope(enc[:cut], &got), "cut at %d of %d", cut, len(enc))
			// Compared as strings: the format does not tell an empty
			// payload from none, and both decode as nil (as whole
			// envelopes' do, see TestEnvelopeRoundTrip).
			assert.Equal(t, string(full.Payload[:cut-head]), string(got.Payload), "cut at %d", cut)
			assert.Equal(t, full.Headers, got.Headers)
			assert.Equal(t, full.Attempt, got.Attempt)
			assert.True(t, full.Created.Equal(got.Created))
			assert.True(t, full.Deadline.Equal(got.Deadline))
		}
		for cut := range head { // into the headers: refused, not misread
			var got codec.Envelope
			assert.Error(t, wire.UnmarshalEnvelope(enc[:cut], &got), "cut at %d, in the %d bytes of headers", cut, head)
		}
	}
}

// FuzzEnvelopePrefix cuts arbitrary bytes anywhere: decoding never
// panics, and when the whole decodes, every cut at or after its headers
// decodes to the same fields and a prefix of the same payload.
func FuzzEnvelopePrefix(f *testing.F) {
	for _, e := range []codec.Envelope{
		{Attempt: 1, Payload: []byte("hello")},
		{Attempt: 2, Created: time.UnixMilli(1_700_000_000_000), Headers: map[string]string{"a": "1", "trace": "xyz"}, Payload: []byte("p")},
		{Attempt: 3, Deadline: time.UnixMilli(1_800_000_000_000), Payload: bytes.Repeat([]byte{0xD5}, 40)},
	} {
		f.Add(wire.MarshalEnvelope(&e), uint16(3))
	}
	f.Add([]byte{wire.Magic, wire.Version, 0x80}, uint16(1))
	f.Fuzz(func(t *testing.T, b []byte, at uint16) {
		cut := int(at) % (len(b) + 1)
		var part codec.Envelope
		partErr := wire.UnmarshalEnvelope(b[:cut], &part) // must not panic
		var full codec.Envelope
		if wire.UnmarshalEnvelope(b, &full) != nil {
			return
		}
		head := len(b) - len(full.Payload)
		if cut < head {
			return
		}
		if partErr != nil {
			t.Fatalf("cut at %d (headers end at %d) fails: %v", cut, head, partErr)
		}
		if !bytes.Equal(part.Payload, full.Payload[:cut-head]) || part.Attempt != full.Attempt ||
			!part.Created.Equal(full.Created) || !part.Deadline.Equal(full.Deadline) || len(part.Headers) != len(full.Headers) {
			t.Fatalf("cut at %d decodes to %+v, whole to %+v", cut, part, full)
		}
		for k, v := range full.Headers {
			if part.Headers[k] != v {
				t.Fatalf("cut at %d: header %q = %q, whole %q", cut, k, part.Headers[k], v)
			}
		}
	})
}
