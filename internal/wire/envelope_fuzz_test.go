package wire_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/delaystream/delaystream/codec"
	"github.com/delaystream/delaystream/internal/wire"
)

// FuzzUnmarshalEnvelope feeds arbitrary bytes to UnmarshalEnvelope: it must
// never panic, must fail only with an *EnvelopeError wrapping ErrUnknownFormat
// or ErrCorrupt, and whatever it decodes must survive another round trip
// unchanged.
func FuzzUnmarshalEnvelope(f *testing.F) {
	seeds := []codec.Envelope{
		{},
		{Attempt: 1, Payload: []byte("hello")},
		{Attempt: 2, Created: time.UnixMilli(1_700_000_000_000), Headers: map[string]string{"a": "1", "trace": "xyz"}},
		{Attempt: 1 << 20, Created: time.UnixMilli(-1), Payload: []byte{0xD5, 0x01, 0x00}},
		{Attempt: 1, Headers: map[string]string{"": ""}, Payload: bytes.Repeat([]byte{0xFF}, 64)},
	}
	for i := range seeds {
		f.Add(wire.MarshalEnvelope(&seeds[i]))
	}
	f.Add([]byte{})
	f.Add([]byte{wire.Magic})
	f.Add([]byte{wire.Magic, 2, 0, 0, 0})
	f.Add([]byte{wire.Magic, wire.Version, 0x80})
	f.Add([]byte{wire.Magic, wire.Version, 1, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F})

	f.Fuzz(func(t *testing.T, b []byte) {
		orig := bytes.Clone(b)
		var e1 codec.Envelope
		err := wire.UnmarshalEnvelope(b, &e1)
		if !bytes.Equal(orig, b) {
			t.Fatalf("UnmarshalEnvelope modified its input")
		}
		if err != nil {
			var ee *codec.EnvelopeError
			if !errors.As(err, &ee) {
				t.Fatalf("error %v (%T) is not an *EnvelopeError", err, err)
			}
			if !errors.Is(err, codec.ErrUnknownFormat) && !errors.Is(err, codec.ErrCorrupt) {
				t.Fatalf("error %v wraps neither ErrUnknownFormat nor ErrCorrupt", err)
			}
			return
		}
		if e1.Attempt < 0 {
			t.Fatalf("negative attempt %d", e1.Attempt)
		}
		b2 := wire.MarshalEnvelope(&e1)
		var e2 codec.Envelope
		if err := wire.UnmarshalEnvelope(b2, &e2); err != nil {
			t.Fatalf("re-encoded envelope does not decode: %v", err)
		}
		if e1.Attempt != e2.Attempt || !e1.Created.Equal(e2.Created) || !bytes.Equal(e1.Payload, e2.Payload) {
			t.Fatalf("round trip changed the envelope: %+v -> %+v", e1, e2)
		}
		if len(e1.Headers) != len(e2.Headers) {
			t.Fatalf("round trip changed the headers: %v -> %v", e1.Headers, e2.Headers)
		}
		for k, v := range e1.Headers {
			if w, ok := e2.Headers[k]; !ok || w != v {
				t.Fatalf("round trip changed header %q: %q -> %q", k, v, w)
			}
		}
		// A canonical encoding re-encodes to the same bytes.
		if b3 := wire.MarshalEnvelope(&e2); !bytes.Equal(b2, b3) {
			t.Fatalf("encoding is not stable: %x -> %x", b2, b3)
		}
	})
}
