// Command fanout shows one queue feeding two consumer groups: it schedules
// "trial ends" messages on a delaystream.Queue and adds the groups "billing"
// and "email" to it; one Run promotes each message when it is due, and each
// group receives every message and acknowledges it independently. Both
// groups share one middleware, which runs around every handler call.
//
//	go run ./examples/fanout                                    # embedded miniredis
//	REDIS_URL=redis://localhost:6379/0 go run ./examples/fanout # a real Redis
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/examples/internal/exampleredis"
)

const (
	queueName = "trial-ends"
	timeout   = 10 * time.Second // give up if not every group got every message by then
)

var users = []string{"alice", "bob", "carol"}

func main() {
	if err := start(); err != nil {
		fmt.Fprintln(os.Stderr, "fanout:", err)
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

// run schedules one message per user, then runs the queue with its two
// groups until both have handled every message. opts are added to both
// groups' options.
func run(ctx context.Context, rdb redis.UniversalClient, out io.Writer, opts ...delaystream.GroupOption) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	began := time.Now()

	// One message per user, half a second apart.
	q, err := delaystream.New(rdb, queueName)
	if err != nil {
		return err
	}
	for i, u := range users {
		in := time.Duration(i+1) * 500 * time.Millisecond
		res, err := q.Schedule(ctx, delaystream.Message{ID: "trial:" + u + ":end", Payload: []byte(u)}, delaystream.After(in))
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "scheduled %-18s due in %s\n", res.ID, in)
	}

	// Handlers run concurrently: serialise the output.
	var mu sync.Mutex
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, "+%.1fs  "+format+"\n", append([]any{time.Since(began).Seconds()}, args...)...)
	}

	// Middleware wraps every handler of the groups it is given to; logging,
	// tracing (contrib/otel), recovery and per-tenant checks are middleware
	// too. This one counts the deliveries handled, every group's, and stops
	// the queue after the last.
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var left atomic.Int64
	left.Store(int64(2 * len(users))) // every group handles every message
	countdown := func(next delaystream.Handler) delaystream.Handler {
		return func(ctx context.Context, d *delaystream.Delivery) error {
			err := next(ctx, d)
			if err == nil && left.Add(-1) == 0 {
				stop()
			}
			return err
		}
	}
	opts = append([]delaystream.GroupOption{delaystream.WithMiddleware(countdown)}, opts...)

	// Two groups on the same queue. Each creates its consumer group on the
	// queue stream when it starts and reads every entry; trimming removes an
	// entry from the stream only once both groups have acknowledged it.
	billing, err := q.Handle("billing", func(ctx context.Context, d *delaystream.Delivery) error {
		say("billing  charged %s for the first month (%s)", d.Payload, d.ID)
		return nil // nil acknowledges the message for this group only
	}, opts...)
	if err != nil {
		return err
	}
	email, err := q.Handle("email", func(ctx context.Context, d *delaystream.Delivery) error {
		say("email    sent %q to %s (%s)", "Your trial has ended", d.Payload, d.ID)
		return nil
	}, opts...)
	if err != nil {
		return err
	}

	// The mover and both groups, until the last handler or the timeout
	// stops them; nil then, once in-flight handlers are done.
	if err := q.Run(runCtx); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%d deliveries missing: %w", left.Load(), ctx.Err())
	}
	fmt.Fprintf(out, "done: billing acked %d, email acked %d\n", billing.Counters().Acked, email.Counters().Acked)
	return nil
}
