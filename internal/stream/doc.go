// Package stream owns delaystream's Redis key layout, the format of the
// entries promotion appends to a queue's stream, and the figures read back
// from Redis about streams and their consumer groups. Every other part
// builds its key names here ([Layout], [Keys], [Lane]) and reads stream
// and group state through it ([ReadInfo], [ReadQuarantine]).
//
// # Key layout
//
// Every key of one queue shard carries the same hash tag, so each Lua script
// touches keys of a single Cluster slot:
//
//	<prefix>:1:{<queue>}:z            ZSET    waiting messages, scored by due time (ms, Redis clock)
//	<prefix>:1:{<queue>}:m            HASH    message id -> encoded envelope (plain members only)
//	<prefix>:1:{<queue>}:s            STREAM  due messages; every group reads it
//	<prefix>:1:{<queue>}:x            STREAM  quarantine: members promotion could not deliver
//	<prefix>:1:{<queue>}:r:<group>:…  the group's retry lane (its own z, m, s, x, l, w, n)
//	<prefix>:1:{<queue>}:d:<group>    STREAM  the group's dead letters
//
// plus the lane's lease (:l), wake-up and arrivals channels (:w, :n), the
// queue's record (:q), its groups (:g), its history counters (:h, and
// :h:m:<minute> and :h:h:<hour> buckets), call tokens (:k:<token>), the pause
// record (:p, [Keys.Pause]), a limited group's flow state (:f:<group>) and, for a
// sharded queue, the movers' registry (:o); docs/concepts.md lists them all.
// The "1" is the layout version: a change to the layout bumps it, so old and
// new keys never mix. The prefix defaults to [DefaultPrefix]. Shard i of a
// sharded queue uses its own hash tag ([Layout.Shard]); one shard uses
// {<queue>}. A message's shard is a stable hash of its id.
//
// # Delayed-set members
//
// A delayed set holds two kinds of member, told apart by the first byte:
// plain (the message id, with the envelope in the hash under the same id:
// caller-chosen ids, rescheduled messages, retry-lane entries) and packed
// (0x01, the random part of a generated id, then the envelope; no hash
// entry). A generated id has the ULID layout with the due time as its time
// part, so score and member give the id back. Anything else was written by
// someone else; promotion quarantines it with its bytes and one of the
// Reason constants, and goes on. A key of the wrong type makes every call
// on it fail with a [*KeyTypeError] naming the key ([ExplainWrongType]),
// and the other keys keep working.
//
// # Entry format
//
// A stream entry has the fields "i" (message id), "d" (due time, Unix ms,
// Redis clock) and "e" (the envelope); or, for a packed member, "d" and
// "p", the member as promotion found it, which the consumer splits. Either
// decodes to a [codec.Envelope]; anything else is an [*EntryError]. A
// quarantine entry has "d" (the score), "r" (the reason) and what was
// found: "i" and "e" for a plain member ("i" alone when its envelope is
// missing), "m" (the raw member) otherwise.
//
// All functions here are safe for concurrent use.
package stream
