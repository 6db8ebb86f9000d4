package delaystream_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/internal/group"
)

// One queue, two consumer groups, one Run. Compile-only: it needs a Redis
// server, so it has no Output line (the runnable version is
// examples/quickstart).
func ExampleNew() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()

	q, err := delaystream.New(rdb, "orders")
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	// Due 30 minutes from now by the Redis clock.
	_, err = q.Schedule(ctx, delaystream.Message{ID: "order:5001:cancel", Payload: []byte(`{"order":5001}`)},
		delaystream.After(30*time.Minute))
	if err != nil {
		fmt.Println(err)
		return
	}
	// Every group gets every message, and retries and dead-letters on its own.
	_, err = q.Handle("billing", func(ctx context.Context, m *group.Message) error {
		fmt.Println("cancel and refund", m.ID)
		return nil // acknowledge; an error retries in this group only
	}, group.WithWorkers(8))
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = q.Handle("audit", func(ctx context.Context, m *group.Message) error {
		fmt.Println("audit", m.ID)
		return nil
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	// The mover and both groups; nil after ctx is cancelled and the
	// in-flight handlers are done.
	if err := q.Run(ctx); err != nil {
		fmt.Println("queue stopped:", err)
	}
}

// Typed payloads through the queue's codec. Compile-only.
func ExampleHandleTyped() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	type CancelOrder struct{ OrderID int }

	q, err := delaystream.New(rdb, "orders")
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	_, err = delaystream.Schedule(ctx, q, "order:5001:cancel", CancelOrder{OrderID: 5001}, delaystream.After(30*time.Minute))
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = delaystream.HandleTyped(q, "billing", func(ctx context.Context, m *group.Message, c CancelOrder) error {
		fmt.Println("cancel order", c.OrderID)
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
}

// Options of the parts go through the Queue; a part's own prefix would
// disagree with the queue's, so it is refused.
func ExampleWithPrefix() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"}) // never dialled: New talks to no server
	defer rdb.Close()
	_, err := delaystream.New(rdb, "orders", delaystream.WithPrefix("shop"))
	fmt.Println(err)
	_, err = delaystream.New(rdb, "orders", delaystream.WithPrefix("a b"))
	fmt.Println(errors.Is(err, delaystream.ErrInvalidOption))
	// Output:
	// <nil>
	// true
}

// A queue sharded over a Redis Cluster's masters: every part of the Queue
// (producer, mover, groups) gets the count, and every other process using
// the queue must be built with the same. Compile-only: it needs a cluster
// (the runnable version is examples/cluster).
func ExampleWithShards() {
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:7000"}, MaxRedirects: 8})
	defer rdb.Close()
	q, err := delaystream.New(rdb, "reminders", delaystream.WithShards(16))
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := q.Schedule(context.Background(), delaystream.Message{ID: "user:42:remind"}, delaystream.After(time.Hour))
	if err != nil {
		fmt.Println(err) // wraps stream.ErrShardCount if the queue was created with another count
		return
	}
	fmt.Println(res.ID, "waits in shard", q.Layout().ShardOf(res.ID))
}
