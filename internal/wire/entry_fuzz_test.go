package wire_test

import (
	"bytes"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/delaystream/delaystream/codec"
	"github.com/delaystream/delaystream/internal/stream"
	"github.com/delaystream/delaystream/internal/wire"
)

// FuzzDecode feeds arbitrary field values to Decode, as a hostile or
// corrupted stream entry would: it must never panic, must fail only with an
// *EntryError wrapping ErrMalformed or a codec error, and an entry it
// accepts must survive Encode and Decode unchanged.
func FuzzDecode(f *testing.F) {
	for _, env := range []codec.Envelope{
		{ID: "a", Due: time.UnixMilli(1), Attempt: 1},
		{ID: "order:5001", Due: time.UnixMilli(1_700_000_000_000), Attempt: 3, Payload: []byte("x"),
			Headers: map[string]string{"k": "v"}, Created: time.UnixMilli(1_600_000_000_000)},
		{ID: wire.RetryMember("m", "1-0"), Due: time.UnixMilli(-1), Attempt: 2},
	} {
		f.Add(env.ID, strconv.FormatInt(env.Due.UnixMilli(), 10), wire.MarshalEnvelope(&env), "1700000000000-0")
	}
	f.Add("", "", []byte{}, "")
	f.Add("id", "+12", []byte{0xD5, 0x01, 0x80}, "x-y")
	f.Add("id", "-9223372036854775808", []byte("\xd5\x01\x01\x00\x01\x05"), "-")

	f.Fuzz(func(t *testing.T, id, due string, env []byte, entryID string) {
		in := map[string]any{wire.FieldID: id, wire.FieldDue: due, wire.FieldEnvelope: string(env)}
		e, err := wire.Decode("s", entryID, in)
		if err != nil {
			var ee *stream.EntryError
			if !errors.As(err, &ee) {
				t.Fatalf("error %v (%T) is not an *EntryError", err, err)
			}
			if ee.Stream != "s" || ee.EntryID != entryID {
				t.Fatalf("error names %s/%s, want s/%s", ee.Stream, ee.EntryID, entryID)
			}
			if !errors.Is(err, stream.ErrMalformed) && !errors.Is(err, codec.ErrUnknownFormat) && !errors.Is(err, codec.ErrCorrupt) {
				t.Fatalf("error %v wraps no known cause", err)
			}
			return
		}
		if e.ID != entryID || e.Envelope.ID == "" {
			t.Fatalf("decoded ids %q/%q from %q/%q", e.ID, e.Envelope.ID, entryID, id)
		}
		_ = e.Appended() // must not panic on any entry id
		e2, err := wire.Decode("s", entryID, values(wire.Encode(&e.Envelope)))
		if err != nil {
			t.Fatalf("re-encoded entry does not decode: %v", err)
		}
		a, b := e.Envelope, e2.Envelope
		if a.ID != b.ID || !a.Due.Equal(b.Due) || a.Attempt != b.Attempt || !a.Created.Equal(b.Created) ||
			!bytes.Equal(a.Payload, b.Payload) || len(a.Headers) != len(b.Headers) {
			t.Fatalf("round trip changed the entry: %+v -> %+v", a, b)
		}
	})
}

// FuzzDecodePacked feeds arbitrary "d" and "p" fields to Decode: it must
// never panic, must fail only with an *EntryError of a known cause, and an
// entry it accepts has the generated id of its due time and random part.
func FuzzDecodePacked(f *testing.F) {
	env := wire.MarshalEnvelope(&codec.Envelope{Attempt: 1, Payload: []byte("x")})
	f.Add("1700000000000", append([]byte("\x01ABCDEFGHJKMNPQRS"), env...))
	f.Add("0", []byte("\x01"))
	f.Add("281474976710655", append([]byte("\x010000000000000000"), env...))
	f.Add("-5", append([]byte("\x01ZZZZZZZZZZZZZZZZ"), env...))
	f.Fuzz(func(t *testing.T, due string, packed []byte) {
		e, err := wire.Decode("s", "1-0", map[string]any{wire.FieldDue: due, wire.FieldPacked: string(packed)})
		if err != nil {
			var ee *stream.EntryError
			if !errors.As(err, &ee) {
				t.Fatalf("error %v (%T) is not an *EntryError", err, err)
			}
			if !errors.Is(err, stream.ErrMalformed) && !errors.Is(err, codec.ErrUnknownFormat) && !errors.Is(err, codec.ErrCorrupt) {
				t.Fatalf("error %v wraps no known cause", err)
			}
			return
		}
		ms, perr := strconv.ParseInt(due, 10, 64)
		if perr != nil || !e.Envelope.Due.Equal(time.UnixMilli(ms)) {
			t.Fatalf("due %q decoded as %v", due, e.Envelope.Due)
		}
		if !wire.GeneratedLayout(e.Envelope.ID) || e.Envelope.ID[10:] != string(packed[1:17]) ||
			e.Envelope.ID != wire.GeneratedID(ms, string(packed[1:17])) {
			t.Fatalf("id %q from due %q and member %q", e.Envelope.ID, due, packed)
		}
	})
}
