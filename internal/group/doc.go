// Package group turns a queue's stream of due messages into acknowledged,
// retried, recoverable work for any number of independent consumer groups.
//
// # Model
//
// Every group of a queue reads the queue stream with XREADGROUP, so every
// group gets every due message (fan-out); groups share nothing else. Each
// group also owns a retry lane (its own delayed set, envelopes and stream,
// under the queue's hash tag) and a dead-letter stream. A [Consumer] is one
// member of a group; run as many as you like, in as many processes.
//
//	c, err := group.New(rdb, "orders", "billing", func(ctx context.Context, m *group.Message) error {
//		return bill(ctx, m.ID, m.Payload)
//	})
//	...
//	err = c.Run(ctx) // blocks until ctx is cancelled
//
// # Guarantees
//
//   - At-least-once per group: a message is acknowledged only after its
//     handler returned nil. A consumer that crashes leaves its entries
//     pending; another consumer reclaims them (XAUTOCLAIM) once they have
//     been idle for the visibility timeout (default 2 s, checked every 1 s:
//     a consumer killed with kill -9 has its work handled elsewhere within
//     about 3 s, read-ahead included: a reclaim pass claims only what its
//     consumer has room for, and keeps claiming, as its workers make room,
//     while there is more to claim). Handlers should be idempotent. A
//     consumer checks only the streams that may have entries pending: the
//     movers announce every append from the promote script (the lane's
//     arrivals channel), and a stream found with nothing pending and
//     nothing unread by the group stays quiet until its next announcement,
//     its own read or a resubscription; quiet streams' pending counts are
//     checked once a minute (entries made pending by a foreign reader). So
//     an idle group makes no reclaim calls.
//   - Per-group retries: a handler error acknowledges the entry for this
//     group and schedules attempt+1 in this group's retry lane with backoff,
//     in one script. Other groups never see the retry. The retry is due by
//     the Redis clock, so it is never early; the lane is promoted by the
//     same script and machinery as the queue (package mover), run inside the
//     Consumer, with a lease so that one consumer of the group does it.
//   - Nothing dropped silently: exhausted attempts, entries delivered more
//     than the max deliveries (poison that crashes its consumer),
//     undecodable entries and handler requests ([DeadLetter]) go to the dead
//     letters with reason, last error, attempt, delivery count and source,
//     in one script with the acknowledgement. Pending entries found deleted
//     from the stream are recorded there too. [Drop] acknowledges without
//     retry and is counted. Dead letters can be listed, redriven (back to
//     this group only, now or after a delay, attempt reset to 1) and purged
//     with [DeadLetters].
//   - A handler that runs long keeps its entry: every third of the
//     visibility timeout the consumer resets the entry's idle time after
//     checking (atomically) that it still owns it. If another consumer took
//     it over anyway, the handler's ctx is cancelled. A handler running ten
//     times the visibility timeout is never run twice.
//   - Ordering: none across messages. Entries are handled concurrently by up
//     to WithWorkers handlers, and retries come back later.
//
// # Lifecycle
//
// [New] validates and starts nothing. [Consumer.Run] creates the group if
// needed (at the start of the retained stream by default, so no message
// promoted before the first consumer started is missed; see
// [WithStartAtNew]), then reads, handles, acknowledges (batched: an ack
// goes with the consumer's next read on its node, or alone after at most
// 50 ms, or a quarter of the visibility timeout if that is less),
// reclaims, extends, trims and promotes the retry
// lane. It also keeps the queue itself promoted, unless built
// [WithoutPromotion]: while any consumer of the queue runs in a process
// (on one client), that process runs one mover of the queue, which shares
// the work with every other mover, so producers and consumers alone
// deliver. Cancelling Run's ctx stops reading at once; entries read ahead and
// not started are handed back at once; in-flight handlers get the drain
// timeout (default 10 s) to finish, then their ctx is cancelled and their
// entries are handed back too: their idle time is pushed past the
// visibility timeout so the next reclaim pass of any consumer of the group
// takes them, without waiting. Run returns nil after a requested stop.
// Redis 7.0 has no XNACK; that is why hand-back uses XCLAIM's IDLE option.
//
// # Read-ahead
//
// A consumer reads entries ahead of its free workers, so that one
// XREADGROUP returns many: the call's cost is shared by every entry it
// returns, which is what makes bursts fast and cheap for Redis and the
// client. Entries read ahead are held (pending with this consumer, extended
// like running ones) until a worker takes them. By default the read-ahead
// follows the handlers' measured pace: about what the workers handle in
// 100 ms, at least 4 × workers and at most 256 entries (or 4 × workers, if
// more). Fast handlers get reads of a few hundred entries; slow ones a short
// queue, so a consumer never sits on much work that other consumers of the
// group could do, and a crash strands little. [WithPrefetch] fixes it.
// While the workers still have queued entries, the next read waits until
// half the capacity is free, so a burst is read in large reads rather than
// many small ones.
//
// # Trimming
//
// A consumer trims the queue stream and its retry lane at most every trim
// interval (default 5 s), and only after it acknowledged, retried,
// dead-lettered or dropped entries of that stream since its last trim of
// it, since that is what lets the threshold move; an idle consumer makes no
// trim calls but one pass every 10 minutes (for what a retention, a
// removed group or other groups' progress freed). Each trim is one script: entries are
// removed only below the oldest entry some group still needs, that is the
// oldest pending entry of any group, or the first entry after a group's
// last-delivered id if it has none pending. A lagging or stalled group
// therefore keeps everything it has not acknowledged; memory is bounded by
// the slowest group. [WithRetention] keeps acknowledged entries longer;
// [WithoutTrim] turns trimming off for a consumer. A stream without groups
// is never trimmed. Consumers idle for [WithStaleConsumerAfter] (1 h) with
// no pending entries are removed from the group; a consumer with pending
// entries never is.
//
// # Delivery counts and attempts
//
// Message.Attempt counts handler failures (1, 2, ... up to WithMaxAttempts,
// default 10); Message.Deliveries counts how often the same stream entry was
// delivered (1, or more after reclaims, up to WithMaxDeliveries, default 5).
// An entry handed back at shutdown counts one more delivery when it is
// reclaimed.
package group
