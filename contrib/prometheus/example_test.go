package dsprom_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream"
	dsprom "github.com/delaystream/delaystream/contrib/prometheus"
	"github.com/delaystream/delaystream/internal/group"
	"github.com/delaystream/delaystream/internal/mover"
)

// Compile-only: needs a Redis server, so no Output line. One Metrics for
// the process: its hooks go into the mover and each group, Watch names
// what a scrape reads from Redis, and the registry serves it all.
func ExampleNew() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()

	m, err := dsprom.New()
	if err != nil {
		fmt.Println(err)
		return
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)

	q, err := delaystream.New(rdb, "orders",
		delaystream.WithMoverOptions(mover.WithHooks(m.MoverHooks("orders"))))
	if err != nil {
		fmt.Println(err)
		return
	}
	billing, err := q.Handle("billing", func(ctx context.Context, msg *group.Message) error {
		return nil // bill the order
	}, group.WithHooks(m.GroupHooks("orders", "billing")))
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := m.Watch(q.Producer(), billing); err != nil {
		fmt.Println(err)
		return
	}

	srv := &http.Server{Addr: ":9090", Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})}
	go func() {
		if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
			fmt.Println(err)
		}
	}()
	defer srv.Close()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := q.Run(ctx); err != nil {
		fmt.Println(err)
	}
}

// A hook of your own on the same field: wrap the adapter's.
func ExampleMetrics_GroupHooks() {
	m, err := dsprom.New()
	if err != nil {
		fmt.Println(err)
		return
	}
	h := m.GroupHooks("orders", "billing")
	count := h.OnDeadLettered
	h.OnDeadLettered = func(msg *group.Message, reason string) {
		count(msg, reason)
		fmt.Println("dead letter:", reason)
	}
	h.OnDeadLettered(nil, group.ReasonUndecodable)
	_ = group.WithHooks(h) // pass to group.New or Queue.Handle
	// Output:
	// dead letter: undecodable entry
}

// Options are checked by New.
func ExampleWithLagBuckets() {
	_, err := dsprom.New(dsprom.WithLagBuckets([]float64{1, 0.5}))
	fmt.Println(errors.Is(err, dsprom.ErrInvalidOption))
	fmt.Println(err)
	// Output:
	// true
	// dsprom: invalid option: lag buckets must be positive and increasing, got [1 0.5]
}
