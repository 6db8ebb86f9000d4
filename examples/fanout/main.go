// Command fanout shows one queue feeding two consumer groups: a producer
// schedules "trial ends" messages, a mover promotes each when it is due, and
// the groups "billing" and "email" each receive every message, acknowledging
// them independently.
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
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/delaystream/delaystream/delay"
	"github.com/delaystream/delaystream/examples/internal/exampleredis"
	"github.com/delaystream/delaystream/group"
	"github.com/delaystream/delaystream/mover"
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

// run schedules one message per user, then runs a mover and one consumer of
// each group until both groups have handled every message. opts are added to
// both consumers' options.
func run(ctx context.Context, rdb redis.UniversalClient, out io.Writer, opts ...group.Option) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	began := time.Now()

	// Producer: one message per user, half a second apart.
	q, err := delay.New(rdb, queueName)
	if err != nil {
		return err
	}
	for i, u := range users {
		in := time.Duration(i+1) * 500 * time.Millisecond
		res, err := q.Schedule(ctx, delay.Message{ID: "trial:" + u + ":end", Payload: []byte(u)}, delay.After(in))
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "scheduled %-18s due in %s\n", res.ID, in)
	}

	// Handlers run concurrently: serialise the output and count the work.
	var mu sync.Mutex
	left := 2 * len(users) // every group handles every message
	allHandled := make(chan struct{})
	handled := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, "+%.1fs  "+format+"\n", append([]any{time.Since(began).Seconds()}, args...)...)
		if left--; left == 0 {
			close(allHandled)
		}
	}

	// Two groups on the same queue. Each creates its consumer group on the
	// queue stream when it starts and reads every entry; trimming removes an
	// entry from the stream only once both groups have acknowledged it.
	billing, err := group.New(rdb, queueName, "billing", func(ctx context.Context, m *group.Message) error {
		handled("billing  charged %s for the first month (%s)", m.Payload, m.ID)
		return nil // nil acknowledges the message for this group only
	}, opts...)
	if err != nil {
		return err
	}
	email, err := group.New(rdb, queueName, "email", func(ctx context.Context, m *group.Message) error {
		handled("email    sent %q to %s (%s)", "Your trial has ended", m.Payload, m.ID)
		return nil
	}, opts...)
	if err != nil {
		return err
	}

	// The mover appends each message to the queue stream when it is due.
	mv, err := mover.New(rdb, queueName)
	if err != nil {
		return err
	}

	// Run returns nil after a requested stop, so the three compose with errgroup.
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	g, gctx := errgroup.WithContext(runCtx)
	g.Go(func() error { return mv.Run(gctx) })
	g.Go(func() error { return billing.Run(gctx) })
	g.Go(func() error { return email.Run(gctx) })

	select {
	case <-allHandled:
	case <-gctx.Done():
	}
	stop()
	if err := g.Wait(); err != nil {
		return err
	}
	if ctx.Err() != nil {
		mu.Lock()
		defer mu.Unlock()
		return fmt.Errorf("%d deliveries missing: %w", left, ctx.Err())
	}
	fmt.Fprintf(out, "done: billing acked %d, email acked %d\n", billing.Counters().Acked, email.Counters().Acked)
	return nil
}
