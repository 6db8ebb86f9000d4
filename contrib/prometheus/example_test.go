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
)

// Compile-only: needs a Redis server, so no Output line. One Metrics for
// the process: its mover hooks go into the queue, its group hooks into
// each group, Watch names the queues a scrape reads from Redis, and the
// registry serves it all.
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

	q, err := delaystream.New(rdb, "orders", delaystream.WithMoverHooks(m.MoverHooks("orders")))
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = q.Handle("billing", func(ctx context.Context, d *delaystream.Delivery) error {
		return nil // bill the order
	}, delaystream.WithHooks(m.GroupHooks("orders", "billing")))
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := m.Watch(rdb, "", "orders"); err != nil { // "": the default prefix
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

// Compile-only: needs a Redis server. An exporter that runs no queue of
// its own reads the figures of any queue under a prefix, by name.
func ExampleMetrics_Watch() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()

	m, err := dsprom.New()
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := m.Watch(rdb, "app", "orders", "invoices"); err != nil {
		fmt.Println(err)
		return
	}
	prometheus.MustRegister(m)
	fmt.Println(http.ListenAndServe(":9090", promhttp.Handler()))
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
	h.OnDeadLettered = func(d *delaystream.Delivery, reason string) {
		count(d, reason)
		fmt.Println("dead letter:", reason)
	}
	h.OnDeadLettered(nil, delaystream.ReasonUndecodable)
	_ = delaystream.WithHooks(h) // pass to Queue.Handle
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
