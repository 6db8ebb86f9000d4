package wire_test

import (
	"bytes"
	"errors"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/delaystream/delaystream/codec"
	"github.com/delaystream/delaystream/internal/wire"
)

// FuzzUnpack feeds any due time and bytes to Unpack, as a delayed set
// written by someone else would: it never panics; it accepts exactly the
// members ids.lua calls packed (0x01, 16 base32 characters, anything after)
// with a due time of 48 bits, and rejects everything else with an error
// wrapping ErrMalformed and no parts; what it accepts is split, not
// reinterpreted: the id spells the due time and the member's random part,
// and kind byte, random part and envelope put together are the member.
func FuzzUnpack(f *testing.F) {
	env := wire.MarshalEnvelope(&codec.Envelope{Attempt: 1, Payload: []byte("x")})
	f.Add(int64(1_700_000_000_000), append([]byte("\x01ABCDEFGHJKMNPQRS"), env...))
	f.Add(int64(0), []byte("\x010000000000000000"))                      // no envelope: Unpack leaves that to the decoder
	f.Add(int64(maxDue), append([]byte("\x01ZZZZZZZZZZZZZZZZ"), env...)) // the largest due time
	f.Add(int64(maxDue+1), append([]byte("\x01ZZZZZZZZZZZZZZZZ"), env...))
	f.Add(int64(-1), append([]byte("\x01ZZZZZZZZZZZZZZZZ"), env...))
	f.Add(int64(5), []byte{})
	f.Add(int64(5), []byte("\x01"))
	f.Add(int64(5), []byte("\x01ABCDEFGHJKMNPQR"))                  // 15 random characters
	f.Add(int64(5), append([]byte("\x01abcdefghjkmnpqrs"), env...)) // lower case
	f.Add(int64(5), append([]byte("\x01ABCDEFGHIJKLMNOP"), env...)) // I, L, O are not Crockford
	f.Add(int64(5), append([]byte("\x02ABCDEFGHJKMNPQRS"), env...)) // another kind
	f.Add(int64(5), append([]byte("order:5001:cancel"), env...))    // a plain member

	f.Fuzz(func(t *testing.T, due int64, packed []byte) {
		id, envelope, err := wire.Unpack(due, string(packed))
		wellFormed := len(packed) >= 17 && packed[0] == wire.PackedKind &&
			randomRE.Match(packed[1:17]) && due >= 0 && due <= maxDue
		if err != nil {
			if !errors.Is(err, wire.ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			if id != "" || envelope != "" {
				t.Fatalf("error %v came with parts %q, %q", err, id, envelope)
			}
			if wellFormed {
				t.Fatalf("packed member %q due %d refused: %v", packed, due, err)
			}
			return
		}
		if !wellFormed {
			t.Fatalf("malformed member %q due %d accepted as id %q", packed, due, id)
		}
		if !wire.GeneratedLayout(id) || timePart(id) != due || id[10:] != string(packed[1:17]) {
			t.Fatalf("member %q due %d gave id %q (due %d)", packed, due, id, timePart(id))
		}
		if string([]byte{wire.PackedKind})+id[10:]+envelope != string(packed) {
			t.Fatalf("member %q split into %q and %q", packed, id, envelope)
		}
	})
}

// FuzzPackedMember builds packed members as the producer does (kind byte,
// random part from 80 bits, encoded envelope) for any message and due time
// of a generated id: Unpack gives back the generated id and the envelope's
// bytes, and the stream entry the mover appends for it ("d" and "p")
// decodes to the same message.
func FuzzPackedMember(f *testing.F) {
	f.Add(int64(1_700_000_000_000), []byte("0123456789"), 1, int64(1_699_999_999_000), []byte("hello"), "", "")
	f.Add(int64(0), []byte{}, 0, int64(0), []byte{}, "trace", "xyz")
	f.Add(int64(maxDue), bytes.Repeat([]byte{0xFF}, 10), math.MaxInt32, int64(-1), []byte{0x01, 0xD5}, "", "v")
	f.Add(int64(253402300799999), []byte{0x80}, -3, int64(math.MinInt64), bytes.Repeat([]byte{0}, 100), "\x00", "\xff")

	f.Fuzz(func(t *testing.T, due int64, rnd []byte, attempt int, created int64, payload []byte, hk, hv string) {
		due &= maxDue
		var r [10]byte
		copy(r[:], rnd)
		msg := codec.Envelope{Payload: payload, Attempt: attempt}
		if created != 0 {
			msg.Created = time.UnixMilli(created)
		}
		if hk != "" || hv != "" {
			msg.Headers = map[string]string{hk: hv}
		}
		random := wire.AppendRandomPart(nil, r)
		member := append([]byte{wire.PackedKind}, random...)
		member = wire.AppendEnvelope(member, &msg)

		id, envelope, err := wire.Unpack(due, string(member))
		if err != nil {
			t.Fatalf("Unpack of a built member: %v", err)
		}
		if want := wire.GeneratedID(due, string(random)); id != want {
			t.Fatalf("member of %s unpacked as id %s", want, id)
		}
		if randomBits(id[10:]) != r {
			t.Fatalf("id %s does not carry the random bits %x", id, r)
		}
		if want := wire.MarshalEnvelope(&msg); envelope != string(want) {
			t.Fatalf("envelope %x unpacked as %x", want, envelope)
		}

		e, err := wire.Decode("s", "1-0", map[string]any{
			wire.FieldDue: strconv.FormatInt(due, 10), wire.FieldPacked: string(member)})
		if err != nil {
			t.Fatalf("entry of a built member: %v", err)
		}
		got := e.Envelope
		if got.ID != id || got.Due.UnixMilli() != due {
			t.Fatalf("entry decoded as id %q due %d, want %q due %d", got.ID, got.Due.UnixMilli(), id, due)
		}
		if want := min(max(attempt, 0), math.MaxInt32); got.Attempt != want {
			t.Fatalf("attempt %d decoded as %d", attempt, got.Attempt)
		}
		if msg.Created.IsZero() != got.Created.IsZero() || !got.Created.IsZero() && got.Created.UnixMilli() != created {
			t.Fatalf("created %d decoded as %v", created, got.Created)
		}
		if !bytes.Equal(got.Payload, payload) {
			t.Fatalf("payload %x decoded as %x", payload, got.Payload)
		}
		if len(got.Headers) != len(msg.Headers) || got.Headers[hk] != msg.Headers[hk] {
			t.Fatalf("headers %q decoded as %q", msg.Headers, got.Headers)
		}
	})
}
