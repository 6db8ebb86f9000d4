// Package wire holds delaystream's storage formats, shared by the producer,
// the mover and the consumers and hidden from users so that they can change
// behind the layout version: the envelope encoding, the delayed-set member
// kinds (plain and packed, see internal/scripts/ids.lua), generated ids, the
// retry-lane member, the shard of an id, and the fields of stream entries.
// The Lua scripts in internal/scripts write the same formats; a change to
// either is a change to both.
//
// # Envelope
//
// An envelope (codec.Envelope) is two header bytes ([Magic] 0xD5, [Version]
// 1) followed by varint-framed attempt, creation time and headers, then the
// payload; an envelope with a deadline has version [VersionDeadline] (2)
// and the deadline (Unix ms) after the creation time. Envelopes without a
// deadline keep version 1, which earlier releases read. Its ID and due time travel beside it (sorted-set member and
// score; stream entry fields), because After(d) is resolved against the
// Redis clock inside a script that cannot rewrite the bytes.
// [UnmarshalEnvelope] returns a *codec.EnvelopeError wrapping
// codec.ErrUnknownFormat or codec.ErrCorrupt for anything else and never
// panics; a fuzz target guards that promise.
//
// # Stream entries
//
// A stream entry has the fields "i" (message id), "d" (due time, Unix ms,
// Redis clock) and "e" (the envelope); or, for a packed member (a message
// with a generated id that was not rescheduled: a rescheduled one is a
// plain member), "d" and "p", the member as the mover found it, which
// [Unpack] splits. [Decode] reads either form.
package wire
