package dsotel_test

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/delaystream/delaystream"
	dsotel "github.com/delaystream/delaystream/contrib/otel"
)

// Compile-only: needs a Redis server, so no Output line. One Telemetry for
// the process, on the global providers (set up by your OpenTelemetry SDK
// setup): its mover hooks go into the queue, its group hooks and tracing
// middleware into each group, Watch names what a collection reads from
// Redis, and the producer schedules through it.
func ExampleNew() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()

	tel, err := dsotel.New()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer tel.Close()

	q, err := delaystream.New(rdb, "orders", delaystream.WithMoverHooks(tel.MoverHooks("orders")))
	if err != nil {
		fmt.Println(err)
		return
	}
	billing, err := q.Handle("billing", func(ctx context.Context, d *delaystream.Delivery) error {
		return nil // ctx carries the span, linked to the one that scheduled d
	}, delaystream.WithHooks(tel.GroupHooks("orders", "billing")),
		delaystream.WithMiddleware(tel.Middleware("orders")))
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := tel.Watch(q, billing); err != nil {
		fmt.Println(err)
		return
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if _, err := tel.Schedule(ctx, q, delaystream.Message{ID: "order:5001:cancel"}, delaystream.After(30*time.Minute)); err != nil {
		fmt.Println(err)
		return
	}
	if err := q.Run(ctx); err != nil {
		fmt.Println(err)
	}
}

// Inject writes the W3C trace context into the headers: for ScheduleBatch
// items, or a Schedule in a span of your own.
func ExampleTelemetry_Inject() {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tracetest.NewSpanRecorder()))
	tel, err := dsotel.New(dsotel.WithTracerProvider(tp), dsotel.WithPropagator(propagation.TraceContext{}))
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, span := tp.Tracer("app").Start(context.Background(), "checkout")
	defer span.End()

	msg := delaystream.Message{ID: "order:5001:cancel", Headers: map[string]string{"tenant": "acme"}}
	tel.Inject(ctx, &msg)
	fmt.Println(len(msg.Headers), msg.Headers["tenant"], msg.Headers["traceparent"][:3])
	// Output:
	// 2 acme 00-
}
