// Package mover promotes due messages: it moves every message of a queue
// whose due time has passed (by the Redis clock) from the queue's delayed
// set into its stream, where every consumer group receives it. The root
// package's Queue.Run runs one [Mover] per process unless built
// WithoutPromotion; any number of processes may run one.
//
//	m, err := mover.New(rdb, "orders", mover.WithShards(16))
//	if err != nil {
//		return err
//	}
//	return m.Run(ctx) // blocks; nil after ctx is cancelled
//
// # Guarantees
//
//   - Never early: the promote script reads Redis TIME and takes only
//     entries due at or before it; the mover's clock only decides when to
//     ask.
//   - Exactly once into the stream: one script call appends an entry and
//     removes it from the delayed set, however many movers run and
//     whenever they crash.
//   - Nothing dropped silently: a member the mover cannot read is moved to
//     the lane's quarantine stream with its bytes and a reason, counted
//     ([Counters].Quarantined) and reported ([Hooks].OnPromote); the rest of
//     the batch is promoted.
//   - Bounded work: each call moves at most the batch size
//     ([DefaultBatchSize]); the mover calls again at once while batches are
//     full.
//
// # Timing
//
// After each call the mover sleeps until the next due time on a Go timer,
// and a producer that schedules an earlier message wakes it through the
// lane's wake channel. A lane with nothing due within the max idle
// ([DefaultMaxIdle]) makes no promote calls; the engine's idle lanes share
// one head probe per max idle, each lane at least every 30 s, which catches
// a lost wake-up.
//
// # Several movers
//
// An unsharded queue's lane has a lease, taken only for work: the mover
// holding it promotes, the others stand by and check about once per lease
// TTL ([DefaultLeaseTTL]). A mover that stops releases the lease and wakes
// the standbys; one that crashes is replaced when its lease lapses.
// [WithoutLease] lets every mover promote on its own. The movers of a
// sharded queue ([WithShards]) divide its shards through a registry of
// live movers in Redis: the mover of rank k among N owns the shards i with
// i % N == k ([Mover.Owned], [Hooks].OnOwnership); joins and clean leaves
// are announced so the others rebalance at once, and a crashed mover's
// registration lapses within the lease TTL. A mover that cannot reach the
// registry keeps promoting its last share. Ownership only saves work:
// promotion is one atomic script per shard, so a rebalance never appends a
// message twice.
//
// # Lifecycle
//
// [New] validates its options, talks to no server and starts nothing.
// [Mover.Run] checks the queue's shard count recorded in Redis (an error
// wrapping stream.ErrShardCount on a mismatch, having written nothing),
// subscribes to the wake channels, promotes until ctx is cancelled, then
// releases its leases or leaves the registry and returns nil; a second
// concurrent Run returns [ErrRunning]. Failed calls are retried with
// backoff and logged at a bounded rate; a lane whose keys or data are
// broken is logged as stuck and counted ([Counters].Stuck). Shutdown takes
// at most one in-flight promote call (bounded by 5 s) plus a lease release
// (bounded by 1 s). The Mover never closes its client and never installs
// signal handlers.
package mover
