package admin_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/admin"
	"github.com/delaystream/delaystream/internal/redistest"
)

// Find the queues under a prefix, read their figures, look at what waits
// and act on one message, all by name.
func Example() {
	// A throwaway redis-server for this example; use your own client.
	srv, err := redistest.Spawn()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Stop()
	tc, err := redistest.LoadTLSConfig()
	if err != nil {
		fmt.Println(err)
		return
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, TLSConfig: tc})
	defer rdb.Close()
	ctx := context.Background()

	// An application schedules two messages on queue "orders".
	q, err := delaystream.New(rdb, "orders")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, id := range []string{"order:5001:cancel", "order:5002:cancel"} {
		if _, err := q.Schedule(ctx, delaystream.Message{ID: id, Payload: []byte("{}")}, delaystream.After(time.Hour)); err != nil {
			fmt.Println(err)
			return
		}
	}

	// An operator tool knows only the server and the prefix.
	in, err := admin.New(rdb, "")
	if err != nil {
		fmt.Println(err)
		return
	}
	queues, err := in.Queues(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, qi := range queues {
		fmt.Printf("queue %s, %d shard\n", qi.Name, qi.Shards)
	}
	reports, err := in.Stats(ctx, "orders")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("waiting:", reports[0].Waiting, "overdue:", reports[0].Overdue)

	// Make the first one overdue (no promotion runs here), cancel the
	// second.
	orders, err := in.Queue(ctx, "orders")
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := orders.Reschedule(ctx, "order:5001:cancel", delaystream.At(time.Now().Add(-time.Minute))); err != nil {
		fmt.Println(err)
		return
	}
	if _, err := in.Cancel(ctx, "orders", admin.ActionOptions{IDs: []string{"order:5002:cancel"}}); err != nil {
		fmt.Println(err)
		return
	}
	msgs, err := in.Peek(ctx, "orders", admin.ListOptions{Limit: 10})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, m := range msgs {
		fmt.Println(m.ID, "overdue:", m.Overdue)
	}
	// Output:
	// queue orders, 1 shard
	// waiting: 2 overdue: 0
	// order:5001:cancel overdue: true
}

// What each group of queue "orders" did in the last hour and day, as
// every process of the queue counted it in Redis. Compile-only: it needs a
// server.
func ExampleOperator_History() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	in, err := admin.New(rdb, "")
	if err != nil {
		fmt.Println(err)
		return
	}
	h, err := in.History(context.Background(), "orders")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("promoted in the last hour:", h.LastHour.Promoted)
	for name, g := range h.LastDay.Groups {
		fmt.Printf("%s, last day: %d handled, %d failed (%d dead-lettered)\n", name, g.Handled, g.Failed(), g.DeadLettered)
	}
}
