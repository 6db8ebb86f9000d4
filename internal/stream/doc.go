// Package stream owns delaystream's Redis key layout, the format of the
// entries the mover appends to a queue's stream, and the figures read back
// from Redis about streams and their consumer groups.
//
// # Key layout
//
// Every key of one queue shard carries the same hash tag, so each Lua script
// touches keys of a single Cluster slot:
//
//	<prefix>:1:{<queue>}:z            ZSET    waiting messages, scored by due time (ms, Redis clock)
//	<prefix>:1:{<queue>}:m            HASH    message id -> encoded envelope (plain members only)
//	<prefix>:1:{<queue>}:s            STREAM  due messages; every group reads it
//	<prefix>:1:{<queue>}:x            STREAM  quarantine: entries the mover could not deliver
//	<prefix>:1:{<queue>}:l            STRING  mover lease (which mover promotes this shard)
//	<prefix>:1:{<queue>}:w            channel wake-ups: published when an earlier entry is scheduled
//	<prefix>:1:{<queue>}:r:<group>:…  the group's retry lane (its own z, m, s, x, l, w)
//	<prefix>:1:{<queue>}:d:<group>    STREAM  the group's dead letters
//
// The "1" is the layout version: a change to the layout bumps it, so old and
// new keys never mix. The prefix defaults to [DefaultPrefix]. A queue split
// into n shards uses the hash tag {<queue>:<i>} for shard i (0 <= i < n); a
// message's shard is chosen by a stable hash of its id, so cancel and
// reschedule find it again. One shard (the default) uses {<queue>}.
//
// # Delayed-set members
//
// A delayed set holds two kinds of member, told apart by the first byte:
//
//   - plain: the message id, with the envelope in the envelopes hash under
//     the same id. Messages scheduled with a caller-chosen id, rescheduled
//     messages and retry-lane entries are plain. Ids never start with a
//     control character.
//   - packed: the byte 0x01, the 16-character random part of a generated id,
//     then the envelope, all in the member; no hash entry. A generated id has
//     the ULID layout (26 characters of Crockford base32) with the message's
//     due time as its time part, so the score and the member together give
//     the id back, and a lookup by id is a binary search among the members of
//     one score. Packed members take about 70 % of a plain member's memory
//     (256 against 362 bytes per waiting message with a 128-byte payload).
//
// Anything else in a delayed set was written by someone else (another
// program, an operator, a version of this library that knows more kinds):
// the mover quarantines it with its raw bytes and a reason, and goes on.
// The reasons are [ReasonUnknownMember] (empty, or a first byte below 0x20
// other than 0x01), [ReasonMalformedPacked] (0x01 not followed by a
// base32 random part and an envelope), [ReasonUnknownEnvelope],
// [ReasonMissingEnvelope] and [ReasonInvalidDue] (a score that is not a
// whole number of ms in [0, 2^48)). A packed member with the right kind
// byte and envelope header is appended as is; the consumer checks its random
// part, and consumers dead-letter an entry it cannot split. A key of the
// wrong type (someone SET the delayed set) makes every call on it fail:
// every part reports it as a [*KeyTypeError] naming the key (the
// producer's and the dead-letter handle's calls return it, the mover's and
// the consumer's loops log it, see [ExplainWrongType]), and goes on with
// the other keys until it is fixed.
//
// # Entry format
//
// A stream entry has three fields: "i" (message id), "d" (due time, Unix ms,
// Redis clock) and "e" (the envelope, see package codec); or, for a message
// with a generated id, two: "d" and "p", the packed delayed-set member as
// the mover found it, which the consumer splits into id and envelope (appending
// the member as is saves the promote script building two strings per
// message: 3.7 → 3.1 µs of Redis CPU per promoted message on a 2-core VM). The consumer turns either form back
// into a [codec.Envelope] and reports anything else as an [*EntryError]. A quarantine entry has "d" (the score), "r" (reason) and what
// was found: "i" and, when there were bytes, "e" for a plain member; "m",
// the raw member, for anything else. [ReadQuarantine] reads both.
//
// All functions here are safe for concurrent use.
package stream
