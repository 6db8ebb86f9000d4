// Command quickstart schedules three messages one to three seconds out, runs
// a mover that appends each to the queue's stream when it is due, and reads
// the stream with a Redis consumer group, printing how late each delivery was
// by the Redis clock.
//
//	go run ./examples/quickstart                                    # embedded miniredis
//	REDIS_URL=redis://localhost:6379/0 go run ./examples/quickstart # a real Redis
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream/delay"
	"github.com/delaystream/delaystream/mover"
	"github.com/delaystream/delaystream/stream"
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

	rdb, closeRedis, err := connect()
	if err != nil {
		return err
	}
	defer closeRedis()
	return run(ctx, rdb, os.Stdout)
}

// connect returns a client for REDIS_URL, or for an embedded miniredis when
// REDIS_URL is unset.
func connect() (*redis.Client, func(), error) {
	if url := os.Getenv("REDIS_URL"); url != "" {
		opt, err := redis.ParseURL(url)
		if err != nil {
			return nil, nil, fmt.Errorf("REDIS_URL: %w", err)
		}
		rdb := redis.NewClient(opt)
		return rdb, func() { _ = rdb.Close() }, nil
	}
	mr, err := miniredis.Run()
	if err != nil {
		return nil, nil, fmt.Errorf("start miniredis: %w", err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	return rdb, func() { _ = rdb.Close(); mr.Close() }, nil
}

// run schedules the messages, promotes them with a mover and consumes them,
// writing what happens to out. It returns once every scheduled message has
// been delivered and acknowledged, or with an error after the timeout.
func run(ctx context.Context, rdb redis.UniversalClient, out io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	q, err := delay.New(rdb, queueName)
	if err != nil {
		return err
	}
	key := q.Keys().Main().Stream

	// Create the group before anything can be promoted, so it sees every entry.
	if err := createGroup(ctx, rdb, key); err != nil {
		return err
	}

	// Producer: schedule three messages. A deterministic id makes scheduling
	// idempotent; an empty id gets a generated one.
	items := []delay.Item{
		{Message: delay.Message{ID: "order:5001:cancel", Payload: []byte("cancel unpaid order 5001")}, When: delay.After(2 * time.Second)},
		{Message: delay.Message{Payload: []byte("send welcome mail to user 42")}, When: delay.After(time.Second)},
		{Message: delay.Message{Payload: []byte("retry webhook delivery 7")}, When: delay.At(time.Now().Add(3 * time.Second))},
	}
	want := make(map[string]bool)
	for _, it := range items {
		res, err := q.Schedule(ctx, it.Message, it.When)
		if err != nil {
			return err
		}
		want[res.ID] = true
		fmt.Fprintf(out, "scheduled %-26s due %s (%s)\n", res.ID, res.Due.Format(clock), res.Outcome)
	}
	// Scheduling an id that is still waiting (a producer retrying after a
	// timeout, say) leaves the message as it is: the default policy is delay.Keep.
	res, err := q.Schedule(ctx, items[0].Message, delay.After(time.Hour))
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "scheduled %-26s again: %s, still due %s\n", res.ID, res.Outcome, res.Due.Format(clock))

	// Mover: appends each message to the stream when it is due.
	m, err := mover.New(rdb, queueName)
	if err != nil {
		return err
	}
	moverCtx, stopMover := context.WithCancel(ctx)
	moverDone := make(chan error, 1)
	go func() { moverDone <- m.Run(moverCtx) }()

	err = consume(ctx, rdb, key, want, out)
	stopMover()
	return errors.Join(err, <-moverDone)
}

// --- Consumer: plain go-redis. Package group does all of this, and retries,
// reclaim and dead letters, for production use.

// createGroup creates groupName on the stream (and the stream itself),
// starting after its last entry. An existing group is kept.
func createGroup(ctx context.Context, rdb redis.UniversalClient, key string) error {
	err := rdb.XGroupCreateMkStream(ctx, key, groupName, "$").Err()
	if err != nil && !redis.HasErrorPrefix(err, "BUSYGROUP") {
		return fmt.Errorf("create group %s on %s: %w", groupName, key, err)
	}
	return nil
}

// consume reads the stream as a member of groupName until every message id
// in want has been delivered, printing and acknowledging each entry.
func consume(ctx context.Context, rdb redis.UniversalClient, key string, want map[string]bool, out io.Writer) error {
	for len(want) > 0 {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%d message(s) not delivered: %w", len(want), err)
		}
		res, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{
			Group:    groupName,
			Consumer: "quickstart",
			Streams:  []string{key, ">"},
			Count:    16,
			Block:    time.Second, // never 0 (forever): a blocked read ignores ctx
		}).Result()
		switch {
		case errors.Is(err, redis.Nil):
			continue // nothing arrived within the block time
		case err != nil && ctx.Err() != nil:
			continue // reported at the top of the loop
		case err != nil:
			return fmt.Errorf("read %s: %w", key, err)
		}
		for _, x := range res[0].Messages {
			e, err := stream.Decode(key, x.ID, x.Values)
			if err != nil {
				return err
			}
			// The entry id's time part is when the mover appended it, by the
			// Redis clock that also decided it was due.
			late := stream.EntryTime(x.ID).Sub(e.Envelope.Due)
			fmt.Fprintf(out, "delivered %-26s %-30q due %s  late %s\n",
				e.Envelope.ID, e.Envelope.Payload, e.Envelope.Due.Format(clock), late)
			if err := rdb.XAck(ctx, key, groupName, x.ID).Err(); err != nil {
				return fmt.Errorf("ack %s: %w", x.ID, err)
			}
			delete(want, e.Envelope.ID)
		}
	}
	return nil
}
