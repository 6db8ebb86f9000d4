// Package delaystream is acknowledged delayed delivery on Redis: a program
// hands it a message and a time ("cancel unpaid order 5001 in 30 min",
// "retry this webhook in 5 s"); the message waits in Redis until it is due,
// is then appended to a Redis stream, and every consumer group of that
// stream receives it, acknowledges it, and retries or dead-letters it on
// its own.
//
// This package is the front door: a [Queue] is one queue's producer, mover
// and consumer groups, built from one redis.UniversalClient and one set of
// options (prefix, codec, logger, drain timeout), so its parts cannot
// disagree, and run under one [Queue.Run] with one drain:
//
//	q, err := delaystream.New(rdb, "orders")
//	res, err := q.Schedule(ctx, delaystream.Message{ID: "order:5001:cancel", Payload: p},
//		delaystream.After(30*time.Minute))
//	_, err = q.Handle("billing", bill, group.WithWorkers(8)) // a consumer group
//	_, err = q.Handle("audit", audit)                        // fan-out: another group
//	err = q.Run(ctx)                                         // promotion + every group
//
// Run as many processes with the same Queue as you like: the mover's lease
// makes one of them promote at a time, and every process adds consumers to
// each group. A process that must not promote uses [WithoutPromotion].
// Several queues are several Queues, run side by side (an errgroup, say).
//
// The parts stay usable on their own, for programs that wire them
// themselves:
//
//	codec     codecs (msgpack default, JSON, raw) and the versioned envelope encoding
//	stream    key layout, stream entry format, stream and group info, quarantine
//	delay     the producer: schedule (After / At), batch, cancel, reschedule, get, stats,
//	          duplicate policy (Keep by default), Typed[T]
//	mover     promotion of due messages into streams: batching, wake-ups, leases
//	group     consumer groups: read, handle, ack, per-group retries, reclaim, dead letters, trimming
//
// and, not importable by users:
//
//	internal/scripts    the Lua scripts, one per state transition, embedded
//	internal/wire       the storage formats: envelope, member kinds, ids, entry fields
//	internal/engine     the promotion loop behind mover and the groups' retry lanes
//	internal/optcheck   the option checks the packages share
//	internal/redistest  throwaway redis-server processes for tests
//
// # Guarantees
//
//   - Never early, by the Redis clock: due times are computed and compared
//     in Lua scripts that read Redis TIME, so skew between application
//     hosts cannot make a message early.
//   - Exactly-once promotion: one script moves a due message into the
//     stream and removes it from the waiting set, however many movers run.
//   - At-least-once delivery per consumer group, with retries and dead
//     letters per group: a failure in one group never re-delivers to
//     another.
//   - Nothing dropped silently: undeliverable entries end in a quarantine
//     or dead-letter stream with a reason, and are counted.
//
// # Dependencies between packages
//
// The import graph is a DAG with codec at the bottom; A ← B means B
// imports A:
//
//	codec ← internal/wire ← stream ← delay ──────────┐
//	                                 ← internal/engine ← mover ─┤
//	                                                  ← group ──┴─ delaystream (the front door)
//
//	delaystream, stream, delay, group ← admin (the operator API: any queue by name)
//
//	internal/scripts   ← delay, internal/engine, group
//	internal/optcheck  ← delay, internal/engine, group, delaystream
//	internal/redistest ← tests only
//	internal/seedtest  ← tests of admin and cmd/delaystream only
//
// delay, mover and group also import codec directly. No package but the
// front door and admin imports delay: producers and consumers share only the key
// layout and the entry format, both owned by stream, and the envelope,
// owned by codec.
//
// # Modules
//
// The core module, github.com/delaystream/delaystream, depends only on
// go-redis v9, msgpack v5 and golang.org/x/sync (testify and miniredis for
// its tests). The runnable programs (examples), the tests against real
// Redis servers, Cluster and faults (integration) and the benchmark
// against asynq (bench, run with make bench) are separate modules, so
// users never inherit their dependencies; a committed go.work joins them
// for development. Redis 7.0 or newer is supported, standalone or Cluster
// (every key of a queue shard shares one hash tag); Go 1.26.
//
// delaystream is pre-1.0: the Go API may change between minor versions.
// The Redis key layout carries a version segment, so a release that
// changes it never mixes old and new keys.
package delaystream
