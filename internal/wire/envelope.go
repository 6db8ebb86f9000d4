package wire

import (
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/delaystream/delaystream/codec"
)

// Envelope header bytes. Every encoded envelope starts with them; the promote
// script checks them too, so a foreign value in Redis is quarantined before it
// reaches a consumer.
const (
	Magic   byte = 0xD5 // first byte of every envelope
	Version byte = 1    // the format of an envelope without a deadline
	// VersionDeadline is the format of an envelope with a deadline: as
	// [Version], with the deadline after the creation time. Envelopes
	// without one keep [Version], which earlier releases read.
	VersionDeadline byte = 2
)

// Header is [Magic] followed by every version this build reads. The
// scripts get it as an argument and accept an envelope whose first byte is
// Header's first and whose second is any of the others.
const Header = "\xd5\x01\x02"

// maxHeaders bounds decoding work on hostile input.
const maxHeaders = 1 << 12

// MarshalEnvelope encodes e's payload, headers, attempt and creation time.
// Headers are written in key order, so equal envelopes encode equally. The
// attempt is clamped to 0..math.MaxInt32, the range [UnmarshalEnvelope]
// accepts on every platform; the creation time is truncated to the
// millisecond.
func MarshalEnvelope(e *codec.Envelope) []byte {
	return AppendEnvelope(make([]byte, 0, EnvelopeSize(e)), e)
}

// EnvelopeSize returns an upper bound of the length of e's encoding.
func EnvelopeSize(e *codec.Envelope) int {
	n := 2 + 4*binary.MaxVarintLen64 + len(e.Payload)
	for k, v := range e.Headers {
		n += 2*binary.MaxVarintLen64 + len(k) + len(v)
	}
	return n
}

// AppendEnvelope appends the encoding of e (as [MarshalEnvelope] returns it)
// to b and returns the extended slice.
func AppendEnvelope(b []byte, e *codec.Envelope) []byte {
	deadline := deadlineMs(e.Deadline)
	if deadline == 0 {
		b = append(b, Magic, Version)
	} else {
		b = append(b, Magic, VersionDeadline)
	}
	b = binary.AppendUvarint(b, uint64(min(max(e.Attempt, 0), math.MaxInt32)))
	var created int64
	if !e.Created.IsZero() {
		created = e.Created.UnixMilli()
	}
	b = binary.AppendVarint(b, created)
	if deadline != 0 {
		b = binary.AppendVarint(b, deadline)
	}
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

// UnmarshalEnvelope decodes b into e's Payload, Headers, Attempt, Created and Deadline,
// leaving ID and Due untouched. The payload is copied, so b may be reused.
// It returns an [*codec.EnvelopeError] for anything that is not a valid envelope.
func UnmarshalEnvelope(b []byte, e *codec.Envelope) error {
	if err := checkHeader(b); err != nil {
		return err
	}
	r := reader{b: b, off: 2}
	attempt := r.uvarint("attempt")
	created := r.varint("created")
	var deadline int64
	if b[1] == VersionDeadline {
		deadline = r.deadline()
	}
	nh := r.uvarint("header count")
	if r.err == nil && nh > maxHeaders {
		r.fail(fmt.Sprintf("header count %d exceeds %d", nh, maxHeaders))
	}
	if r.err == nil && attempt > math.MaxInt32 {
		r.fail(fmt.Sprintf("attempt %d out of range", attempt))
	}
	headers := r.headers(nh)
	if r.err != nil {
		return r.err
	}
	e.Attempt = int(attempt)
	e.Created = unixMilliOrZero(created)
	e.Deadline = unixMilliOrZero(deadline)
	e.Headers = headers
	e.Payload = append([]byte(nil), b[r.off:]...)
	return nil
}

// checkHeader returns an [*codec.EnvelopeError] unless b starts with
// [Magic] and a version this build reads.
func checkHeader(b []byte) error {
	if len(b) < 2 || b[0] != Magic {
		return &codec.EnvelopeError{Err: codec.ErrUnknownFormat, Detail: "missing envelope magic byte"}
	}
	if b[1] != Version && b[1] != VersionDeadline {
		return &codec.EnvelopeError{Err: codec.ErrUnknownFormat, Detail: fmt.Sprintf("envelope version %d (this build reads %d and %d)", b[1], Version, VersionDeadline)}
	}
	return nil
}

// unixMilliOrZero returns the time of ms Unix milliseconds, the zero time
// for 0 (none).
func unixMilliOrZero(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// deadlineMs returns the deadline in Unix ms, 0 for none (a zero time, or
// one at or before the epoch, which no message can meet).
func deadlineMs(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return max(t.UnixMilli(), 1)
}

// reader decodes varint-framed fields and remembers the first failure.
type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) fail(detail string) {
	if r.err == nil {
		r.err = &codec.EnvelopeError{Err: codec.ErrCorrupt, Detail: detail}
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

// deadline reads a deadline, which must be after the epoch.
func (r *reader) deadline() int64 {
	deadline := r.varint("deadline")
	if r.err == nil && deadline <= 0 {
		r.fail(fmt.Sprintf("deadline %d out of range", deadline))
	}
	return deadline
}

// headers reads n headers; nil for none or after a failure.
func (r *reader) headers(n uint64) map[string]string {
	if r.err != nil || n == 0 {
		return nil
	}
	headers := make(map[string]string, min(n, 64))
	for i := uint64(0); i < n && r.err == nil; i++ {
		k := r.str("header key")
		v := r.str("header value")
		headers[k] = v
	}
	return headers
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
