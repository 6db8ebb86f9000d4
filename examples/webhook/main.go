// Command webhook delivers webhooks with retries, backoff and dead letters.
// Three deliveries are scheduled on a delaystream.Queue, due at once: one
// endpoint answers, one answers 429 Too Many Requests with a Retry-After,
// then 503, then answers, and one is down. The handler retries the 429
// when the endpoint asked for (delaystream.RetryAfter) and other failures
// after the group's backoff. The group allows at most three attempts, so
// the third delivery ends in the group's dead letters; the program lists
// them, lets the endpoint recover, redrives them and watches the delivery
// succeed.
//
//	go run ./examples/webhook                                    # embedded miniredis
//	REDIS_URL=redis://localhost:6379/0 go run ./examples/webhook # a real Redis
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
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
	queueName = "webhooks"
	groupName = "deliverer"
	timeout   = 10 * time.Second // give up if the deliveries have not settled by then

	okURL    = "https://shop.example/hooks"
	flakyURL = "https://flaky.example/hooks" // 429 with Retry-After: 1, 503, then 200
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

// post stands in for an HTTP POST to url: it returns the response's status
// and Retry-After header, or an error when the connection fails.
func (e *endpoints) post(url string) (status int, retryAfter string, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls[url]++
	switch {
	case url == flakyURL && e.calls[url] == 1:
		return http.StatusTooManyRequests, "1", nil
	case url == flakyURL && e.calls[url] == 2:
		return http.StatusServiceUnavailable, "", nil
	case url == deadURL && !e.recovered:
		return 0, "", errors.New("dial tcp: connection refused")
	}
	return http.StatusOK, "", nil
}

func (e *endpoints) revive() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.recovered = true
}

// run schedules three deliveries and runs the queue until each delivery has
// succeeded, redriving the dead letters once along the way. opts are added
// to the group's options.
func run(ctx context.Context, rdb redis.UniversalClient, out io.Writer, opts ...delaystream.GroupOption) error {
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
	handler := deliver(eps, say, delivered)
	// Hooks report what the consumer decided; they must not block.
	hooks := delaystream.Hooks{
		OnFailed: func(d *delaystream.Delivery, err error, retryIn time.Duration) {
			if retryIn == 0 { // the last failure (this group never retries at once): OnDeadLettered follows
				say("attempt %d  %s  %v; no attempt left", d.Attempt, d.ID, err)
				return
			}
			say("attempt %d  %s  %v; retry in %s", d.Attempt, d.ID, err, retryIn.Round(time.Millisecond))
		},
		OnDeadLettered: func(d *delaystream.Delivery, reason string) {
			say("attempt %d  %s  dead-lettered: %s", d.Attempt, d.ID, reason)
			deadLettered <- d.ID
		},
	}
	// Retries, backoff and hooks are the group's own options; Handle
	// returns the group, whose dead letters settle lists and redrives.
	deliverer, err := q.Handle(groupName, handler, append([]delaystream.GroupOption{
		delaystream.WithMaxAttempts(3),
		// About 200 ms before attempt 2 and 400 ms before attempt 3 (±20 %).
		delaystream.WithBackoff(delaystream.ExponentialBackoff(200*time.Millisecond, 5*time.Second)),
		delaystream.WithHooks(hooks),
	}, opts...)...)
	if err != nil {
		return err
	}

	// The queue (mover and group) runs while settle waits for its work;
	// the errgroup ends settle's wait early if Run fails.
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	eg, gctx := errgroup.WithContext(runCtx)
	eg.Go(func() error { return q.Run(gctx) })

	err = settle(gctx, deliverer, eps, delivered, deadLettered, say)
	stop()
	return errors.Join(err, eg.Wait())
}

// settle waits for two deliveries and one dead letter, lists and redrives
// the dead letters once the endpoint is back, and waits for the last
// delivery.
func settle(ctx context.Context, g *delaystream.Group, eps *endpoints,
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

	entries, err := g.DeadLetters(ctx, "", 100)
	if err != nil {
		return err
	}
	say("dead letters of %s:", groupName)
	ids := make([]string, len(entries))
	for i, e := range entries {
		ids[i] = e.EntryID
		say("  %s  %s  reason %q  last error %q  attempts %d", e.EntryID, e.ID, e.Reason, e.LastError, e.Attempt)
	}

	eps.revive()
	// Redrive puts them back into this group's retry lane (other groups of
	// the queue are not affected) with the attempt count reset to 1.
	n, err := g.Redrive(ctx, 0, ids...)
	if err != nil {
		return err
	}
	say("%s is back: redrove %d dead letter(s)", deadURL, n)

	select {
	case id := <-delivered:
		st, err := g.Stats(ctx)
		if err != nil {
			return err
		}
		say("done: %s delivered after the redrive, %d dead letters left", id, st.DeadLetters)
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the redriven delivery: %w", context.Cause(ctx))
	}
}

// deliver returns the group's handler: it posts the delivery to the URL in
// its headers, says and sends on delivered what succeeded, and tells the
// group what to do with what failed.
func deliver(eps *endpoints, say func(string, ...any), delivered chan<- string) delaystream.Handler {
	return func(ctx context.Context, d *delaystream.Delivery) error {
		url := d.Headers["url"]
		status, retryAfter, err := eps.post(url)
		if err != nil {
			// An error schedules the next attempt in this group's retry
			// lane after the backoff; after the last one, the message is
			// dead-lettered. Wrap it with delaystream.DeadLetter to skip
			// the retries.
			return fmt.Errorf("post %s: %w", url, err)
		}
		if status >= 300 {
			err := fmt.Errorf("post %s: %d %s", url, status, http.StatusText(status))
			// The receiver said when to come back: RetryAfter replaces the
			// backoff for this attempt, which still counts as one.
			if secs, perr := strconv.Atoi(retryAfter); perr == nil && status == http.StatusTooManyRequests {
				return delaystream.RetryAfter(time.Duration(secs)*time.Second, err)
			}
			return err
		}
		say("attempt %d  %s  200 OK", d.Attempt, d.ID)
		delivered <- d.ID
		return nil
	}
}
