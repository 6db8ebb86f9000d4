// Command ordercancel cancels unpaid orders after a deadline ("cancel order
// 5001 if it is still unpaid in 30 minutes", scaled down to 2 seconds). Each
// new order schedules an auto-cancel on a delaystream.Queue under the
// deterministic id "order:<n>:cancel", with the order number as a typed
// payload; a payment withdraws it with Queue.Cancel, so it never fires, and
// the consumer group cancels the orders still unpaid at the deadline.
//
//	go run ./examples/ordercancel                                    # embedded miniredis
//	REDIS_URL=redis://localhost:6379/0 go run ./examples/ordercancel # a real Redis
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/examples/internal/exampleredis"
)

const (
	queueName = "order-timeouts"
	groupName = "canceller"
	deadline  = 2 * time.Second  // "30 minutes"
	timeout   = 10 * time.Second // give up if the orders have not settled by then
)

// orders to place, and when each one is paid (0: never).
var orders = []struct {
	id     int
	paidAt time.Duration
}{
	{5001, 0},
	{5002, 500 * time.Millisecond},
	{5003, 0},
	{5004, 1500 * time.Millisecond},
	{5005, 0},
}

func main() {
	if err := start(); err != nil {
		fmt.Fprintln(os.Stderr, "ordercancel:", err)
		os.Exit(1)
	}
}

func start() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	rdb, closeRedis, err := exampleredis.Connect()
	if err != nil {
		return err
	}
	defer closeRedis()
	return run(ctx, rdb, os.Stdout)
}

// store stands in for the order database.
type store struct {
	mu    sync.Mutex
	state map[int]string // "unpaid", "paid", "cancelled"
}

// set moves order id from one state to another and reports whether it was
// in state from.
func (s *store) set(id int, from, to string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state[id] != from {
		return false
	}
	s.state[id] = to
	return true
}

func cancelID(order int) string { return "order:" + strconv.Itoa(order) + ":cancel" }

// run places the orders, pays some of them before the deadline and runs the
// queue until every unpaid order has been cancelled. opts are added to the
// group's options.
func run(ctx context.Context, rdb redis.UniversalClient, out io.Writer, opts ...delaystream.GroupOption) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	began := time.Now()
	var mu sync.Mutex // the handler and the payments run concurrently
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, "+%.1fs  "+format+"\n", append([]any{time.Since(began).Seconds()}, args...)...)
	}

	q, err := delaystream.New(rdb, queueName)
	if err != nil {
		return err
	}
	db := &store{state: map[int]string{}}
	unpaid := 0
	for _, o := range orders {
		db.state[o.id] = "unpaid"
		// The deterministic id makes this idempotent (a retried request keeps
		// the first deadline) and lets the payment find the cancel again.
		// The payload is the order number, encoded with the queue's codec.
		if _, err := delaystream.Schedule(ctx, q, delaystream.Message{ID: cancelID(o.id)}, o.id, delaystream.After(deadline)); err != nil {
			return err
		}
		if o.paidAt == 0 {
			unpaid++
		}
	}
	say("placed %d orders; each is cancelled in %s unless paid", len(orders), deadline)

	cancelled := make(chan int, len(orders))
	// HandleTyped decodes the payload with the queue's codec; one that does
	// not decode is dead-lettered, since retrying cannot fix it.
	_, err = delaystream.HandleTyped(q, groupName, func(ctx context.Context, d *delaystream.Delivery, id int) error {
		// Re-check the order: a payment may have landed just as the
		// deadline passed, after Cancel could no longer withdraw the message.
		if db.set(id, "unpaid", "cancelled") {
			say("order %d  unpaid at the deadline: cancelled (%s)", id, d.ID)
			cancelled <- id
		} else {
			say("order %d  paid just in time: nothing to cancel", id)
		}
		return nil
	}, opts...)
	if err != nil {
		return err
	}

	// The queue (mover and group) and the payments run side by side until
	// every unpaid order is cancelled; Run returns nil after stop.
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	g, gctx := errgroup.WithContext(runCtx)
	g.Go(func() error { return q.Run(gctx) })
	g.Go(func() error { return pay(gctx, q, db, began, say) })
	for range unpaid {
		select {
		case <-cancelled:
		case <-gctx.Done():
		}
	}
	if ctx.Err() == nil {
		// The withdrawn auto-cancels are gone, not merely skipped.
		if n, err := q.Len(ctx); err == nil {
			say("auto-cancels still waiting: %d", n)
		}
	}
	stop()
	if err := g.Wait(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("orders not settled: %w", err)
	}
	for _, o := range orders {
		fmt.Fprintf(out, "order %d: %s\n", o.id, db.state[o.id])
	}
	return nil
}

// pay pays the orders that get paid, each at its time, and withdraws their
// auto-cancel.
func pay(ctx context.Context, q *delaystream.Queue, db *store, began time.Time, say func(string, ...any)) error {
	for _, o := range orders {
		if o.paidAt == 0 {
			continue
		}
		select {
		case <-time.After(time.Until(began.Add(o.paidAt))):
		case <-ctx.Done():
			return nil
		}
		db.set(o.id, "unpaid", "paid")
		// Cancel reports true when the message was still waiting: it is gone
		// and will never be delivered. False means it was already promoted
		// (the deadline passed) and the handler must cope, as it does above.
		withdrawn, err := q.Cancel(ctx, cancelID(o.id))
		if err != nil {
			return err
		}
		say("order %d  paid; auto-cancel withdrawn: %t", o.id, withdrawn)
	}
	return nil
}
