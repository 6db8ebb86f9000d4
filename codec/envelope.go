package codec

import (
	"errors"
	"time"
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
	// Deadline is when the message expires if no group has handled it
	// (producer clock, ms); zero for never. A consumer that gets it later
	// dead-letters it with the reason "expired" instead of handling it.
	Deadline time.Time
}
