// Package dstest runs a delaystream queue inside a unit test, on an
// embedded Redis server (miniredis) whose clock stands still, so that an
// application tests its scheduling logic and its handlers without a
// redis-server, and without goroutines or sleeps in the test.
//
// [New] returns a [Queue]: a *delaystream.Queue, embedded, for the code
// under test, on a server of its own that the test's end closes. The
// application sets it up as in production: it schedules on it and adds
// its groups with Handle (or delaystream.HandleTyped), with their
// options. The server's clock is what the queue's scripts read as the
// time: it starts at the current time and moves only with
// [Queue.Advance]. Then:
//
//   - [Queue.Scheduled] lists what waits, in due order, with due times,
//     payloads and headers;
//   - [Queue.Advance] makes whatever its new time reaches due, and
//     q.Reschedule(ctx, id, delaystream.At(q.Now())) makes one message due;
//   - [Queue.Work] runs one of the application's groups over every message
//     due, until none is left, and returns what happened to each:
//     acknowledged, retried and when, dead-lettered and why;
//   - [Queue.Settle] runs a group through its retries, moving the clock
//     through backoffs and snoozes, and returns each message's deliveries.
//
// A test of scheduling logic and of its handler:
//
//	func TestPlaceOrder(t *testing.T) {
//		q := dstest.New(t, "orders")
//		shop, err := NewShop(q.Queue) // adds the "billing" group with its options
//		require.NoError(t, err)
//		require.NoError(t, shop.PlaceOrder(ctx, 5001))
//
//		waiting, err := q.Scheduled(ctx)
//		require.NoError(t, err)
//		require.Len(t, waiting, 1)
//		assert.WithinDuration(t, q.Now().Add(30*time.Minute), waiting[0].Due, 0)
//
//		q.Advance(30 * time.Minute)
//		done, err := q.Work(ctx, "billing")
//		require.NoError(t, err)
//		assert.Equal(t, delaystream.HandlerAcked, done[0].Outcome)
//	}
//
// Work runs the group as Run would, with the handler and options it was
// given and the same code for retries, backoff, attempts, dead letters,
// middleware, timeouts and flow limits, by the server's clock: a retry
// after a 1 s backoff is delivered by the Work after Advance(time.Second),
// not before, and a message's deadline ([delaystream.Message].Deadline,
// [delaystream.WithExpireAfter]) passes when Advance passes it. It runs
// one handler at a time, so that outcomes come in a fixed order. Between
// Work calls nothing runs. Each group gets every message, whenever its
// first Work is.
//
// What the server's clock does not govern: handler timeouts run in real
// time. The server is one miniredis: sharded queues
// ([delaystream.WithShards]) work on it; a Cluster's behaviour, and
// [delaystream.WithReplicaAck], which waits for replicas, need real
// servers.
package dstest
