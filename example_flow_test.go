package delaystream_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/delaystream/delaystream"
)

// A paused queue promotes nothing: a due message waits, counted as
// overdue, until the queue is resumed; then it is delivered.
func ExampleQueue_Pause() {
	rdb, done := exampleClient()
	defer done()
	q, err := delaystream.New(rdb, "mail", quiet)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	if err := q.Pause(ctx); err != nil { // the mail provider is down
		fmt.Println(err)
		return
	}
	if _, err := q.Schedule(ctx, delaystream.Message{ID: "welcome:42"}, delaystream.After(0)); err != nil {
		fmt.Println(err)
		return
	}
	_, err = q.Handle("send", func(ctx context.Context, d *delaystream.Delivery) error {
		fmt.Println("sent", d.ID)
		stop()
		return nil
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	go func() {
		// Run starts paused; an operator resumes once the provider is back.
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for range tick.C {
			st, err := q.Stats(ctx)
			if err == nil && st.Overdue == 1 {
				fmt.Println("paused:", !st.PausedSince.IsZero(), "overdue:", st.Overdue)
				_ = q.Resume(ctx)
				return
			}
		}
	}()
	if err := q.Run(ctx); err != nil {
		fmt.Println(err)
	}
	// Output:
	// paused: true overdue: 1
	// sent welcome:42
}

// A group limited to 2 messages at once over every process, and to 50
// per second with bursts of 5: for a partner API that takes no more.
func ExampleWithRateLimit() {
	rdb, done := exampleClient()
	defer done()
	q, err := delaystream.New(rdb, "webhooks", quiet)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	for _, id := range []string{"a", "b", "c"} {
		if _, err := q.Schedule(ctx, delaystream.Message{ID: id}, delaystream.After(0)); err != nil {
			fmt.Println(err)
			return
		}
	}
	var mu sync.Mutex
	var got []string
	_, err = q.Handle("partner", func(ctx context.Context, d *delaystream.Delivery) error {
		mu.Lock()
		defer mu.Unlock()
		if got = append(got, d.ID); len(got) == 3 {
			stop()
		}
		return nil
	}, delaystream.WithConcurrencyLimit(2), delaystream.WithRateLimit(50, time.Second, 5))
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := q.Run(ctx); err != nil {
		fmt.Println(err)
	}
	sort.Strings(got)
	fmt.Println(got)

	// Limits are checked when the group is added.
	_, err = q.Handle("other", func(context.Context, *delaystream.Delivery) error { return nil },
		delaystream.WithRateLimit(0, time.Second, 1))
	fmt.Println(errors.Is(err, delaystream.ErrInvalidOption))
	// Output:
	// [a b c]
	// true
}

// At most 20 messages per second for each customer, over every process:
// one customer's burst waits for its permits (snoozed, not held) while the
// other customers' messages go on.
func ExampleWithKeyRateLimit() {
	rdb, done := exampleClient()
	defer done()
	q, err := delaystream.New(rdb, "notifications", quiet)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	for i, customer := range []string{"acme", "acme", "acme", "globex"} {
		msg := delaystream.Message{ID: fmt.Sprintf("n%d", i), Headers: map[string]string{"customer": customer}}
		if _, err := q.Schedule(ctx, msg, delaystream.After(0)); err != nil {
			fmt.Println(err)
			return
		}
	}
	var mu sync.Mutex
	var got []string
	_, err = q.Handle("push", func(ctx context.Context, d *delaystream.Delivery) error {
		mu.Lock()
		defer mu.Unlock()
		if got = append(got, d.Headers["customer"]+" "+d.ID); len(got) == 4 {
			stop()
		}
		return nil
	}, delaystream.WithKeyRateLimit(func(d *delaystream.Delivery) string { return d.Headers["customer"] },
		20, time.Second, 1))
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := q.Run(ctx); err != nil {
		fmt.Println(err)
	}
	sort.Strings(got)
	fmt.Println(got)
	// Output:
	// [acme n0 acme n1 acme n2 globex n3]
}
