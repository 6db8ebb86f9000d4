// Package delay is delaystream's producer: it stores messages in Redis
// until they are due. The root package schedules, cancels, reschedules and
// reads waiting messages, and reports their figures, through a [Queue]; a
// mover (internal/mover) later appends each due message to the queue's
// stream, where every consumer group receives it.
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
// Every write is a Lua script (internal/scripts) that reads the Redis
// clock: a message is stored whole or not at all, and its due time does
// not depend on this host's clock. Invalid input is refused before
// anything is sent ([ErrInvalidMessage]). A message whose id is already
// waiting meets its duplicate [Policy] ([Keep] by default, which makes
// scheduling again after a failed call safe). A sharded queue
// ([WithShards]) keeps each message in the shard of its id.
//
// Concurrent [Queue.Schedule] calls share script calls (group commit, see
// [WithoutGroupCommit]); [WithReplicaAck] makes every write wait for
// replicas with WAIT; and each write carries a call token, so that a
// command go-redis sends again after losing its reply does not act twice.
//
// A Queue is safe for concurrent use, starts no goroutines that outlive a
// call and borrows its redis.UniversalClient, which it never closes.
package delay
