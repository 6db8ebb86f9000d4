package delaystream_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream"
)

// exampleClient returns a client of an embedded Redis (miniredis), so that
// the examples run anywhere; a program passes its own client.
func exampleClient() (*redis.Client, func()) {
	mr, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	return rdb, func() { rdb.Close(); mr.Close() }
}

// quiet keeps the examples' output to what they print.
var quiet = delaystream.WithLogger(slog.New(slog.DiscardHandler))

// One queue, two consumer groups, one Run: every group gets every message.
func ExampleNew() {
	rdb, done := exampleClient()
	defer done()
	q, err := delaystream.New(rdb, "orders", quiet)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()

	// Due 50 ms from now by the Redis clock (in a shop: 30 minutes).
	_, err = q.Schedule(ctx, delaystream.Message{ID: "order:5001:cancel", Payload: []byte(`{"order":5001}`)},
		delaystream.After(50*time.Millisecond))
	if err != nil {
		fmt.Println(err)
		return
	}
	var mu sync.Mutex
	var seen []string
	record := func(what string) {
		mu.Lock()
		defer mu.Unlock()
		if seen = append(seen, what); len(seen) == 2 {
			stop() // both groups have it: stop the example
		}
	}
	_, err = q.Handle("billing", func(ctx context.Context, d *delaystream.Delivery) error {
		record("billing cancels " + d.ID)
		return nil // acknowledge; an error retries in this group only
	}, delaystream.WithWorkers(8))
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = q.Handle("audit", func(ctx context.Context, d *delaystream.Delivery) error {
		record("audit records " + d.ID)
		return nil
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	// Promotion and both groups; nil once ctx is cancelled and the
	// in-flight handlers are done.
	if err := q.Run(ctx); err != nil {
		fmt.Println("queue stopped:", err)
	}
	sort.Strings(seen)
	fmt.Println(seen[0])
	fmt.Println(seen[1])
	// Output:
	// audit records order:5001:cancel
	// billing cancels order:5001:cancel
}

// Typed payloads go through the queue's codec (msgpack by default).
func ExampleHandleTyped() {
	rdb, done := exampleClient()
	defer done()
	type CancelOrder struct{ OrderID int }
	q, err := delaystream.New(rdb, "orders", quiet)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	if _, err = delaystream.Schedule(ctx, q, delaystream.Message{ID: "order:5001:cancel"}, CancelOrder{OrderID: 5001}, delaystream.After(0)); err != nil {
		fmt.Println(err)
		return
	}
	_, err = delaystream.HandleTyped(q, "billing", func(ctx context.Context, d *delaystream.Delivery, c CancelOrder) error {
		fmt.Println("cancel order", c.OrderID)
		stop()
		return nil
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(q.Run(ctx))
	// Output:
	// cancel order 5001
	// <nil>
}

// A waiting message can be read, moved and cancelled by its id until it is
// due.
func ExampleQueue_Reschedule() {
	rdb, done := exampleClient()
	defer done()
	type Reminder struct{ User string }
	q, err := delaystream.New(rdb, "reminders")
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	due := time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC)
	if _, err := delaystream.Schedule(ctx, q, delaystream.Message{ID: "user:42:remind"}, Reminder{User: "42"}, delaystream.At(due)); err != nil {
		fmt.Println(err)
		return
	}
	r, env, err := delaystream.Get[Reminder](ctx, q, "user:42:remind")
	fmt.Println(r.User, env.Due.UTC().Format(time.RFC3339), err)

	moved, err := q.Reschedule(ctx, "user:42:remind", delaystream.At(due.Add(time.Hour)))
	fmt.Println(moved.UTC().Format(time.RFC3339), err)

	cancelled, err := q.Cancel(ctx, "user:42:remind")
	fmt.Println(cancelled, err)
	_, err = q.Get(ctx, "user:42:remind")
	fmt.Println(errors.Is(err, delaystream.ErrNotFound))
	// Output:
	// 42 2030-01-01T09:00:00Z <nil>
	// 2030-01-01T10:00:00Z <nil>
	// true <nil>
	// true
}

// A handler chooses its next attempt: a webhook answered 429 with
// Retry-After asks for a retry then; a dependency not ready yet snoozes
// without spending an attempt.
func ExampleRetryAfter() {
	rdb, done := exampleClient()
	defer done()
	q, err := delaystream.New(rdb, "webhooks", quiet)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	if _, err := q.Schedule(ctx, delaystream.Message{ID: "hook:1"}, delaystream.After(0)); err != nil {
		fmt.Println(err)
		return
	}
	calls := 0
	_, err = q.Handle("deliver", func(ctx context.Context, d *delaystream.Delivery) error {
		calls++
		fmt.Println("call", calls, "attempt", d.Attempt)
		switch calls {
		case 1:
			return delaystream.Snooze(10 * time.Millisecond) // not counted
		case 2:
			return delaystream.RetryAfter(10*time.Millisecond, errors.New("429 Too Many Requests"))
		}
		stop()
		return nil
	}, delaystream.WithWorkers(1))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(q.Run(ctx))
	// Output:
	// call 1 attempt 1
	// call 2 attempt 1
	// call 3 attempt 2
	// <nil>
}

// Middleware wraps every handler of a group, the first given outermost; a
// handler timeout bounds each attempt.
func ExampleWithMiddleware() {
	rdb, done := exampleClient()
	defer done()
	q, err := delaystream.New(rdb, "orders", quiet)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	if _, err := q.Schedule(ctx, delaystream.Message{ID: "order:7", Headers: map[string]string{"tenant": "acme"}}, delaystream.After(0)); err != nil {
		fmt.Println(err)
		return
	}
	logging := func(next delaystream.Handler) delaystream.Handler {
		return func(ctx context.Context, d *delaystream.Delivery) error {
			fmt.Println("start", d.ID)
			err := next(ctx, d)
			fmt.Println("end", d.ID, err)
			return err
		}
	}
	tenant := func(next delaystream.Handler) delaystream.Handler {
		return func(ctx context.Context, d *delaystream.Delivery) error {
			if d.Headers["tenant"] == "" {
				return delaystream.DeadLetter(errors.New("no tenant"))
			}
			return next(ctx, d)
		}
	}
	_, err = q.Handle("billing", func(ctx context.Context, d *delaystream.Delivery) error {
		fmt.Println("bill", d.Headers["tenant"])
		stop()
		return nil
	}, delaystream.WithMiddleware(logging, tenant), delaystream.WithHandlerTimeout(5*time.Second))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(q.Run(ctx))
	// Output:
	// start order:7
	// bill acme
	// end order:7 <nil>
	// <nil>
}

// What a group cannot deliver lands in its dead letters, with a reason;
// once the cause is fixed, Redrive schedules it again.
func ExampleGroup_Redrive() {
	rdb, done := exampleClient()
	defer done()
	q, err := delaystream.New(rdb, "orders", quiet)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	if _, err := q.Schedule(ctx, delaystream.Message{ID: "order:9"}, delaystream.After(0)); err != nil {
		fmt.Println(err)
		return
	}
	billing, err := q.Handle("billing", func(ctx context.Context, d *delaystream.Delivery) error {
		return errors.New("card declined")
	}, delaystream.WithMaxAttempts(2), delaystream.WithBackoff(delaystream.ConstantBackoff(10*time.Millisecond)),
		delaystream.WithHooks(delaystream.Hooks{OnDeadLettered: func(*delaystream.Delivery, string) { stop() }}))
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := q.Run(ctx); err != nil {
		fmt.Println(err)
		return
	}
	dead, err := billing.DeadLetters(context.Background(), "", 10)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, d := range dead {
		fmt.Println(d.ID, "|", d.Reason, "|", d.LastError, "| attempt", d.Attempt)
	}
	n, err := billing.Redrive(context.Background(), 0)
	fmt.Println("redriven", n, err)
	// Output:
	// order:9 | attempts exhausted | card declined | attempt 2
	// redriven 1 <nil>
}

// A queue sharded over a Redis Cluster's masters: every process using the
// queue must be built with the same count. Compile-only: it needs a
// cluster (the runnable version is examples/cluster).
func ExampleWithShards() {
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:7000"}, MaxRedirects: 8})
	defer rdb.Close()
	q, err := delaystream.New(rdb, "reminders", delaystream.WithShards(16))
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = q.Schedule(context.Background(), delaystream.Message{ID: "user:42:remind"}, delaystream.After(time.Hour))
	if errors.Is(err, delaystream.ErrShardCount) {
		fmt.Println("the queue was created with another shard count")
	}
}
