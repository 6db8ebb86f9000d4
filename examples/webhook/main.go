// Command webhook delivers webhooks with retries, backoff and dead letters.
// Three deliveries are scheduled on a delaystream.Queue, due at once: one
// endpoint answers, one fails twice and then answers, one is down. The
// queue's consumer group allows at most three attempts, so the third
// delivery ends in the group's dead letters; the program lists them, lets the
// endpoint recover, redrives them and watches the delivery succeed.
//
//	go run ./examples/webhook                                    # embedded miniredis
//	REDIS_URL=redis://localhost:6379/0 go run ./examples/webhook # a real Redis
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/examples/internal/exampleredis"
	"github.com/delaystream/delaystream/internal/group"
)

const (
	queueName = "webhooks"
	groupName = "deliverer"
	timeout   = 10 * time.Second // give up if the deliveries have not settled by then

	okURL    = "https://shop.example/hooks"
	flakyURL = "https://flaky.example/hooks" // 503 twice, then 200
	deadURL  = "https://dead.example/hooks"  // down until it recovers
)

func main() {
	if err := start(); err != nil {
		fmt.Fprintln(os.Stderr, "webhook:", err)
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

// endpoints stands in for the HTTP receivers.
type endpoints struct {
	mu        sync.Mutex
	calls     map[string]int
	recovered bool
}

func (e *endpoints) post(url string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls[url]++
	switch {
	case url == flakyURL && e.calls[url] <= 2:
		return errors.New("503 Service Unavailable")
	case url == deadURL && !e.recovered:
		return errors.New("dial tcp: connection refused")
	}
	return nil
}

func (e *endpoints) revive() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.recovered = true
}

// run schedules three deliveries and runs the queue until each delivery has
// succeeded, redriving the dead letters once along the way. opts are added
// to the group's options.
func run(ctx context.Context, rdb redis.UniversalClient, out io.Writer, opts ...group.Option) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	var mu sync.Mutex // handlers and hooks run concurrently
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, format+"\n", args...)
	}

	q, err := delaystream.New(rdb, queueName)
	if err != nil {
		return err
	}
	for i, url := range []string{okURL, flakyURL, deadURL} {
		msg := delaystream.Message{
			ID:      fmt.Sprintf("delivery:%d", i+1),
			Payload: []byte(`{"event":"order.paid","order":5001}`),
			Headers: map[string]string{"url": url},
		}
		if _, err := q.Schedule(ctx, msg, delaystream.After(0)); err != nil {
			return err
		}
		say("scheduled %s -> %s", msg.ID, url)
	}

	eps := &endpoints{calls: map[string]int{}}
	delivered := make(chan string, 8)    // ids of successful deliveries
	deadLettered := make(chan string, 8) // ids of dead-lettered deliveries
	handler := func(ctx context.Context, m *group.Message) error {
		if err := eps.post(m.Headers["url"]); err != nil {
			// An error schedules the next attempt in this group's retry
			// lane after the backoff; after the last one, the message is
			// dead-lettered. Wrap it with group.DeadLetter to skip retries.
			return fmt.Errorf("post %s: %w", m.Headers["url"], err)
		}
		say("attempt %d  %s  200 OK", m.Attempt, m.ID)
		delivered <- m.ID
		return nil
	}
	// Hooks report what the consumer decided; they must not block.
	hooks := group.Hooks{
		OnFailed: func(m *group.Message, err error, retryIn time.Duration) {
			say("attempt %d  %s  %v; retry in %s", m.Attempt, m.ID, err, retryIn.Round(time.Millisecond))
		},
		OnDeadLettered: func(m *group.Message, reason string) {
			say("attempt %d  %s  dead-lettered: %s", m.Attempt, m.ID, reason)
			deadLettered <- m.ID
		},
	}
	// Retries, backoff and hooks are the group's own options; Handle
	// returns its consumer, whose DeadLetters settle lists and redrives.
	c, err := q.Handle(groupName, handler, append([]group.Option{
		group.WithMaxAttempts(3),
		// About 200 ms before attempt 2 and 400 ms before attempt 3 (±20 %).
		group.WithBackoff(group.ExponentialBackoff(200*time.Millisecond, 5*time.Second)),
		group.WithHooks(hooks),
	}, opts...)...)
	if err != nil {
		return err
	}

	// The queue (mover and group) runs while settle waits for its work;
	// the errgroup ends settle's wait early if Run fails.
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	g, gctx := errgroup.WithContext(runCtx)
	g.Go(func() error { return q.Run(gctx) })

	err = settle(gctx, c.DeadLetters(), eps, delivered, deadLettered, say)
	stop()
	return errors.Join(err, g.Wait())
}

// settle waits for two deliveries and one dead letter, lists and redrives
// the dead letters once the endpoint is back, and waits for the last
// delivery.
func settle(ctx context.Context, dl *group.DeadLetters, eps *endpoints,
	delivered, deadLettered <-chan string, say func(string, ...any)) error {
	for ok, dead := 0, 0; ok < 2 || dead < 1; {
		select {
		case <-delivered:
			ok++
		case <-deadLettered:
			dead++
		case <-ctx.Done():
			return fmt.Errorf("waiting for the first deliveries: %w", context.Cause(ctx))
		}
	}

	entries, err := dl.List(ctx, "", 100)
	if err != nil {
		return err
	}
	say("dead letters of %s:", groupName)
	ids := make([]string, len(entries))
	for i, e := range entries {
		ids[i] = e.EntryID
		say("  %s  %s  reason %q  last error %q  attempts %d", e.EntryID, e.Envelope.ID, e.Reason, e.LastError, e.Attempt)
	}

	eps.revive()
	// Redrive puts them back into this group's retry lane (other groups of
	// the queue are not affected) with the attempt count reset to 1.
	n, err := dl.Redrive(ctx, 0, ids...)
	if err != nil {
		return err
	}
	say("%s is back: redrove %d dead letter(s)", deadURL, n)

	select {
	case id := <-delivered:
		left, err := dl.Len(ctx)
		if err != nil {
			return err
		}
		say("done: %s delivered after the redrive, %d dead letters left", id, left)
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the redriven delivery: %w", context.Cause(ctx))
	}
}
