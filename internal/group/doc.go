// Package group turns a queue's stream of due messages into acknowledged,
// retried, recoverable work for any number of independent consumer groups.
// The root package's Queue.Handle builds one [Consumer] per group and
// Queue.Run runs them; a Consumer is one member of its group, and a group
// may have members in as many processes as you like.
//
//	c, err := group.New(rdb, "orders", "billing", func(ctx context.Context, m *group.Message) error {
//		return bill(ctx, m.ID, m.Payload)
//	}, group.WithWorkers(8))
//	...
//	err = c.Run(ctx) // blocks until ctx is cancelled
//
// # Model
//
// Every group reads the queue stream with XREADGROUP, so every group gets
// every due message; groups share nothing else. Each group also owns a
// retry lane (its own delayed set, envelopes and stream, under the queue's
// hash tag, promoted by the group's consumers with the same script as the
// queue) and a dead-letter stream.
//
// # Guarantees
//
//   - At least once per group: an entry is acknowledged only after its
//     handler returned nil. A crashed consumer's entries stay pending and
//     another consumer takes them over with XAUTOCLAIM once idle for the
//     visibility timeout. Handlers should be idempotent.
//   - Per-group retries: a failure acknowledges the entry and schedules the
//     next attempt in this group's retry lane after the backoff, in one
//     script, due by the Redis clock. Other groups never see it.
//   - Nothing dropped silently: exhausted attempts, poison entries (more
//     than the max deliveries), undecodable entries, expired messages and
//     [DeadLetter] requests go to the dead letters with a reason, in one
//     script with the acknowledgement; [Drop] acknowledges without retry and
//     is counted. [DeadLetters] lists, redrives and purges them.
//   - A handler that runs long keeps its entry: every third of the
//     visibility timeout the consumer extends its hold after checking that
//     it still owns the entry; if another consumer took it anyway, the
//     handler's ctx is cancelled.
//   - No ordering across messages: up to WithWorkers handlers run at once,
//     and retries come back later.
//
// # Lifecycle
//
// [New] validates and starts nothing. [Consumer.Run] creates the group if
// needed (at the start of the retained stream unless [WithStartAtNew]),
// then reads (ahead of its free workers, see [WithPrefetch]), handles,
// acknowledges in batches, reclaims, extends, trims and promotes the retry
// lane. Unless built [WithoutPromotion], it also keeps the queue promoted:
// one mover per process and client, sharing the work with every other
// mover (the root package's Queue builds its consumers without, and runs
// one mover itself). Reads and reclaim passes follow the movers' announcements of new
// entries, so an idle group makes almost no calls. Trimming removes only
// entries below the oldest one some group still needs, so a stalled group
// keeps everything it has not acknowledged ([WithRetention] keeps more).
// Cancelling Run's ctx stops reading at once; entries read ahead are
// handed back at once, in-flight handlers get the drain timeout, then
// their ctx is cancelled and their entries handed back, so that the next
// reclaim pass of any consumer of the group takes them. Run returns nil
// after a requested stop.
//
// # Flow control
//
// A group paused in Redis (package flow) makes its consumers read, reclaim
// and start nothing until it is resumed (pause.go); a group with limits
// ([WithConcurrencyLimit], [WithRateLimit]) reads only for the permits the
// limiter grants it (limit.go). A group without limits makes no call for
// them on its read path.
//
// # Crashed work first
//
// Entries reclaimed from a dead consumer are handled before fresh reads
// take a limited group's slots and rate permits, so that takeover time
// does not grow with a backlog: they are handled again within the
// visibility timeout, plus the reclaim interval, plus the time the first
// slots take to free (one handler time under a full cap). A consumer
// keeps the entries it reclaimed and got no permits for, rather than
// handing them back: they stay held (extended, their room kept) but are
// not queued, and their count is recorded in the group's flow state,
// "r:<consumer>" next to the consumer's slots and with the same deadline
// (one visibility timeout, renewed by each of its calls). flow.lua grants
// a fresh read no slot that recorded entries wait for and no rate permit
// while any are recorded, and grants the reclaimer's own calls as if none
// were; it announces a freed slot to the waiting reclaimer like any
// other, so the entries take the next slots that free, in whichever
// process. The record is removed as its entries are granted, when they
// are handed back (the consumer stops, or the group is paused) and when
// the consumer stops; if the consumer dies, it lapses at its deadline,
// like its slots. So a reclaimer holds fresh reads off for no longer than
// it lives and waits, never for ever. Handing the entries back instead,
// for a later pass to claim again, fails again and again under a full
// cap: fresh reads take each slot the moment it frees.
//
// Message.Attempt counts handler failures (up to [WithMaxAttempts]);
// Message.Deliveries counts how often one stream entry was delivered (up
// to [WithMaxDeliveries]).
package group
