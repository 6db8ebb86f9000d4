package delay_test

import (
	"errors"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/delaystream/delaystream/codec"
	"github.com/delaystream/delaystream/internal/delay"
	"github.com/delaystream/delaystream/internal/wire"
)

// FuzzValidateID feeds any string to ValidateID: it accepts exactly 1 to
// MaxIDLen bytes of UTF-8 without control characters and refuses anything
// else with an error wrapping ErrInvalidMessage. What it accepts can never
// be mistaken in Redis for something else: as a delayed-set member it
// starts with a byte of 0x20 or more (not the packed kind 0x01 nor another
// control kind, see ids.lua), it holds no retry-member separator, and a
// stream entry or retry-lane member carrying it decodes to exactly that id.
func FuzzValidateID(f *testing.F) {
	for _, s := range []string{
		"order:5001:cancel", "01JD0000000000000000000000", "a", "ünïcödé id", " leading space",
		strings.Repeat("x", delay.MaxIDLen), strings.Repeat("é", delay.MaxIDLen/2),
		"", strings.Repeat("x", delay.MaxIDLen+1), "\x01ABCDEFGHJKMNPQRS", "\x00", "tab\t", "nl\n",
		"del\x7f", "c1\u0085", "m" + wire.RetrySep + "1-0", "\xff", "\xed\xa0\x80", // a surrogate half
	} {
		f.Add(s)
	}

	env := string(wire.MarshalEnvelope(&codec.Envelope{Attempt: 1}))
	f.Fuzz(func(t *testing.T, id string) {
		err := delay.ValidateID(id)
		valid := len(id) >= 1 && len(id) <= delay.MaxIDLen && utf8.ValidString(id) &&
			strings.IndexFunc(id, unicode.IsControl) < 0
		if err != nil {
			if !errors.Is(err, delay.ErrInvalidMessage) {
				t.Fatalf("ValidateID(%q): error %v does not wrap ErrInvalidMessage", id, err)
			}
			if valid {
				t.Fatalf("ValidateID(%q) refused a valid id: %v", id, err)
			}
			return
		}
		if !valid {
			t.Fatalf("ValidateID(%q) accepted an invalid id", id)
		}
		if id[0] < 0x20 || strings.Contains(id, wire.RetrySep) {
			t.Fatalf("valid id %q could be read as another member kind or as a retry member", id)
		}
		for _, member := range []string{id, wire.RetryMember(id, "1700000000000-0")} {
			e, err := wire.Decode("s", "1-0", map[string]any{wire.FieldID: member, wire.FieldDue: "1", wire.FieldEnvelope: env})
			if err != nil || e.Envelope.ID != id {
				t.Fatalf("entry with member %q decoded as id %q, %v; want %q", member, e.Envelope.ID, err, id)
			}
		}
	})
}
