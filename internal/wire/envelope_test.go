package wire_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/codec"
	"github.com/delaystream/delaystream/internal/wire"
)

func TestEnvelopeRoundTrip(t *testing.T) {
	t.Parallel()
	created := time.UnixMilli(1_700_000_000_123)
	tests := []struct {
		name string
		in   codec.Envelope
		want codec.Envelope // what decoding returns (ID and Due are never encoded)
	}{
		{
			name: "empty payload",
			in:   codec.Envelope{Attempt: 1, Created: created},
			want: codec.Envelope{Attempt: 1, Created: created},
		},
		{
			name: "payload only",
			in:   codec.Envelope{Payload: []byte("hello"), Attempt: 1, Created: created},
			want: codec.Envelope{Payload: []byte("hello"), Attempt: 1, Created: created},
		},
		{
			name: "binary payload with magic bytes inside",
			in:   codec.Envelope{Payload: []byte{0xD5, 0x01, 0x00, 0xFF}, Attempt: 2, Created: created},
			want: codec.Envelope{Payload: []byte{0xD5, 0x01, 0x00, 0xFF}, Attempt: 2, Created: created},
		},
		{
			name: "headers",
			in: codec.Envelope{Payload: []byte("p"), Attempt: 1, Created: created,
				Headers: map[string]string{"trace": "abc", "tenant": "t1", "empty": ""}},
			want: codec.Envelope{Payload: []byte("p"), Attempt: 1, Created: created,
				Headers: map[string]string{"trace": "abc", "tenant": "t1", "empty": ""}},
		},
		{
			name: "empty header map decodes as nil",
			in:   codec.Envelope{Payload: []byte("p"), Attempt: 1, Headers: map[string]string{}, Created: created},
			want: codec.Envelope{Payload: []byte("p"), Attempt: 1, Created: created},
		},
		{
			name: "deadline (version 2), truncated to the ms",
			in: codec.Envelope{Payload: []byte("p"), Attempt: 3, Created: created, Headers: map[string]string{"k": "v"},
				Deadline: created.Add(time.Hour + 700*time.Microsecond)},
			want: codec.Envelope{Payload: []byte("p"), Attempt: 3, Created: created, Headers: map[string]string{"k": "v"},
				Deadline: created.Add(time.Hour)},
		},
		{
			name: "deadline before the epoch: expired at once, still version 2",
			in:   codec.Envelope{Payload: []byte("p"), Attempt: 1, Deadline: time.UnixMilli(-5)},
			want: codec.Envelope{Payload: []byte("p"), Attempt: 1, Deadline: time.UnixMilli(1)},
		},
		{
			name: "large attempt",
			in:   codec.Envelope{Payload: []byte("p"), Attempt: math.MaxInt32, Created: created},
			want: codec.Envelope{Payload: []byte("p"), Attempt: math.MaxInt32, Created: created},
		},
		{
			name: "attempt beyond int32 is clamped so the bytes stay decodable",
			in:   codec.Envelope{Attempt: 1 << 40},
			want: codec.Envelope{Attempt: math.MaxInt32},
		},
		{
			name: "negative attempt encodes as zero",
			in:   codec.Envelope{Attempt: -3},
			want: codec.Envelope{Attempt: 0},
		},
		{
			name: "zero created stays zero",
			in:   codec.Envelope{Payload: []byte("p"), Attempt: 1},
			want: codec.Envelope{Payload: []byte("p"), Attempt: 1},
		},
		{
			name: "created before 1970",
			in:   codec.Envelope{Attempt: 1, Created: time.UnixMilli(-86_400_000)},
			want: codec.Envelope{Attempt: 1, Created: time.UnixMilli(-86_400_000)},
		},
		{
			name: "created is truncated to the millisecond",
			in:   codec.Envelope{Attempt: 1, Created: created.Add(999 * time.Microsecond)},
			want: codec.Envelope{Attempt: 1, Created: created},
		},
		{
			name: "id and due are not encoded",
			in:   codec.Envelope{ID: "x", Due: created, Payload: []byte("p"), Attempt: 1},
			want: codec.Envelope{Payload: []byte("p"), Attempt: 1},
		},
		{
			name: "large payload",
			in:   codec.Envelope{Payload: bytes.Repeat([]byte("ab"), 1<<19), Attempt: 7},
			want: codec.Envelope{Payload: bytes.Repeat([]byte("ab"), 1<<19), Attempt: 7},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := wire.MarshalEnvelope(&tt.in)
			require.GreaterOrEqual(t, len(b), 2)
			assert.Equal(t, wire.Magic, b[0])
			if tt.in.Deadline.IsZero() {
				assert.Equal(t, wire.Version, b[1])
			} else {
				assert.Equal(t, wire.VersionDeadline, b[1])
			}

			got := codec.Envelope{ID: "keep-me", Due: time.UnixMilli(42)}
			require.NoError(t, wire.UnmarshalEnvelope(b, &got))
			assert.Equal(t, "keep-me", got.ID, "ID must be left untouched")
			assert.True(t, got.Due.Equal(time.UnixMilli(42)), "Due must be left untouched")
			assert.Equal(t, tt.want.Attempt, got.Attempt)
			assert.Equal(t, tt.want.Headers, got.Headers)
			assert.Equal(t, len(tt.want.Payload), len(got.Payload))
			assert.True(t, bytes.Equal(tt.want.Payload, got.Payload), "payload differs")
			assert.Equal(t, tt.want.Created.IsZero(), got.Created.IsZero())
			assert.True(t, tt.want.Created.Equal(got.Created), "created: want %v, got %v", tt.want.Created, got.Created)
		})
	}
}

func TestMarshalEnvelopeDeterministic(t *testing.T) {
	t.Parallel()
	h := map[string]string{}
	for i := range 50 {
		h[strings.Repeat("k", i+1)] = strings.Repeat("v", i)
	}
	e := codec.Envelope{Payload: []byte("p"), Headers: h, Attempt: 3, Created: time.UnixMilli(5)}
	first := wire.MarshalEnvelope(&e)
	for range 20 { // map iteration order varies between runs
		assert.Equal(t, first, wire.MarshalEnvelope(&e))
	}
}

func TestUnmarshalEnvelopeCopiesPayload(t *testing.T) {
	t.Parallel()
	b := wire.MarshalEnvelope(&codec.Envelope{Payload: []byte("abc"), Attempt: 1})
	var e codec.Envelope
	require.NoError(t, wire.UnmarshalEnvelope(b, &e))
	for i := range b {
		b[i] = 'X'
	}
	assert.Equal(t, []byte("abc"), e.Payload)
}

func TestUnmarshalEnvelopeErrors(t *testing.T) {
	t.Parallel()
	valid := wire.MarshalEnvelope(&codec.Envelope{Payload: []byte("payload"), Attempt: 1,
		Headers: map[string]string{"key": "value"}, Created: time.UnixMilli(1)})
	hdr := []byte{wire.Magic, wire.Version}
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	uv := func(v uint64) []byte { return binary.AppendUvarint(nil, v) }
	sv := func(v int64) []byte { return binary.AppendVarint(nil, v) }
	overlong := bytes.Repeat([]byte{0xFF}, 11) // more than 10 varint bytes: overflow

	tests := []struct {
		name   string
		in     []byte
		want   error
		detail string // substring of EnvelopeError.Detail
	}{
		{"nil", nil, codec.ErrUnknownFormat, "magic"},
		{"empty", []byte{}, codec.ErrUnknownFormat, "magic"},
		{"magic only", []byte{wire.Magic}, codec.ErrUnknownFormat, "magic"},
		{"wrong magic", []byte{0x7B, 0x01, 0x00}, codec.ErrUnknownFormat, "magic"},
		{"json text", []byte(`{"a":1}`), codec.ErrUnknownFormat, "magic"},
		{"version 0", []byte{wire.Magic, 0}, codec.ErrUnknownFormat, "version 0"},
		{"version 3", cat([]byte{wire.Magic, 3}, valid[2:]), codec.ErrUnknownFormat, "version 3"},
		// A version-1 body read as version 2: the header count (1, a
		// zigzag -1) is taken for the deadline.
		{"version 2 without a deadline", cat([]byte{wire.Magic, wire.VersionDeadline}, valid[2:]), codec.ErrCorrupt, "deadline"},
		{"version 2, deadline 0", cat([]byte{wire.Magic, wire.VersionDeadline}, uv(1), sv(0), sv(0), uv(0)), codec.ErrCorrupt, "deadline"},
		{"version 2, negative deadline", cat([]byte{wire.Magic, wire.VersionDeadline}, uv(1), sv(0), sv(-5), uv(0)), codec.ErrCorrupt, "deadline"},
		{"version 2, missing deadline", cat([]byte{wire.Magic, wire.VersionDeadline}, uv(1), sv(0)), codec.ErrCorrupt, "deadline"},
		{"header bytes only", hdr, codec.ErrCorrupt, "attempt"},
		{"truncated attempt varint", cat(hdr, []byte{0x80}), codec.ErrCorrupt, "attempt"},
		{"overflowing attempt varint", cat(hdr, overlong), codec.ErrCorrupt, "attempt"},
		{"attempt out of range", cat(hdr, uv(math.MaxInt32+1), sv(0), uv(0)), codec.ErrCorrupt, "attempt"},
		{"missing created", cat(hdr, uv(1)), codec.ErrCorrupt, "created"},
		{"overflowing created varint", cat(hdr, uv(1), overlong), codec.ErrCorrupt, "created"},
		{"missing header count", cat(hdr, uv(1), sv(0)), codec.ErrCorrupt, "header count"},
		{"header count too large", cat(hdr, uv(1), sv(0), uv(1<<12+1)), codec.ErrCorrupt, "header count"},
		{"huge header count", cat(hdr, uv(1), sv(0), uv(math.MaxUint64)), codec.ErrCorrupt, "header count"},
		{"missing header key", cat(hdr, uv(1), sv(0), uv(1)), codec.ErrCorrupt, "header key"},
		{"header key longer than input", cat(hdr, uv(1), sv(0), uv(1), uv(10), []byte("abc")), codec.ErrCorrupt, "header key"},
		{"header key length overflows int", cat(hdr, uv(1), sv(0), uv(1), uv(math.MaxUint64)), codec.ErrCorrupt, "header key"},
		{"missing header value", cat(hdr, uv(1), sv(0), uv(1), uv(1), []byte("k")), codec.ErrCorrupt, "header value"},
		{"header value longer than input", cat(hdr, uv(1), sv(0), uv(1), uv(1), []byte("k"), uv(5), []byte("v")), codec.ErrCorrupt, "header value"},
		{"second header missing", cat(hdr, uv(1), sv(0), uv(2), uv(1), []byte("k"), uv(1), []byte("v")), codec.ErrCorrupt, "header key"},
		{"valid envelope cut in its headers", valid[:6], codec.ErrCorrupt, "header"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := codec.Envelope{ID: "id", Attempt: 9, Payload: []byte("old")}
			var err error
			require.NotPanics(t, func() { err = wire.UnmarshalEnvelope(tt.in, &e) })
			require.Error(t, err)
			var ee *codec.EnvelopeError
			require.ErrorAs(t, err, &ee)
			assert.ErrorIs(t, err, tt.want)
			other := codec.ErrCorrupt
			if tt.want == codec.ErrCorrupt {
				other = codec.ErrUnknownFormat
			}
			assert.NotErrorIs(t, err, other)
			assert.Contains(t, ee.Detail, tt.detail)
			assert.True(t, strings.HasPrefix(err.Error(), tt.want.Error()+": "), "error text %q", err)
			// A failed decode leaves the destination as it was.
			assert.Equal(t, codec.Envelope{ID: "id", Attempt: 9, Payload: []byte("old")}, e)
		})
	}
}

func TestUnmarshalEnvelopeEveryTruncation(t *testing.T) {
	t.Parallel()
	b := wire.MarshalEnvelope(&codec.Envelope{Attempt: 300, Created: time.UnixMilli(1_700_000_000_000),
		Headers: map[string]string{"a": "1", "bb": "22"}})
	// With an empty payload, every strict prefix is truncated somewhere in
	// the framed fields.
	for n := 0; n < len(b); n++ {
		var e codec.Envelope
		err := wire.UnmarshalEnvelope(b[:n], &e)
		require.Error(t, err, "prefix of %d bytes", n)
		var ee *codec.EnvelopeError
		require.ErrorAs(t, err, &ee, "prefix of %d bytes", n)
		assert.True(t, errors.Is(err, codec.ErrCorrupt) || errors.Is(err, codec.ErrUnknownFormat))
	}
	var e codec.Envelope
	require.NoError(t, wire.UnmarshalEnvelope(b, &e))
	assert.Equal(t, 300, e.Attempt)
}

func TestEnvelopeErrorUnwrap(t *testing.T) {
	t.Parallel()
	err := &codec.EnvelopeError{Err: codec.ErrCorrupt, Detail: "bad varint in attempt"}
	assert.Equal(t, "codec: corrupt envelope: bad varint in attempt", err.Error())
	assert.Equal(t, codec.ErrCorrupt, errors.Unwrap(err))
}

// An envelope without a deadline keeps version 1, which earlier releases
// read; one with a deadline is version 2.
func TestEnvelopeVersionByDeadline(t *testing.T) {
	t.Parallel()
	e := codec.Envelope{Payload: []byte("p"), Attempt: 1}
	assert.Equal(t, []byte{wire.Magic, wire.Version}, wire.MarshalEnvelope(&e)[:2])
	e.Deadline = time.UnixMilli(1_700_000_000_000)
	b := wire.MarshalEnvelope(&e)
	assert.Equal(t, []byte{wire.Magic, wire.VersionDeadline}, b[:2])
	assert.Equal(t, string([]byte{wire.Magic, wire.Version, wire.VersionDeadline}), wire.Header)
	var got codec.Envelope
	require.NoError(t, wire.UnmarshalEnvelope(b, &got))
	assert.Equal(t, e.Deadline, got.Deadline)
}
