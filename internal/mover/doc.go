// Package mover promotes due messages: it moves every message of a queue
// whose due time has passed (by the Redis clock) from the queue's delayed
// set into its stream, where every consumer group receives it. Run at least
// one [Mover] per queue, in any process; run several for availability.
//
//	m, err := mover.New(rdb, "orders")
//	if err != nil {
//		return err
//	}
//	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
//	defer stop()
//	return m.Run(ctx) // blocks; nil after ctx is cancelled
//
// # Guarantees
//
//   - Never early. The promote script reads Redis TIME and takes only
//     entries whose due time is at or before it; the mover's own clock only
//     decides when to ask, never what is due. Clock skew between hosts can
//     make nothing early.
//   - Exactly once into the stream. One script call appends an entry to the
//     stream and removes it from the delayed set and the envelopes, so a
//     message is appended once however many movers run and whenever they
//     crash. Delivery to consumers is then at least once per group (see
//     package group).
//   - Nothing dropped silently, nothing misattributed. Anything may have
//     been written into a delayed set. A due member whose envelope is
//     missing or not in a format this version knows, whose score is not a
//     due time, or which is of no kind this version knows (an empty member,
//     a future kind during a rolling upgrade) is moved to the lane's
//     quarantine stream with its bytes and a reason (the stream.Reason
//     constants), counted ([Counters].Quarantined), reported to
//     [Hooks].OnPromote and logged; read it with stream.ReadQuarantine.
//     Every other message of the batch is promoted with its own envelope.
//   - Bounded work. Each call moves at most the batch size (default 256)
//     entries; the mover calls again at once while batches are full.
//
// # Timing and idle cost
//
// After each call the mover sleeps until the next due time, on a Go timer.
// A producer that schedules an entry earlier than the current head
// publishes its due time on the lane's wake channel, and the sleeping mover
// wakes for it, so lateness is a few milliseconds. When nothing is due
// within the max idle (default 1 s), a lane is idle: the mover makes no
// promote calls for it, and probes the head of its delayed set with one
// ZRANGE, which catches a lost wake-up. The idle lanes of a mover share one
// probe per max idle, taken in turn: with one lane (an unsharded queue)
// that is one probe per max idle, and an entry whose wake-up was lost is
// promoted at most the max idle late; with n idle shards each is probed
// every n × max idle, at least every 30 s, so a lost wake-up on one of many
// idle shards may take that long to be noticed, while the idle cost stays
// about one probe per max idle whatever the shard count (up to 30 shards
// per mover; beyond, n / 30 s). A lane that knows its next due time sleeps
// to it exactly, however far. The probe decides only when to call;
// due-ness is decided by the promote script on the Redis clock. After the
// pub/sub connection reconnects (wake-ups published meanwhile are lost),
// the mover checks every lane at once.
//
// # Several movers: lease and standby
//
// Each lane has a lease key, taken only for work: a promote call that finds
// entries due takes (or renews) the lease, a call that finds nothing due
// leaves it, so an idle lane's lease lapses and an idle lane has no holder.
// While entries keep coming due, the mover holding the lease promotes them
// and renews it (default TTL 1.25 s, always longer than the max idle) with
// every call; the others are standbys: their call finds the lease taken,
// does nothing, and they check again when it would lapse, about once per
// lease TTL. Extra movers therefore cost about one call per second each,
// not more work. A mover that stops cleanly releases the lease and
// publishes a wake-up, so a standby takes over at once; a mover that
// crashes is replaced when its lease lapses, within the lease TTL (1.25 s)
// of its last call. [WithoutLease] lets every mover promote on its own
// schedule: still exactly once, at the price of more Redis load.
//
// # Sharded queues
//
// A queue split into S shards ([WithShards]; every part of the queue uses
// the same count, recorded in Redis at first use) has S main lanes, each
// under its own Cluster hash tag. Its movers divide the shards between
// them with a registry of live movers kept in Redis (a ZSET under the
// queue's own hash tag; no other infrastructure): each mover registers
// with a token and renews its registration every third of the lease TTL
// (default every 417 ms; it lapses after two periods, 833 ms), and the mover of
// rank k among the N live tokens, sorted, owns the shards i with
// i % N == k, an even split ([Mover.Owned], [Hooks].OnOwnership). A mover
// promotes only the shards it owns, without leases, and makes no calls at
// all for the others. A mover that joins or stops cleanly (it leaves the
// registry, within 1 s) announces it on the queue's movers channel and the
// others renew at once, so a join or a leave settles within milliseconds
// (about 20 ms in the tests; the target is 2 s); a mover that crashes is
// dropped by the next renewal of another mover after its registration
// lapsed, so its shards are taken over within the lease TTL (0.83 s
// measured; 1.25 s at most at the defaults). A mover that cannot renew (the registry's node failed, a
// network split, a broken registry key) keeps promoting the shards of its
// last view, or every shard if it never had one, until a renewal succeeds:
// the shards on healthy nodes stay promoted through the registry node's
// failover, at the cost of calls while two movers may promote one shard
// (failures go to [Hooks].OnError with the registry's key). Ownership only saves work: promotion stays one atomic script per
// shard, so two movers that both promote a shard during a rebalance never
// append a message twice, and a message is never lost to a rebalance.
//
// Every lane announces appended entries on its arrivals channel
// (stream.Lane.Arrivals; payload: the shard number) from the promote
// script that appends them, so that consumers of a sharded queue read the
// shards that have work, and consumers of any queue run reclaim passes
// only on streams that may have entries pending. A sharded queue's wake and
// arrivals channels are shard channels (SPUBLISH / SSUBSCRIBE), delivered
// by the node that holds the shard: a classic PUBLISH on a Cluster is
// relayed to every node over the cluster bus, which costs every node CPU
// and, measured on Redis 7.0, up to ~40 ms per message. A mover subscribes
// to its wake channels with one connection per node that holds shards,
// and to the movers channel with one more, and a
// mover has at most 4 promote calls or probes in flight at once, so the
// connections it takes from the client's pool do not grow with the shard
// count.
//
// Idle, a mover of a sharded queue costs its renewals, each four commands
// as INFO commandstats counts them (EVALSHA, and TIME, ZRANGE and ZADD in
// the script), plus one probe per max idle: about 10.3 commands/s per mover
// at the defaults (measured with 2 movers on 16 shards: 2.33 renewals/s and
// 1.0 probe/s per mover, 3.3 round trips/s), whatever the shard count up to
// 30 shards per mover. A longer lease TTL makes renewals rarer, and a
// crash's takeover slower, in proportion.
//
// # Lifecycle
//
// [New] validates its arguments and options, talks to no server and starts
// nothing. [Mover.Run] first checks that the queue's shard count recorded
// in Redis is the Mover's (recording it for a new queue): on a mismatch it
// returns an error wrapping stream.ErrShardCount at once, having written
// nothing, and while the check fails it retries with backoff. It then
// subscribes to the wake channels, promotes until its ctx is cancelled,
// then releases its leases (or leaves the registry) and returns nil; a
// second concurrent Run returns [ErrRunning], and a stopped Mover may be
// run again.
// Failed calls are retried with backoff (50 ms doubling up to the max
// idle); Run does not return on them. A passing failure (network, timeout,
// a server loading or failing over) is logged at Warn when it starts, then
// at most every 30 s while it lasts. A failure that repeats until someone
// fixes the lane's keys or data (a key of the wrong type, named in a
// stream.KeyTypeError; an error reply from the script) is logged at Error
// as a stuck lane, at once and then once a minute, and counted in
// [Counters].Stuck. Every failed call goes to [Hooks].OnError; the first
// success after a logged run of failures is logged at Info. Shutdown takes at most
// one in-flight promote call (bounded by a 5 s timeout) plus a lease
// release or registry leave (bounded by 1 s); from an idle sleep it is
// immediate. The Mover
// borrows its redis.UniversalClient and never closes it, and it never
// installs signal handlers. Counters and hooks report what it does:
// [Mover.Counters], [Hooks].
package mover
