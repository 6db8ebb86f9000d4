// Package codec turns values into bytes and back, and owns the envelope: the
// one binary encoding in which delaystream stores a message in Redis.
//
// It is the module's leaf package: it imports nothing else from delaystream,
// so every other package can share its types.
//
// # Codecs
//
// A [Codec] encodes the values a typed producer or consumer works with
// (delay.Typed[T], group typed handlers). [Msgpack] is the default, [JSON]
// and [Raw] are the alternatives. Codecs are stateless and safe for
// concurrent use.
//
// # Envelope
//
// An [Envelope] carries a message's payload, headers, attempt number and
// creation time. Its ID and due time are not inside the encoded bytes: they
// travel beside them (the ID is the sorted-set member and hash field, the due
// time is the sorted-set score, and both become fields of the stream entry),
// because After(d) is resolved against the Redis clock inside a Lua script
// that cannot rewrite the bytes, and because storing them twice costs memory
// for every waiting message.
//
// The encoding is versioned: two header bytes (magic 0xD5, format version 1)
// followed by varint-framed fields and the payload. [UnmarshalEnvelope]
// returns an [*EnvelopeError] wrapping [ErrUnknownFormat] or [ErrCorrupt] for
// anything else and never panics; a fuzz target guards that promise.
//
//	b := codec.MarshalEnvelope(&codec.Envelope{Payload: []byte("hi"), Attempt: 1})
//	var e codec.Envelope
//	err := codec.UnmarshalEnvelope(b, &e)
package codec
