package dstest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/dstest"
)

// exampleT stands in for the *testing.T a test passes to dstest.New, which
// Examples lack; done runs what the test's end would (closing the server).
type exampleT struct {
	testing.TB // nil: dstest calls only the methods below
	cleanups   []func()
}

func (t *exampleT) Helper()                           {}
func (t *exampleT) Cleanup(f func())                  { t.cleanups = append(t.cleanups, f) }
func (t *exampleT) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }

func (t *exampleT) done() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
}

// placeOrder and addBilling are application code under test: an order
// left unpaid is cancelled after 30 minutes by the billing group, which
// the application adds to its queue with its production options.
func placeOrder(ctx context.Context, q *delaystream.Queue, orderID int, tenant string) error {
	_, err := q.Schedule(ctx, delaystream.Message{
		ID:      fmt.Sprintf("order:%d:cancel", orderID),
		Payload: fmt.Appendf(nil, `{"order":%d}`, orderID),
		Headers: map[string]string{"tenant": tenant},
	}, delaystream.After(30*time.Minute))
	return err
}

func addBilling(q *delaystream.Queue) error {
	_, err := q.Handle("billing", func(ctx context.Context, d *delaystream.Delivery) error {
		fmt.Println("cancelling", d.ID)
		return nil
	}, delaystream.WithMaxAttempts(5), delaystream.WithWorkers(16), delaystream.WithHandlerTimeout(10*time.Second))
	return err
}

// A test of scheduling logic: what the application scheduled, and that its
// own billing group handles it when due, not before.
func Example_schedulingLogic() {
	t := &exampleT{} // in a test: the test's t
	defer t.done()
	ctx := context.Background()

	q := dstest.New(t, "orders")
	if err := addBilling(q.Queue); err != nil { // the application's own setup
		fmt.Println(err)
		return
	}
	if err := placeOrder(ctx, q.Queue, 5001, "acme"); err != nil {
		fmt.Println(err)
		return
	}
	waiting, err := q.Scheduled(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, m := range waiting {
		fmt.Printf("%s due in %s for %s: %s\n", m.ID, m.Due.Sub(q.Now()), m.Headers["tenant"], m.Payload)
	}

	q.Advance(29 * time.Minute)
	done, err := q.Work(ctx, "billing")
	fmt.Println("after 29 min:", len(done), "handled", err)

	q.Advance(time.Minute)
	done, err = q.Work(ctx, "billing")
	fmt.Println("after 30 min:", done[0].ID, done[0].Outcome, err)
	// Output:
	// order:5001:cancel due in 30m0s for acme: {"order":5001}
	// after 29 min: 0 handled <nil>
	// cancelling order:5001:cancel
	// after 30 min: order:5001:cancel acked <nil>
}

// addWebhooks is application code: the group that delivers webhooks,
// with its backoff and attempts.
func addWebhooks(q *delaystream.Queue, calls *int) error {
	_, err := q.Handle("deliver", func(ctx context.Context, d *delaystream.Delivery) error {
		switch *calls++; {
		case d.ID == "hook:2":
			return delaystream.DeadLetter(errors.New("410 Gone"))
		case d.Attempt == 1:
			return errors.New("503 Service Unavailable")
		}
		return nil
	}, delaystream.WithBackoff(delaystream.ConstantBackoff(time.Minute)), delaystream.WithMaxAttempts(3))
	return err
}

// A test of a handler: what it does with each message, retried by the
// group's own backoff, on the server's clock.
func ExampleQueue_Work() {
	t := &exampleT{} // in a test: the test's t
	defer t.done()
	ctx := context.Background()

	q := dstest.New(t, "webhooks")
	calls := 0
	if err := addWebhooks(q.Queue, &calls); err != nil {
		fmt.Println(err)
		return
	}
	for _, id := range []string{"hook:1", "hook:2"} {
		if _, err := q.Schedule(ctx, delaystream.Message{ID: id}, delaystream.After(0)); err != nil {
			fmt.Println(err)
			return
		}
	}
	show := func(done []dstest.Handled, err error) {
		for _, h := range done {
			fmt.Printf("%s attempt %d: %s", h.ID, h.Attempt, h.Outcome)
			switch h.Outcome {
			case delaystream.HandlerRetried:
				fmt.Printf(" in %s (%v)", h.RetryAt.Sub(q.Now()), h.Err)
			case delaystream.HandlerDeadLettered:
				fmt.Printf(": %s (%v)", h.Reason, h.Err)
			}
			fmt.Println()
		}
		if err != nil {
			fmt.Println(err)
		}
	}

	show(q.Work(ctx, "deliver"))
	q.Advance(time.Minute)
	show(q.Work(ctx, "deliver"))
	fmt.Println("handler calls:", calls)
	// Output:
	// hook:1 attempt 1: retried in 1m0s (503 Service Unavailable)
	// hook:2 attempt 1: dead_lettered: handler asked to dead-letter (dead-letter: 410 Gone)
	// hook:1 attempt 2: acked
	// handler calls: 3
}

// Settle runs the group through its backoffs, moving the clock, and
// returns each message's deliveries.
func ExampleQueue_Settle() {
	t := &exampleT{} // in a test: the test's t
	defer t.done()
	ctx := context.Background()

	q := dstest.New(t, "webhooks")
	calls := 0
	if err := addWebhooks(q.Queue, &calls); err != nil {
		fmt.Println(err)
		return
	}
	start := q.Now()
	for _, id := range []string{"hook:1", "hook:2"} {
		if _, err := q.Schedule(ctx, delaystream.Message{ID: id}, delaystream.After(0)); err != nil {
			fmt.Println(err)
			return
		}
	}
	got, err := q.Settle(ctx, "deliver")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, id := range []string{"hook:1", "hook:2"} {
		for _, h := range got[id] {
			fmt.Println(id, "attempt", h.Attempt, h.Outcome)
		}
	}
	fmt.Println("clock moved", q.Now().Sub(start))
	// Output:
	// hook:1 attempt 1 retried
	// hook:1 attempt 2 acked
	// hook:2 attempt 1 dead_lettered
	// clock moved 1m0s
}
