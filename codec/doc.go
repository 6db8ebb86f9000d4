// Package codec turns values into bytes and back, and defines the envelope:
// a message as delaystream stores and delivers it.
//
// It is the module's leaf package: it imports nothing else from delaystream,
// so every other package can share its types.
//
// # Codecs
//
// A [Codec] encodes the values of typed payloads (delaystream.Schedule,
// delaystream.Get and delaystream.HandleTyped, with the queue's
// delaystream.WithCodec). [Msgpack] is the default, [JSON] and [Raw] are
// the alternatives; a program may bring its own Codec. Codecs are
// stateless and safe for concurrent use.
//
// # Envelope
//
// An [Envelope] is a message as delaystream stores and delivers it: payload,
// headers, attempt number and creation time, with its ID and due time filled
// in by whoever reads it. Its binary encoding (versioned, two header bytes
// then varint-framed fields) is internal and may change behind the key
// layout's version; decoding failures are reported as an [*EnvelopeError]
// wrapping [ErrUnknownFormat] or [ErrCorrupt], on which callers branch with
// errors.Is.
package codec
