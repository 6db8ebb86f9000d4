// Package delaystream is acknowledged delayed delivery on Redis: a program
// hands it a message and a time ("cancel unpaid order 5001 in 30 min",
// "retry this webhook in 5 s"); the message waits in Redis until it is due,
// is then appended to a Redis stream, and every consumer group of the queue
// receives it, acknowledges it, and retries or dead-letters it on its own.
//
// A [Queue] is one queue's scheduling, promotion and consumer groups, built
// from one redis.UniversalClient and one set of [Option]s, and run under one
// [Queue.Run]:
//
//	q, err := delaystream.New(rdb, "orders")
//	res, err := q.Schedule(ctx, delaystream.Message{ID: "order:5001:cancel", Payload: p},
//		delaystream.After(30*time.Minute))
//	_, err = q.Handle("billing", bill, delaystream.WithWorkers(8)) // a consumer group
//	_, err = q.Handle("audit", audit)                              // every group gets every message
//	err = q.Run(ctx)                                               // promotion and every group
//
// A [Handler] returns nil to acknowledge, an error to retry after the
// group's [Backoff], or one of [DeadLetter], [Drop], [RetryAfter] and
// [Snooze] to decide otherwise; [GroupOption]s set workers, attempts,
// timeouts and [Middleware]. [Schedule], [Get] and [HandleTyped] carry typed
// payloads through the queue's codec.
//
// [Queue.DefineRecurring] stores a recurring schedule ([Every], or cron
// from the contrib/cron module) in Redis; every promoting process fires
// it, once per occurrence, with no leader.
//
// Run as many processes with the same queue as you like: one of them
// promotes at a time, and each adds a consumer to every group it handles.
// A Cluster spreads a queue over its masters with [WithShards].
//
// # Guarantees
//
//   - Never early, by the Redis clock, whatever the skew between hosts.
//   - Exactly-once promotion: one script moves a due message into the
//     stream and removes it from the waiting set.
//   - At-least-once delivery per group, with retries and dead letters per
//     group: a failure in one group never re-delivers to another.
//   - Nothing dropped silently: what cannot be delivered ends in a
//     quarantine or dead-letter stream with a reason, and is counted.
//
// Package admin reads and acts on any queue by name, for operators;
// package dstest runs a queue on an embedded server in users' unit tests,
// with a clock the test moves. The guides in the repository's docs/
// describe the data model, sharding, failure behaviour and operations.
package delaystream
