package wire_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/codec"
	"github.com/delaystream/delaystream/internal/stream"
	"github.com/delaystream/delaystream/internal/wire"
)

// values converts Encode's field list into what go-redis returns in
// XMessage.Values (every value a string).
func values(fields []any) map[string]any {
	m := make(map[string]any, len(fields)/2)
	for i := 0; i < len(fields); i += 2 {
		switch v := fields[i+1].(type) {
		case string:
			m[fields[i].(string)] = v
		case []byte:
			m[fields[i].(string)] = string(v)
		}
	}
	return m
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	t.Parallel()
	due := time.UnixMilli(1_700_000_123_456)
	tests := []struct {
		name string
		env  codec.Envelope
	}{
		{"minimal", codec.Envelope{ID: "a", Due: due, Attempt: 1}},
		{"full", codec.Envelope{ID: "order:5001", Due: due, Attempt: 4, Payload: []byte("p\x00q"),
			Headers: map[string]string{"h": "v"}, Created: time.UnixMilli(1_700_000_000_000)}},
		{"due before 1970", codec.Envelope{ID: "old", Due: time.UnixMilli(-5), Attempt: 1}},
		{"due zero ms", codec.Envelope{ID: "zero", Due: time.UnixMilli(0), Attempt: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fields := wire.Encode(&tt.env)
			require.Len(t, fields, 6)
			assert.Equal(t, []any{wire.FieldID, wire.FieldDue, wire.FieldEnvelope},
				[]any{fields[0], fields[2], fields[4]})
			e, err := wire.Decode("k", "1700000123999-3", values(fields))
			require.NoError(t, err)
			assert.Equal(t, "1700000123999-3", e.ID)
			assert.Equal(t, time.UnixMilli(1_700_000_123_999), e.Appended())
			assert.Equal(t, tt.env.ID, e.Envelope.ID)
			assert.True(t, tt.env.Due.Equal(e.Envelope.Due), "due %v != %v", tt.env.Due, e.Envelope.Due)
			assert.Equal(t, tt.env.Attempt, e.Envelope.Attempt)
			assert.Equal(t, tt.env.Headers, e.Envelope.Headers)
			assert.Equal(t, string(tt.env.Payload), string(e.Envelope.Payload))
			assert.True(t, tt.env.Created.Equal(e.Envelope.Created))
		})
	}
}

func TestDecodeStripsRetryMember(t *testing.T) {
	t.Parallel()
	member := wire.RetryMember("order:1", "1700000000000-0")
	assert.Equal(t, "order:1\x1f1700000000000-0", member)
	fields := wire.Encode(&codec.Envelope{ID: member, Due: time.UnixMilli(10), Attempt: 2})
	e, err := wire.Decode("k", "11-0", values(fields))
	require.NoError(t, err)
	assert.Equal(t, "order:1", e.Envelope.ID)
	assert.Equal(t, 2, e.Envelope.Attempt)
}

func TestDecodePacked(t *testing.T) {
	t.Parallel()
	env := wire.MarshalEnvelope(&codec.Envelope{Attempt: 3, Payload: []byte("hello")})
	due := time.Date(2026, 11, 21, 21, 0, 0, 0, time.UTC)
	e, err := wire.Decode("k", "9-0", map[string]any{
		"d": fmt.Sprint(due.UnixMilli()),
		"p": "\x01ABCDEFGHJKMNPQRS" + string(env),
	})
	require.NoError(t, err)
	assert.Equal(t, wire.GeneratedID(due.UnixMilli(), "ABCDEFGHJKMNPQRS"), e.Envelope.ID)
	assert.Equal(t, "ABCDEFGHJKMNPQRS", e.Envelope.ID[10:])
	assert.True(t, wire.GeneratedLayout(e.Envelope.ID))
	assert.True(t, due.Equal(e.Envelope.Due))
	assert.Equal(t, []byte("hello"), e.Envelope.Payload)
	assert.Equal(t, 3, e.Envelope.Attempt)
}

func TestGeneratedID(t *testing.T) {
	t.Parallel()
	// The ULID spec's example time part: 1469918176385 ms is "01ARYZ6S41".
	assert.Equal(t, "01ARYZ6S41ABCDEFGHJKMNPQRS", wire.GeneratedID(1469918176385, "ABCDEFGHJKMNPQRS"))
	assert.Equal(t, "0000000000ABCDEFGHJKMNPQRS", wire.GeneratedID(0, "ABCDEFGHJKMNPQRS"))
	assert.Equal(t, "7ZZZZZZZZZABCDEFGHJKMNPQRS", wire.GeneratedID(1<<48-1, "ABCDEFGHJKMNPQRS"))
	// Ids of one random part sort by due time.
	assert.Less(t, wire.GeneratedID(1700000000000, "0000000000000000"), wire.GeneratedID(1700000000001, "0000000000000000"))
}

func TestAppendRandomPart(t *testing.T) {
	t.Parallel()
	for want, rnd := range map[string][10]byte{
		"0000000000000000": {},
		"ZZZZZZZZZZZZZZZZ": {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		"0000000000000001": {9: 1},
		"G000000000000000": {0: 0x80},                                                    // the top 5 bits: 10000
		"0000000000000080": {8: 1},                                                       // bit 8: 8 = 1 << 3, so digit 1 holds 01000
		"000000000000000Z": {9: 0x1f},                                                    // the low 5 bits
		"00000000000000Z0": {8: 0x03, 9: 0xe0},                                           // the next 5 bits
		"0000000000000SQZ": {8: 0x66, 9: 0xff},                                           // 0x66ff = 11001 10111 11111: S Q Z
		"Z000000000000000": {0: 0xf8},                                                    // 11111 in the top digit
		"1000000000000000": {0: 0x08},                                                    // 00001 in the top digit
		"0Z00000000000000": {0: 0x07, 1: 0xc0},                                           // 11111 in the second digit
		"0G00000000000000": {0: 0x04},                                                    // 10000 in the second digit
		"FFFFFFFFFFFFFFFF": {0x7b, 0xde, 0xf7, 0xbd, 0xef, 0x7b, 0xde, 0xf7, 0xbd, 0xef}, // 01111 repeated
	} {
		assert.Equal(t, "x"+want, string(wire.AppendRandomPart([]byte("x"), rnd)), "%x", rnd)
	}
}

func TestDecodeErrors(t *testing.T) {
	t.Parallel()
	env := string(wire.MarshalEnvelope(&codec.Envelope{Attempt: 1, Payload: []byte("x")}))
	tests := []struct {
		name   string
		values map[string]any
		want   error
		msg    string
	}{
		{"nil values", nil, stream.ErrMalformed, `field "d" missing`},
		{"missing id", map[string]any{"d": "1", "e": env}, stream.ErrMalformed, `field "i" missing`},
		{"empty id", map[string]any{"i": "", "d": "1", "e": env}, stream.ErrMalformed, `field "i" missing`},
		{"id of wrong type", map[string]any{"i": 7, "d": "1", "e": env}, stream.ErrMalformed, `field "i" missing`},
		{"missing due", map[string]any{"i": "a", "e": env}, stream.ErrMalformed, `field "d" missing`},
		{"due of wrong type", map[string]any{"i": "a", "d": int64(1), "e": env}, stream.ErrMalformed, `field "d" missing`},
		{"due not a number", map[string]any{"i": "a", "d": "soon", "e": env}, stream.ErrMalformed, `"soon" is not an integer`},
		{"due is a float", map[string]any{"i": "a", "d": "1.5", "e": env}, stream.ErrMalformed, "not an integer"},
		{"due overflows", map[string]any{"i": "a", "d": "99999999999999999999", "e": env}, stream.ErrMalformed, "not an integer"},
		{"empty due", map[string]any{"i": "a", "d": "", "e": env}, stream.ErrMalformed, "not an integer"},
		{"missing envelope", map[string]any{"i": "a", "d": "1"}, stream.ErrMalformed, `field "e" missing`},
		{"envelope of wrong type", map[string]any{"i": "a", "d": "1", "e": []byte(env)}, stream.ErrMalformed, `field "e" missing`},
		{"foreign envelope", map[string]any{"i": "a", "d": "1", "e": `{"json":true}`}, codec.ErrUnknownFormat, "unknown envelope format"},
		{"empty envelope", map[string]any{"i": "a", "d": "1", "e": ""}, codec.ErrUnknownFormat, "magic"},
		{"future envelope version", map[string]any{"i": "a", "d": "1", "e": "\xd5\x09"}, codec.ErrUnknownFormat, "version 9"},
		{"corrupt envelope", map[string]any{"i": "a", "d": "1", "e": env[:2] + "\x80"}, codec.ErrCorrupt, "corrupt envelope"},
		// Packed entries: "d" and "p" (0x01, random part, envelope).
		{"packed: missing due", map[string]any{"p": "\x01ABCDEFGHJKMNPQRS" + env}, stream.ErrMalformed, `field "d" missing`},
		{"packed: too short", map[string]any{"d": "1", "p": "\x01ABCDEFGHJKMNPQR"}, stream.ErrMalformed, "not a packed member"},
		{"packed: wrong kind", map[string]any{"d": "1", "p": "\x02ABCDEFGHJKMNPQRS" + env}, stream.ErrMalformed, "not a packed member"},
		{"packed: random part not base32", map[string]any{"d": "1", "p": "\x01abcdefghjkmnpqrs" + env}, stream.ErrMalformed, "not base32"},
		{"packed: due out of range", map[string]any{"d": "281474976710656", "p": "\x01ABCDEFGHJKMNPQRS" + env}, stream.ErrMalformed, "out of the range"},
		{"packed: negative due", map[string]any{"d": "-1", "p": "\x01ABCDEFGHJKMNPQRS" + env}, stream.ErrMalformed, "out of the range"},
		{"packed: corrupt envelope", map[string]any{"d": "1", "p": "\x01ABCDEFGHJKMNPQRS" + env[:2] + "\x80"}, codec.ErrCorrupt, "corrupt envelope"},
		{"packed: of wrong type", map[string]any{"d": "1", "p": 7, "e": env}, stream.ErrMalformed, `field "i" missing`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e, err := wire.Decode("ds:1:{q}:s", "5-1", tt.values)
			require.Error(t, err)
			assert.Equal(t, wire.Entry{}, e)
			var ee *stream.EntryError
			require.ErrorAs(t, err, &ee)
			assert.Equal(t, "ds:1:{q}:s", ee.Stream)
			assert.Equal(t, "5-1", ee.EntryID)
			assert.ErrorIs(t, err, tt.want)
			assert.Contains(t, err.Error(), tt.msg)
			assert.Contains(t, err.Error(), "decode ds:1:{q}:s/5-1: ")
			if errors.Is(tt.want, stream.ErrMalformed) {
				var ce *codec.EnvelopeError
				assert.False(t, errors.As(err, &ce), "malformed fields are not envelope errors")
			} else {
				var ce *codec.EnvelopeError
				assert.ErrorAs(t, err, &ce)
				assert.NotErrorIs(t, err, stream.ErrMalformed)
			}
		})
	}
}

func TestEntryTime(t *testing.T) {
	t.Parallel()
	tests := []struct {
		id   string
		want time.Time
	}{
		{"1700000000000-0", time.UnixMilli(1_700_000_000_000)},
		{"1700000000000-18446744073709551615", time.UnixMilli(1_700_000_000_000)},
		{"0-1", time.UnixMilli(0)},
		{"5-", time.UnixMilli(5)},
		{"", time.Time{}},
		{"1700000000000", time.Time{}}, // no sequence part
		{"-0", time.Time{}},
		{"abc-0", time.Time{}},
		{"99999999999999999999-0", time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			t.Parallel()
			got := stream.EntryTime(tt.id)
			assert.Equal(t, tt.want.IsZero(), got.IsZero())
			assert.True(t, tt.want.Equal(got), "want %v, got %v", tt.want, got)
			assert.True(t, wire.Entry{ID: tt.id}.Appended().Equal(got))
		})
	}
}

func TestEntryErrorUnwrap(t *testing.T) {
	t.Parallel()
	err := &stream.EntryError{Stream: "s", EntryID: "1-0", Err: stream.ErrMalformed}
	assert.Equal(t, "decode s/1-0: delaystream: malformed entry", err.Error())
	assert.Equal(t, stream.ErrMalformed, errors.Unwrap(err))
}

// Decode hands the envelope's bytes to the codec without copying them; the
// decoded payload must still be a copy, never a view of the entry's value.
func TestDecodePayloadDoesNotAliasEntry(t *testing.T) {
	t.Parallel()
	env := codec.Envelope{ID: "a", Due: time.UnixMilli(1), Attempt: 1, Payload: []byte("payload bytes")}
	raw := string(wire.MarshalEnvelope(&env)) // on the heap, like a value read from Redis
	before := strings.Clone(raw)
	e, err := wire.Decode("k", "1-0", map[string]any{wire.FieldID: "a", wire.FieldDue: "1", wire.FieldEnvelope: raw})
	require.NoError(t, err)
	require.Equal(t, "payload bytes", string(e.Envelope.Payload))
	for i := range e.Envelope.Payload {
		e.Envelope.Payload[i] = 'x'
	}
	assert.Equal(t, before, raw, "writing the decoded payload changed the entry's value")
}
