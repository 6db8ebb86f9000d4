package group_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/delaystream/delaystream/internal/group"
	"github.com/delaystream/delaystream/internal/mover"
)

// A consumer of group "billing" on queue "orders", run until SIGINT or
// SIGTERM. It keeps the queue promoted too (see WithoutPromotion), so a
// program of producers and consumers needs nothing else. The library
// installs no signal handler: the program owns its signals and hands Run a
// context. Compile-only: it needs a Redis server.
func ExampleNew() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close() // the consumer borrows the client and never closes it

	c, err := group.New(rdb, "orders", "billing", func(ctx context.Context, m *group.Message) error {
		fmt.Printf("bill %s (attempt %d): %s\n", m.ID, m.Attempt, m.Payload)
		return nil // acknowledge; an error retries in this group only
	}, group.WithWorkers(16), group.WithMaxAttempts(5))
	if err != nil {
		log.Fatal(err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Run returns nil after a requested stop. Shutdown waits for in-flight
	// handlers (drain timeout).
	if err := c.Run(ctx); err != nil {
		log.Fatal(err)
	}
}

// Consumers that leave promotion to a dedicated mover, run here in the same
// program with its own options (in production, often a process of its own,
// or a Redis user with the mover's ACL). Compile-only: it needs a Redis
// server.
func ExampleWithoutPromotion() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()

	c, err := group.New(rdb, "orders", "billing", func(ctx context.Context, m *group.Message) error {
		return nil
	}, group.WithoutPromotion())
	if err != nil {
		log.Fatal(err)
	}
	mv, err := mover.New(rdb, "orders", mover.WithBatchSize(500))
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Run returns nil after a requested stop, so an errgroup reports only
	// real failures.
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return mv.Run(ctx) })
	g.Go(func() error { return c.Run(ctx) })
	if err := g.Wait(); err != nil {
		log.Fatal(err)
	}
}

// List a group's dead letters and send those that ran out of attempts back
// to the same group in a minute, with a fresh attempt count. Other groups
// of the queue are not affected. Compile-only: it needs a Redis server.
func ExampleDeadLetters_Redrive() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	ctx := context.Background()

	dl, err := group.NewDeadLetters(rdb, "orders", "billing")
	if err != nil {
		log.Fatal(err)
	}
	var redrive []string
	for after := ""; ; {
		page, err := dl.List(ctx, after, 100)
		if err != nil {
			log.Fatal(err)
		}
		for _, d := range page {
			fmt.Printf("%s %s at %s: %s: %s\n", d.EntryID, d.Envelope.ID, d.At().Format(time.RFC3339), d.Reason, d.LastError)
			if d.Reason == group.ReasonAttempts {
				redrive = append(redrive, d.EntryID)
			}
		}
		if len(page) < 100 {
			break
		}
		after = page[len(page)-1].EntryID
	}

	n, err := dl.Redrive(ctx, time.Minute, redrive...)
	var re *group.RedriveError
	if errors.As(err, &re) {
		fmt.Println("not found:", re.NotFound, "unrecoverable:", re.Unrecoverable)
	} else if err != nil {
		log.Fatal(err)
	}
	fmt.Println("redriven:", n)
}

// Options are checked when the consumer is built, not when it runs.
func ExampleWithWorkers() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"}) // not contacted
	defer rdb.Close()

	_, err := group.New(rdb, "orders", "billing",
		func(context.Context, *group.Message) error { return nil },
		group.WithWorkers(0),
	)
	fmt.Println(errors.Is(err, group.ErrInvalidOption))
	fmt.Println(err)
	// Output:
	// true
	// delaystream: invalid option: workers must be 1..4096, got 0
}

// A handler says what should happen to a message that failed by wrapping
// its error: Drop acknowledges it without retry, DeadLetter sends it to the
// dead letters at once; any other error is retried after the backoff.
func ExampleDrop() {
	handle := func(ctx context.Context, m *group.Message) error {
		switch string(m.Payload) {
		case "cancelled":
			return group.Drop(errors.New("order already cancelled"))
		case "garbage":
			return group.DeadLetter(errors.New("cannot parse order"))
		}
		return nil
	}
	for _, p := range []string{"cancelled", "garbage", "fine"} {
		err := handle(context.Background(), &group.Message{Payload: []byte(p)})
		var drop *group.DropError
		var dead *group.DeadLetterError
		fmt.Printf("%s: drop=%t dead=%t err=%v\n", p, errors.As(err, &drop), errors.As(err, &dead), err)
	}
	// Output:
	// cancelled: drop=true dead=false err=drop: order already cancelled
	// garbage: drop=false dead=true err=dead-letter: cannot parse order
	// fine: drop=false dead=false err=<nil>
}

// Retire group "legacy-audit" of queue "orders" for good, once none of its
// consumers runs: trimming of the queue stream no longer keeps entries for
// it. Its dead letters stay until purged. Compile-only: it needs a Redis
// server.
func ExampleForget() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()

	ctx := context.Background()
	if err := group.Forget(ctx, rdb, "orders", "legacy-audit"); err != nil {
		log.Fatal(err)
	}
	dl, err := group.NewDeadLetters(rdb, "orders", "legacy-audit")
	if err != nil {
		log.Fatal(err)
	}
	if err := dl.PurgeAll(ctx); err != nil {
		log.Fatal(err)
	}
}

// A deploy step that adds group "audit" to a queue that is already
// running: created now, the group gets every message promoted from now on,
// even if its consumers start much later (trimming by the other groups'
// consumers keeps what it has not read). Compile-only: it needs a Redis
// server.
func ExampleConsumer_CreateGroup() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()

	c, err := group.New(rdb, "orders", "audit", func(ctx context.Context, m *group.Message) error {
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.CreateGroup(ctx); err != nil {
		log.Fatal(err)
	}
}
