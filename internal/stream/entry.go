package stream

import (
	"time"

	"github.com/delaystream/delaystream/internal/wire"
)

// Reasons of quarantine entries (field [FieldReason]).
const (
	ReasonMissingEnvelope = "missing envelope"        // a plain member with no envelope in the hash
	ReasonUnknownEnvelope = "unknown envelope format" // the envelope's header is not this version's
	ReasonUnknownMember   = "unknown member format"   // empty, or a first byte below 0x20 other than 0x01
	ReasonMalformedPacked = "malformed packed member" // 0x01 not followed by a 16-character base32 random part and an envelope
	ReasonInvalidDue      = "invalid due time"        // the score is not a whole number of ms in [0, 2^48)
)

// ErrMalformed is wrapped by [*EntryError] when a field of a stream entry is
// missing or has the wrong type or syntax. Envelope decoding failures wrap
// codec.ErrUnknownFormat or codec.ErrCorrupt instead.
var ErrMalformed = wire.ErrMalformed

// EntryError reports a stream entry that could not be decoded: its Stream
// (key), its EntryID and the cause Err (wrapping [ErrMalformed] or a
// *codec.EnvelopeError). Consumers dead-letter such entries with the error
// as the reason; hooks and logs carry it.
type EntryError = wire.EntryError

// EntryTime returns the time part of a stream entry id, or the zero time if
// id is not of the form "<ms>-<seq>".
func EntryTime(id string) time.Time { return wire.EntryTime(id) }
