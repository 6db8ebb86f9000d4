package delaystream_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream"
)

// Every fires at multiples of its interval since the Unix epoch, the
// same instants in every process.
func ExampleEvery() {
	spec := delaystream.Every(15 * time.Minute)
	t := time.Date(2026, 11, 28, 9, 7, 0, 0, time.UTC)
	for range 3 {
		t = spec.Next(t)
		fmt.Println(t.Format("15:04"))
	}
	// Output:
	// 09:15
	// 09:30
	// 09:45
}

// A recurring schedule, defined by any process (defining it again with
// the same definition changes nothing) and fired by whichever processes
// run the queue, once per occurrence. Compile-only: it needs a server.
func ExampleQueue_DefineRecurring() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	q, err := delaystream.New(rdb, "reports")
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	out, err := q.DefineRecurring(ctx, delaystream.Recurring{
		ID:      "poll-partner",
		Spec:    delaystream.Every(30 * time.Second),
		Payload: []byte(`{"partner":"acme"}`),
		Missed:  delaystream.SkipMissed,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(out) // created, then kept
	_, _ = q.Handle("poller", func(_ context.Context, d *delaystream.Delivery) error {
		fmt.Println("poll for the occurrence at", d.Headers[delaystream.HeaderOccurrence])
		return nil
	})
	_ = q.Run(ctx)
}
