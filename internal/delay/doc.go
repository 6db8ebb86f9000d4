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
// # Group commit
//
// Services schedule from request handlers, one message per call, from many
// goroutines; a script call per message would cost Redis most of its time
// in per-call overhead. So concurrent [Queue.Schedule] calls share script
// calls, as a database commits the transactions that wait on one log
// flush together. A call that finds no call of its group in flight sends
// its message at once, alone: a lone caller waits for nothing. Calls that
// arrive while one is in flight queue up; when it returns, the oldest
// queued caller sends every queued message (up to the batch size, see
// [WithBatchSize], and about 1 MiB) as one call, like [Queue.ScheduleBatch]:
// one script call per shard, in one pipeline. The sender is always one of
// the waiting callers; nothing runs in the background. A group is the
// queue, or, for a sharded queue on a Redis Cluster client, each master:
// masters do not wait for each other.
//
// Each caller still gets its own [Result] and error: its own duplicate
// outcome (a Rejected call returns [ErrDuplicate], alone), its shard's
// script error, the error of the whole call if it failed (every caller in
// it gets it), and under [WithReplicaAck] its call's WAIT (one per call).
// Invalid input is refused at the call, before it waits. Messages with one
// id are applied in the order their callers arrived, with each message's
// own policy, exactly as separate calls made one after the other.
//
// A caller whose ctx ends while it waits returns an error wrapping
// ctx.Err() at once, without failing the others. If no call had taken its
// message yet, nothing was written; if one had, the message may still be
// written, as when a lone call is cancelled while its command is on the
// wire (the outcome is [Unknown]; under [Keep], scheduling it again with
// its id is safe). The caller sending a call waits for it to return. A
// call carrying several callers' messages is made under the sender's ctx
// values but not its cancellation, with the latest deadline among its
// callers (none if one has none), so that no caller's ctx fails the call
// for the others. [WithoutGroupCommit] turns all this off.
//
// # Concurrency and ownership
//
// A Queue is safe for concurrent use, starts no goroutines that outlive a
// call and holds no resources of its own. It borrows the redis.UniversalClient it is given
// (a single server, Sentinel or Cluster client) and never closes it. Every
// key of a queue shard carries the shard's hash tag (see package stream),
// so every script runs on Redis Cluster.
package delay
