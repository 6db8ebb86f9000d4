package codec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"
)

// Envelope header bytes. Every encoded envelope starts with them; the promote
// script checks them too, so a foreign value in Redis is quarantined before it
// reaches a consumer.
const (
	EnvelopeMagic   byte = 0xD5 // first byte of every envelope
	EnvelopeVersion byte = 1    // current format version
)

// Errors wrapped by [*EnvelopeError].
var (
	// ErrUnknownFormat means the bytes are not an envelope of a format this
	// version understands (wrong magic byte or unknown version).
	ErrUnknownFormat = errors.New("codec: unknown envelope format")
	// ErrCorrupt means the bytes start like an envelope but are truncated or
	// malformed.
	ErrCorrupt = errors.New("codec: corrupt envelope")
)

// EnvelopeError reports bytes that could not be decoded as an envelope.
// Use errors.Is with [ErrUnknownFormat] or [ErrCorrupt] to branch.
type EnvelopeError struct {
	Err    error  // ErrUnknownFormat or ErrCorrupt
	Detail string // what was wrong, for logs and dead-letter reasons
}

// Error implements error.
func (e *EnvelopeError) Error() string { return e.Err.Error() + ": " + e.Detail }

// Unwrap returns ErrUnknownFormat or ErrCorrupt.
func (e *EnvelopeError) Unwrap() error { return e.Err }

// Envelope is a message as delaystream stores and delivers it.
//
// ID and Due are not part of the encoded bytes (see the package doc); they
// are filled in by whoever reads the entry from Redis.
type Envelope struct {
	ID      string            // message id, unique per queue while waiting
	Payload []byte            // opaque bytes, usually produced by a Codec
	Headers map[string]string // optional metadata; nil when empty
	Attempt int               // 1 for the first delivery, +1 per retry
	Created time.Time         // when the message was first scheduled (producer clock, ms)
	Due     time.Time         // when it was due (Redis clock, ms)
}

// maxHeaders bounds decoding work on hostile input.
const maxHeaders = 1 << 12

// MarshalEnvelope encodes e's payload, headers, attempt and creation time.
// Headers are written in key order, so equal envelopes encode equally. The
// attempt is clamped to 0..math.MaxInt32, the range [UnmarshalEnvelope]
// accepts on every platform; the creation time is truncated to the
// millisecond.
func MarshalEnvelope(e *Envelope) []byte {
	return AppendEnvelope(make([]byte, 0, EnvelopeSize(e)), e)
}

// EnvelopeSize returns an upper bound of the length of e's encoding.
func EnvelopeSize(e *Envelope) int {
	n := 2 + 3*binary.MaxVarintLen64 + len(e.Payload)
	for k, v := range e.Headers {
		n += 2*binary.MaxVarintLen64 + len(k) + len(v)
	}
	return n
}

// AppendEnvelope appends the encoding of e (as [MarshalEnvelope] returns it)
// to b and returns the extended slice.
func AppendEnvelope(b []byte, e *Envelope) []byte {
	b = append(b, EnvelopeMagic, EnvelopeVersion)
	b = binary.AppendUvarint(b, uint64(min(max(e.Attempt, 0), math.MaxInt32)))
	var created int64
	if !e.Created.IsZero() {
		created = e.Created.UnixMilli()
	}
	b = binary.AppendVarint(b, created)
	b = binary.AppendUvarint(b, uint64(len(e.Headers)))
	if len(e.Headers) > 0 { // sorting allocates even for no headers
		for _, k := range slices.Sorted(maps.Keys(e.Headers)) {
			v := e.Headers[k]
			b = binary.AppendUvarint(b, uint64(len(k)))
			b = append(b, k...)
			b = binary.AppendUvarint(b, uint64(len(v)))
			b = append(b, v...)
		}
	}
	return append(b, e.Payload...)
}

// UnmarshalEnvelope decodes b into e's Payload, Headers, Attempt and Created,
// leaving ID and Due untouched. The payload is copied, so b may be reused.
// It returns an [*EnvelopeError] for anything that is not a valid envelope.
func UnmarshalEnvelope(b []byte, e *Envelope) error {
	if len(b) < 2 || b[0] != EnvelopeMagic {
		return &EnvelopeError{Err: ErrUnknownFormat, Detail: "missing envelope magic byte"}
	}
	if b[1] != EnvelopeVersion {
		return &EnvelopeError{Err: ErrUnknownFormat, Detail: fmt.Sprintf("envelope version %d (this build reads %d)", b[1], EnvelopeVersion)}
	}
	r := reader{b: b, off: 2}
	attempt := r.uvarint("attempt")
	created := r.varint("created")
	nh := r.uvarint("header count")
	if r.err == nil && nh > maxHeaders {
		r.fail(fmt.Sprintf("header count %d exceeds %d", nh, maxHeaders))
	}
	if r.err == nil && attempt > math.MaxInt32 {
		r.fail(fmt.Sprintf("attempt %d out of range", attempt))
	}
	var headers map[string]string
	if r.err == nil && nh > 0 {
		headers = make(map[string]string, min(nh, 64))
		for i := uint64(0); i < nh && r.err == nil; i++ {
			k := r.str("header key")
			v := r.str("header value")
			headers[k] = v
		}
	}
	if r.err != nil {
		return r.err
	}
	e.Attempt = int(attempt)
	e.Created = time.Time{}
	if created != 0 {
		e.Created = time.UnixMilli(created)
	}
	e.Headers = headers
	e.Payload = append([]byte(nil), b[r.off:]...)
	return nil
}

// reader decodes varint-framed fields and remembers the first failure.
type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) fail(detail string) {
	if r.err == nil {
		r.err = &EnvelopeError{Err: ErrCorrupt, Detail: detail}
	}
}

func (r *reader) uvarint(field string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b[r.off:])
	if n <= 0 {
		r.fail("bad varint in " + field)
		return 0
	}
	r.off += n
	return v
}

func (r *reader) varint(field string) int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b[r.off:])
	if n <= 0 {
		r.fail("bad varint in " + field)
		return 0
	}
	r.off += n
	return v
}

func (r *reader) str(field string) string {
	n := r.uvarint(field + " length")
	if r.err != nil {
		return ""
	}
	if n > uint64(len(r.b)-r.off) {
		r.fail(fmt.Sprintf("%s length %d exceeds remaining %d bytes", field, n, len(r.b)-r.off))
		return ""
	}
	s := string(r.b[r.off : r.off+int(n)])
	r.off += int(n)
	return s
}
