// Package delay is the producer side of delaystream: it stores messages in
// Redis until they are due. A mover (package mover) then appends each due
// message to the queue's stream, where every consumer group receives it.
//
//	q, err := delay.New(rdb, "orders")
//	if err != nil {
//		return err
//	}
//	res, err := q.Schedule(ctx, delay.Message{
//		ID:      "order:5001:cancel",
//		Payload: []byte(`{"order":5001}`),
//	}, delay.After(30*time.Minute))
//	// res.ID, res.Due (as stored), res.Outcome (Created, Replaced, Kept, Rejected)
//
// A [Queue] also schedules many messages at once ([Queue.ScheduleBatch]),
// cancels ([Queue.Cancel]), moves ([Queue.Reschedule]) and reads
// ([Queue.Get]) a waiting message by id, and reports [Queue.Stats] and
// [Queue.Len].
// [Typed] wraps a Queue to schedule values of a Go type through the
// queue's codec.
//
// # Due times and clocks
//
// Due-ness is decided by the Redis clock only. [After] is resolved inside
// the schedule script from Redis TIME (rounded up to the millisecond, as is
// the delay), so skew between application hosts cannot make a message
// early or late. [At] is an absolute time chosen by the caller, rounded up
// to the next millisecond; a time in the past is due at once. The mover
// appends a message to the stream only once its due time has passed by the
// same Redis clock: a message is never delivered early.
//
// # Guarantees
//
//   - Every write is one Lua script per chunk of messages: a message is
//     either stored completely (due time and envelope) or not at all.
//   - Invalid input (a bad id, an oversized payload, reserved or too many
//     headers, a zero or negative When, a due time after year 9999) is
//     refused at the call with an error wrapping [ErrInvalidMessage], before
//     anything is sent: nothing is written, not even the valid items of the
//     same batch.
//   - A message is promoted into the stream exactly once, however many
//     movers run (the promote script removes it from the waiting set as it
//     appends it). Cancel and promotion exclude each other: a message is
//     either cancelled or delivered, never both.
//   - Delivery to consumers is at least once per consumer group; handlers
//     should be idempotent.
//   - A Schedule call that fails (network error, timeout) may or may not
//     have written: the outcome is [Unknown]. Scheduling again with the
//     same id under [Keep] is safe.
//
// # Message ids and duplicates
//
// A message id identifies the message while it waits. An empty id gets a
// generated one: 26 characters in the ULID layout whose time part is the
// message's due time (by the Redis clock, so it is known once the schedule
// script has run) and whose last 16 characters are 80 random bits. Such a
// message is stored as one sorted-set member holding the envelope (see
// package stream, "Delayed-set members"), about 30 % less Redis memory than
// a message with a caller-chosen id, and is found by its id without an
// index. Generated ids sort by due time, not by creation time (the
// envelope's Created field has that). Scheduling an id that is still waiting applies the
// duplicate policy: [Keep] (the default) leaves the waiting message
// untouched, [Replace] overwrites its payload, headers and due time, and
// [Reject] refuses the new one (Schedule returns [ErrDuplicate]). Keep is
// the default because it makes scheduling idempotent: a producer that
// retries after a timeout can neither push a deadline back nor create a
// twin. Set the queue's policy with [WithDuplicatePolicy] and override it
// per message with [Message.OnDuplicate]. The policy only sees waiting
// messages: once promoted, an id may be scheduled again.
//
// # Wake-ups
//
// When a schedule or reschedule makes a message the earliest of its queue,
// the script publishes its due time on the queue's wake channel, so a
// sleeping mover wakes for it instead of waiting for its next check.
//
// # Sharded queues
//
// On Redis Cluster one queue's keys live in one hash slot, so on one
// master. [WithShards] spreads a queue over S shards, each a copy of its
// keys under its own hash tag (see stream.Layout); shard 0 of a queue of
// one shard is the unsharded layout itself. A message lives in the shard
// of its id, a stable hash of the id (for a generated id, of its random
// part, drawn before the message is sent), so [Queue.Cancel],
// [Queue.Reschedule] and [Queue.Get] still make one call, to one shard.
// [Queue.ScheduleBatch] groups its messages by shard and sends every
// shard's script calls in one pipeline (a Cluster client sends each node
// its share at once); [Queue.Stats] and [Queue.Len] add up the shards
// ([Queue.ShardStats] gives each shard's figures). The shard count is part
// of the queue: it is recorded in Redis on the queue's first use, and
// every producer, mover and consumer of the queue must be built with it.
// Each Queue checks it once, before its first call (one extra round trip,
// also with one shard); a Queue built with another count gets an error
// wrapping stream.ErrShardCount from every method that touches Redis and
// writes nothing.
//
// # Durable writes
//
// Redis replicates asynchronously: a write acknowledged by the master is
// lost if the master dies before a replica has it and that replica is
// promoted. [WithReplicaAck] closes that window for the producer: every
// write (schedule, cancel, reschedule) is followed, on the same connection
// of the master that took it, by WAIT, and the call returns once the asked
// number of replicas has the write or the timeout has passed. A nil error
// then means the write is on the master and that many replicas; fewer
// confirmations give the call's normal results with an error wrapping
// [ErrNotReplicated] (the write stands on the master; under [Keep] a
// message with its own id can be scheduled again safely). The cost is a
// master-to-replica round trip per call (per master for a batch).
// Promotion and consumption do not wait: after a failover a message the
// replica had not received yet may be delivered again (at least once),
// never lost once the producer's call was confirmed.
//
// # Concurrency and ownership
//
// A Queue is safe for concurrent use, starts no goroutines that outlive a
// call and holds no resources of its own. It borrows the redis.UniversalClient it is given
// (a single server, Sentinel or Cluster client) and never closes it. Every
// key of a queue shard carries the shard's hash tag (see package stream),
// so every script runs on Redis Cluster.
package delay
