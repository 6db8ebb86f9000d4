package mover_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/delaystream/delaystream/internal/mover"
)

// Compile-only: needs a Redis server, so no Output line. The program owns
// its signals; Run returns nil once ctx is cancelled.
func ExampleNew() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()

	m, err := mover.New(rdb, "orders")
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := m.Run(ctx); err != nil {
		fmt.Println("mover stopped:", err)
	}
}

// Run composes with errgroup: it returns nil after a requested stop, so the
// group's error is that of the component that really failed.
func ExampleMover_Run() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()

	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	m, err := mover.New(rdb, "orders",
		mover.WithLogger(logger),
		mover.WithHooks(mover.Hooks{
			OnPromote: func(lane string, moved, quarantined int, took time.Duration) {
				// Must not block: record a metric, for instance.
			},
			OnLease: func(lane string, owner bool) {
				logger.Info("mover lease", slog.String("stream", lane), slog.Bool("owner", owner))
			},
		}))
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return m.Run(ctx) })
	// g.Go(...) the program's other components.
	if err := g.Wait(); err != nil {
		fmt.Println(err)
	}
	fmt.Printf("%+v\n", m.Counters())
}

// The lease must outlive the longest idle sleep, or an idle owner would
// lose it between two calls.
func ExampleWithLeaseTTL() {
	rdb := redis.NewClient(&redis.Options{})
	defer rdb.Close()

	_, err := mover.New(rdb, "orders", mover.WithMaxIdle(2*time.Second))
	fmt.Println(errors.Is(err, mover.ErrInvalidOption))
	fmt.Println(err)

	_, err = mover.New(rdb, "orders", mover.WithMaxIdle(2*time.Second), mover.WithLeaseTTL(3*time.Second))
	fmt.Println(err)
	// Output:
	// true
	// delaystream: invalid option: lease TTL 1.25s must exceed max idle 2s
	// <nil>
}

// A sharded queue's count is part of the queue: every mover, producer and
// consumer of it uses the same count. A Mover owns no shard until it runs
// and registers; then the live movers split the shards evenly.
func ExampleWithShards() {
	rdb := redis.NewClient(&redis.Options{})
	defer rdb.Close()

	_, err := mover.New(rdb, "orders", mover.WithShards(0))
	fmt.Println(err)

	m, err := mover.New(rdb, "orders", mover.WithShards(16),
		mover.WithHooks(mover.Hooks{OnOwnership: func(owned []int) {
			// Must not block: export len(owned) as a gauge, for instance.
		}}))
	fmt.Println(err, m.Shards(), m.Owned())
	// Output:
	// delaystream: invalid option: shard count must be 1..1024, got 0
	// <nil> 16 []
}
