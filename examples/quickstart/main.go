// Command quickstart schedules three messages one to three seconds out and
// runs a delaystream.Queue, whose mover appends each to the queue's stream
// when it is due and whose consumer group "printer" handles it, printing how
// late each delivery was by the Redis clock.
//
//	go run ./examples/quickstart                                    # embedded miniredis
//	REDIS_URL=redis://localhost:6379/0 go run ./examples/quickstart # a real Redis
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/examples/internal/exampleredis"
)

const (
	queueName = "quickstart"
	groupName = "printer"
	timeout   = 10 * time.Second // give up if the messages have not all arrived by then
	clock     = "15:04:05.000"   // time format of the output
)

func main() {
	if err := start(); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
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
	_, err = run(ctx, rdb, os.Stdout)
	return err
}

// delivery is one message as the consumer saw it.
type delivery struct {
	ID      string
	Due     time.Time // due time (Redis clock)
	Handled time.Time // when the handler started (Redis clock)
}

// run schedules the messages and runs the queue (its mover and one consumer
// group), writing what happens to out. It returns the deliveries once every
// scheduled message has been handled and acknowledged, or an error after the
// timeout.
func run(ctx context.Context, rdb redis.UniversalClient, out io.Writer) ([]delivery, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	q, err := delaystream.New(rdb, queueName)
	if err != nil {
		return nil, err
	}

	// Schedule three messages. A deterministic id makes scheduling
	// idempotent; an empty id gets a generated one.
	items := []delaystream.Item{
		{Message: delaystream.Message{ID: "order:5001:cancel", Payload: []byte("cancel unpaid order 5001")}, When: delaystream.After(2 * time.Second)},
		{Message: delaystream.Message{Payload: []byte("send welcome mail to user 42")}, When: delaystream.After(time.Second)},
		{Message: delaystream.Message{Payload: []byte("retry webhook delivery 7")}, When: delaystream.At(time.Now().Add(3 * time.Second))},
	}
	want := make(map[string]bool)
	for _, it := range items {
		res, err := q.Schedule(ctx, it.Message, it.When)
		if err != nil {
			return nil, err
		}
		want[res.ID] = true
		fmt.Fprintf(out, "scheduled %-26s due %s (%s)\n", res.ID, res.Due.Format(clock), res.Outcome)
	}
	// Scheduling an id that is still waiting (a producer retrying after a
	// timeout, say) leaves the message as it is: the default policy is
	// delaystream.PolicyKeep.
	res, err := q.Schedule(ctx, items[0].Message, delaystream.After(time.Hour))
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "scheduled %-26s again: %s, still due %s\n", res.ID, res.Outcome, res.Due.Format(clock))

	// The group "printer". Every group of the queue gets every message; a
	// handler error would retry it in this group only. The handler stops
	// the queue once it has seen every message.
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var (
		mu  sync.Mutex
		got []delivery
	)
	printer, err := q.Handle(groupName, func(ctx context.Context, d *delaystream.Delivery) error {
		// Lateness by the Redis clock, the clock that also decided the
		// message was due.
		now, err := rdb.Time(ctx).Result()
		if err != nil {
			return err // retried after the group's backoff
		}
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, "delivered %-26s %-30q due %s  late %s\n",
			d.ID, d.Payload, d.Due.Format(clock), now.Sub(d.Due).Round(time.Millisecond))
		got = append(got, delivery{ID: d.ID, Due: d.Due, Handled: now})
		delete(want, d.ID)
		if len(want) == 0 {
			stop()
		}
		return nil // acknowledge
	})
	if err != nil {
		return nil, err
	}

	// Run promotes due messages and runs the group until runCtx is
	// cancelled (by the handler, or by the timeout); it returns nil then,
	// once in-flight handlers are done and acknowledged.
	if err := q.Run(runCtx); err != nil {
		return nil, err
	}
	mu.Lock()
	defer mu.Unlock()
	if len(want) > 0 {
		return got, fmt.Errorf("%d message(s) not delivered: %w", len(want), ctx.Err())
	}
	// What this process's consumer did, and what Redis holds for the group.
	st, err := printer.Stats(ctx)
	if err != nil {
		return got, err
	}
	fmt.Fprintf(out, "done: %s acked %d, %d pending\n", groupName, printer.Counters().Acked, st.Pending)
	return got, nil
}
