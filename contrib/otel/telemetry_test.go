package dsotel_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/delaystream/delaystream"
	dsotel "github.com/delaystream/delaystream/contrib/otel"
	"github.com/delaystream/delaystream/internal/redistest"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

var quiet = slog.New(slog.DiscardHandler)

// point is one data point: a counter's or gauge's value, or a histogram's
// count and sum.
type point struct {
	value      float64
	count      uint64
	sum        float64
	attributes attribute.Set
}

// collect reads every data point of reader, by instrument name.
func collect(t *testing.T, reader sdkmetric.Reader) map[string][]point {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	out := map[string][]point{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			var ps []point
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					ps = append(ps, point{value: float64(p.Value), attributes: p.Attributes})
				}
			case metricdata.Sum[float64]:
				for _, p := range d.DataPoints {
					ps = append(ps, point{value: p.Value, attributes: p.Attributes})
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					ps = append(ps, point{value: float64(p.Value), attributes: p.Attributes})
				}
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					ps = append(ps, point{value: p.Value, attributes: p.Attributes})
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					ps = append(ps, point{count: p.Count, sum: p.Sum, attributes: p.Attributes})
				}
			case metricdata.Histogram[int64]:
				for _, p := range d.DataPoints {
					ps = append(ps, point{count: p.Count, sum: float64(p.Sum), attributes: p.Attributes})
				}
			default:
				t.Fatalf("%s: unexpected data %T", m.Name, m.Data)
			}
			out[m.Name] = ps
		}
	}
	return out
}

// find returns the point of name whose attributes include every kv, and
// whether there is one.
func find(ms map[string][]point, name string, kv ...attribute.KeyValue) (point, bool) {
	for _, p := range ms[name] {
		if !slices.ContainsFunc(kv, func(want attribute.KeyValue) bool {
			v, ok := p.attributes.Value(want.Key)
			return !ok || v != want.Value
		}) {
			return p, true
		}
	}
	return point{}, false
}

var (
	orders  = attribute.String("messaging.destination.name", "orders")
	billing = attribute.String("messaging.consumer.group.name", "billing")
)

// A known workload against a real Redis: 100 messages scheduled in spans,
// due at once, 10 failing their first attempt, 1 dead-lettered by its
// handler, 5 waiting an hour; and a queue without a mover holding 3
// overdue messages. Metrics through a ManualReader, spans through a
// SpanRecorder.
func TestWorkload(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	ctx := context.Background()

	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() { _ = mp.Shutdown(ctx); _ = tp.Shutdown(ctx) })
	tel, err := dsotel.New(dsotel.WithMeterProvider(mp), dsotel.WithTracerProvider(tp))
	require.NoError(t, err)

	q, err := delaystream.New(rdb, "orders", delaystream.WithPrefix(prefix), delaystream.WithLogger(quiet),
		delaystream.WithMoverHooks(tel.MoverHooks("orders")))
	require.NoError(t, err)
	c, err := q.Handle("billing", func(hctx context.Context, d *delaystream.Delivery) error {
		if !trace.SpanContextFromContext(hctx).IsValid() {
			return delaystream.Drop(errors.New("handler ctx carries no span"))
		}
		n, _ := strconv.Atoi(d.ID[1:])
		switch {
		case n == 99:
			return delaystream.DeadLetter(errors.New("poison"))
		case n < 10 && d.Attempt == 1:
			return errors.New("transient")
		}
		return nil
	}, delaystream.WithMiddleware(tel.Middleware("orders")),
		delaystream.WithHooks(tel.GroupHooks("orders", "billing")),
		delaystream.WithBackoff(delaystream.ConstantBackoff(10*time.Millisecond)))
	require.NoError(t, err)
	// A queue nobody promotes: its messages stay waiting, overdue.
	idle, err := delaystream.New(rdb, "idle", delaystream.WithPrefix(prefix), delaystream.WithoutPromotion())
	require.NoError(t, err)
	require.NoError(t, tel.Watch(q, c))
	require.NoError(t, tel.Watch(idle))
	require.ErrorIs(t, tel.Watch(q, nil), dsotel.ErrInvalidOption)

	// Each message is scheduled in its own request's trace.
	request := tp.Tracer("test")
	producerOf := map[string]trace.SpanContext{} // message id -> its schedule span
	for i := range 100 {
		id := fmt.Sprintf("m%03d", i)
		rctx, rspan := request.Start(ctx, "request")
		_, err := tel.Schedule(rctx, q, delaystream.Message{ID: id, Payload: []byte("x"),
			Headers: map[string]string{"tenant": "acme"}}, delaystream.After(0))
		rspan.End()
		require.NoError(t, err)
	}
	for _, s := range spans.Ended() {
		if s.Name() == "schedule orders" {
			for _, a := range s.Attributes() {
				if a.Key == "messaging.message.id" {
					producerOf[a.Value.AsString()] = s.SpanContext()
				}
			}
			assert.Equal(t, trace.SpanKindProducer, s.SpanKind())
			assert.Equal(t, "request", spans.Ended()[slices.IndexFunc(spans.Ended(), func(r sdktrace.ReadOnlySpan) bool {
				return r.SpanContext().SpanID() == s.Parent().SpanID()
			})].Name(), "a child of the caller's span")
		}
	}
	require.Len(t, producerOf, 100)
	for i := range 5 {
		_, err := q.Schedule(ctx, delaystream.Message{ID: fmt.Sprintf("later%d", i)}, delaystream.After(time.Hour))
		require.NoError(t, err)
	}
	for i := range 3 {
		_, err := idle.Schedule(ctx, delaystream.Message{ID: fmt.Sprintf("late%d", i)}, delaystream.At(time.Now().Add(-time.Minute)))
		require.NoError(t, err)
	}

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- q.Run(runCtx) }()
	require.Eventually(t, func() bool {
		x := c.Counters()
		return x.Acked == 99 && x.DeadLettered == 1
	}, 20*time.Second, 10*time.Millisecond)
	ms := collect(t, reader) // while running: the mover owns its shard
	stop()
	require.NoError(t, <-done)

	value := func(name string, kv ...attribute.KeyValue) float64 {
		t.Helper()
		p, ok := find(ms, name, kv...)
		require.True(t, ok, "no point of %s with %v", name, kv)
		return p.value
	}
	hist := func(name string, kv ...attribute.KeyValue) point {
		t.Helper()
		p, ok := find(ms, name, kv...)
		require.True(t, ok, "no point of %s with %v", name, kv)
		return p
	}

	// Hooks.
	for outcome, want := range map[string]uint64{"acked": 99, "retried": 10, "dead_lettered": 1} {
		assert.Equal(t, want, hist("delaystream.handler.duration", orders, billing, dsotel.AttrOutcome.String(outcome)).count, outcome)
	}
	for _, outcome := range []string{"dropped", "reclaimed", "handed_back", "unsettled"} {
		_, ok := find(ms, "delaystream.handler.duration", dsotel.AttrOutcome.String(outcome))
		assert.False(t, ok, "no %s run", outcome)
	}
	for lane, want := range map[string]uint64{"main": 100, "retry": 10} {
		promo := hist("delaystream.promotion.lag", orders, billing, dsotel.AttrLane.String(lane))
		deliv := hist("delaystream.delivery.lag", orders, billing, dsotel.AttrLane.String(lane))
		assert.Equal(t, want, promo.count, lane)
		assert.Equal(t, want, deliv.count, lane)
		assert.GreaterOrEqual(t, promo.sum, 0.0)
		assert.Less(t, promo.sum, float64(want)*5, "%s: promotion lag under 5 s a message", lane)
		assert.GreaterOrEqual(t, deliv.sum, promo.sum, lane)
	}
	assert.Equal(t, 1.0, value("delaystream.dead_lettered", orders, billing, dsotel.AttrReason.String("handler")))
	assert.Len(t, ms["delaystream.dead_lettered"], 1, "no other reason")
	assert.Empty(t, ms["delaystream.reclaimed"])
	assert.Empty(t, ms["delaystream.deleted_while_pending"])
	assert.Equal(t, 100.0, value("delaystream.mover.promoted", orders))
	batch := hist("delaystream.mover.batch_size", orders)
	assert.Equal(t, 100.0, batch.sum)
	assert.Equal(t, batch.count, hist("delaystream.mover.promote.duration", orders).count)
	assert.Empty(t, ms["delaystream.mover.quarantined"])
	assert.Empty(t, ms["delaystream.mover.errors"])
	assert.Equal(t, 1.0, value("delaystream.mover.owned_shards", orders))

	// Figures read from Redis at the collection.
	assert.Equal(t, 5.0, value("delaystream.queue.waiting", orders))
	assert.Zero(t, value("delaystream.queue.overdue", orders))
	assert.Zero(t, value("delaystream.queue.overdue_age", orders))
	assert.Zero(t, value("delaystream.queue.evicting_servers", orders), "the test server has no memory limit")
	assert.Equal(t, 1.0, value("delaystream.group.consumers", orders, billing))
	assert.Zero(t, value("delaystream.group.pending", orders, billing))
	assert.Zero(t, value("delaystream.group.oldest_pending_age", orders, billing))
	assert.Zero(t, value("delaystream.group.lag", orders, billing))
	assert.Zero(t, value("delaystream.group.retry_waiting", orders, billing))
	assert.Equal(t, 1.0, value("delaystream.group.dead_letters", orders, billing))
	assert.Zero(t, value("delaystream.queue.paused", orders), "not paused")
	assert.Zero(t, value("delaystream.group.paused", orders, billing), "not paused")
	idleQ := attribute.String("messaging.destination.name", "idle")
	assert.Equal(t, 3.0, value("delaystream.queue.waiting", idleQ))
	assert.Equal(t, 3.0, value("delaystream.queue.overdue", idleQ))
	assert.InDelta(t, 60, value("delaystream.queue.overdue_age", idleQ), 10, "due a minute ago")
	_, ok := find(ms, "delaystream.group.pending", idleQ)
	assert.False(t, ok, "no group watched")
	assert.Empty(t, ms["delaystream.stats.errors"])

	// Spans: one per handler run, linked to the message's schedule span.
	var runs []sdktrace.ReadOnlySpan
	for _, s := range spans.Ended() {
		if s.Name() == "process orders" {
			runs = append(runs, s)
		}
	}
	require.Len(t, runs, 110)
	errorsByStatus := 0
	for _, s := range runs {
		attrs := attribute.NewSet(s.Attributes()...)
		id, _ := attrs.Value("messaging.message.id")
		attempt, _ := attrs.Value(dsotel.AttrAttempt)
		group, _ := attrs.Value("messaging.consumer.group.name")
		system, _ := attrs.Value("messaging.system")
		assert.Equal(t, "billing", group.AsString())
		assert.Equal(t, "delaystream", system.AsString())
		assert.Equal(t, trace.SpanKindConsumer, s.SpanKind())
		assert.False(t, s.Parent().IsValid(), "a new trace, linked, not parented")
		require.Len(t, s.Links(), 1, id.AsString())
		assert.Equal(t, producerOf[id.AsString()], s.Links()[0].SpanContext.WithRemote(false), "%s attempt %d links to its schedule span", id.AsString(), attempt.AsInt64())
		n, _ := strconv.Atoi(id.AsString()[1:])
		wantAttempt := int64(1)
		if n < 10 && s.Status().Code == codes.Unset {
			wantAttempt = 2
		}
		assert.Equal(t, wantAttempt, attempt.AsInt64(), id.AsString())
		if s.Status().Code == codes.Error {
			errorsByStatus++
			assert.NotEmpty(t, s.Events(), "the error is recorded")
		}
	}
	assert.Equal(t, 11, errorsByStatus, "10 transient failures and 1 dead letter")
}

// A collection whose Redis reads fail still answers, within the stats
// timeout, without the figures, and counts the failures.
func TestStatsErrors(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 50 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	tel, err := dsotel.New(dsotel.WithMeterProvider(mp), dsotel.WithStatsTimeout(200*time.Millisecond))
	require.NoError(t, err)
	q, err := delaystream.New(rdb, "gone", delaystream.WithLogger(quiet))
	require.NoError(t, err)
	c, err := q.Handle("g", func(context.Context, *delaystream.Delivery) error { return nil })
	require.NoError(t, err)
	require.NoError(t, tel.Watch(q, c))

	t0 := time.Now()
	ms := collect(t, reader)
	assert.Less(t, time.Since(t0), 2*time.Second)
	assert.Empty(t, ms["delaystream.queue.waiting"])
	assert.Empty(t, ms["delaystream.group.pending"])
	// The errors are counted during the collection: the next one reports them.
	p, ok := find(collect(t, reader), "delaystream.stats.errors", attribute.String("messaging.destination.name", "gone"))
	require.True(t, ok)
	assert.Equal(t, 4.0, p.value, "two collections, each failing the queue's read and the group's")

	require.NoError(t, tel.Close())
	require.NoError(t, tel.Close(), "idempotent")
	assert.Empty(t, collect(t, reader)["delaystream.queue.waiting"])
}

// Each hook moves the instrument it should, with the values it was given.
func TestHooks(t *testing.T) {
	t.Parallel()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	tel, err := dsotel.New(dsotel.WithMeterProvider(mp))
	require.NoError(t, err)
	gh, mh := tel.GroupHooks("q", "g"), tel.MoverHooks("q")
	now := time.Now()
	entry := fmt.Sprintf("%d-0", now.Add(-2*time.Second).UnixMilli())
	first := &delaystream.Delivery{ID: "a", Attempt: 1, Deliveries: 1, Due: now.Add(-3 * time.Second), EntryID: entry}
	again := &delaystream.Delivery{ID: "a", Attempt: 1, Deliveries: 2, Due: first.Due, EntryID: entry}
	retry := &delaystream.Delivery{ID: "a", Attempt: 2, Deliveries: 1, Due: now.Add(-time.Second), EntryID: fmt.Sprintf("%d-0", now.UnixMilli())}
	gh.OnDelivered(first)
	gh.OnDelivered(again)
	gh.OnDelivered(retry)
	gh.OnHandled(first, delaystream.HandlerAcked, 250*time.Millisecond)
	gh.OnHandled(first, delaystream.HandlerOutcome(42), time.Second)
	gh.OnDeadLettered(nil, delaystream.ReasonUndecodable)
	gh.OnDeadLettered(first, "some new reason")
	gh.OnReclaimed("stream", 3, 1)
	gh.OnDataLoss(errors.New("lost"))
	gh.OnLimitWait(1500 * time.Millisecond)
	mh.OnPromote("lane", 10, 2, 3*time.Millisecond)
	mh.OnPromote("lane", 0, 1, time.Millisecond)
	mh.OnError("lane", errors.New("x"), true)
	mh.OnError("lane", errors.New("x"), false)
	mh.OnError("lane", errors.New("x"), false)
	mh.OnOwnership([]int{0, 2, 5})
	mh.OnDataLoss(errors.New("lost"))

	ms := collect(t, reader)
	qa, ga := attribute.String("messaging.destination.name", "q"), attribute.String("messaging.consumer.group.name", "g")
	get := func(name string, kv ...attribute.KeyValue) point {
		t.Helper()
		p, ok := find(ms, name, append([]attribute.KeyValue{qa}, kv...)...)
		require.True(t, ok, "no point of %s with %v", name, kv)
		return p
	}
	main, retryLane := dsotel.AttrLane.String("main"), dsotel.AttrLane.String("retry")
	assert.EqualValues(t, 1, get("delaystream.promotion.lag", ga, main).count)
	assert.InDelta(t, 1.0, get("delaystream.promotion.lag", ga, main).sum, 0.01)
	assert.EqualValues(t, 1, get("delaystream.promotion.lag", ga, retryLane).count)
	assert.EqualValues(t, 2, get("delaystream.delivery.lag", ga, main).count)
	assert.GreaterOrEqual(t, get("delaystream.delivery.lag", ga, main).sum, 6.0)
	assert.EqualValues(t, 1, get("delaystream.delivery.lag", ga, retryLane).count)
	assert.InDelta(t, 0.25, get("delaystream.handler.duration", ga, dsotel.AttrOutcome.String("acked")).sum, 1e-9)
	assert.EqualValues(t, 1, get("delaystream.handler.duration", ga, dsotel.AttrOutcome.String("unknown")).count)
	assert.Equal(t, 1.0, get("delaystream.dead_lettered", ga, dsotel.AttrReason.String("undecodable")).value)
	assert.Equal(t, 1.0, get("delaystream.dead_lettered", ga, dsotel.AttrReason.String("other")).value)
	assert.Equal(t, 3.0, get("delaystream.reclaimed", ga).value)
	assert.Equal(t, 1.0, get("delaystream.deleted_while_pending", ga).value)
	assert.Equal(t, 1.0, get("delaystream.group.data_loss", ga).value)
	assert.Equal(t, 1.5, get("delaystream.group.limit_wait", ga).value)
	assert.Equal(t, 10.0, get("delaystream.mover.promoted").value)
	assert.Equal(t, 3.0, get("delaystream.mover.quarantined").value)
	assert.EqualValues(t, 1, get("delaystream.mover.batch_size").count)
	assert.EqualValues(t, 2, get("delaystream.mover.promote.duration").count)
	assert.InDelta(t, 0.004, get("delaystream.mover.promote.duration").sum, 1e-9)
	assert.Equal(t, 1.0, get("delaystream.mover.errors", dsotel.AttrStuck.Bool(true)).value)
	assert.Equal(t, 2.0, get("delaystream.mover.errors", dsotel.AttrStuck.Bool(false)).value)
	assert.Equal(t, 3.0, get("delaystream.mover.owned_shards").value)
	assert.Equal(t, 1.0, get("delaystream.mover.data_loss").value)
}

// Inject writes W3C headers into a copy of the headers, only with a span,
// never under the reserved prefix; Middleware links to what it reads.
func TestPropagation(t *testing.T) {
	t.Parallel()
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	tel, err := dsotel.New(dsotel.WithTracerProvider(tp), dsotel.WithPropagator(propagation.NewCompositeTextMapPropagator(
		propagation.TraceContext{}, propagation.Baggage{}, reservedWriter{})))
	require.NoError(t, err)

	shared := map[string]string{"k": "v"}
	msg := delaystream.Message{Headers: shared}
	tel.Inject(context.Background(), &msg)
	assert.Equal(t, map[string]string{"k": "v"}, msg.Headers, "no span: nothing written")

	ctx, span := tp.Tracer("test").Start(context.Background(), "producer")
	tel.Inject(ctx, &msg)
	span.End()
	assert.Equal(t, map[string]string{"k": "v"}, shared, "the caller's map is not changed")
	assert.Contains(t, msg.Headers, "traceparent")
	assert.Equal(t, "v", msg.Headers["k"])
	assert.NotContains(t, msg.Headers, reservedKey, "reserved keys are never written")
	assert.Contains(t, msg.Headers["traceparent"], span.SpanContext().TraceID().String())

	var inner trace.SpanContext
	mw := tel.Middleware("q")
	h := mw(func(ctx context.Context, d *delaystream.Delivery) error {
		inner = trace.SpanContextFromContext(ctx)
		return fmt.Errorf("wrapped: %w", delaystream.Drop(errors.New("stale")))
	})
	err = h(context.Background(), &delaystream.Delivery{ID: "id", Group: "g", Attempt: 3, Deliveries: 2, Headers: msg.Headers, EntryID: "1-0"})
	require.Error(t, err)
	ended := spans.Ended()
	s := ended[len(ended)-1]
	assert.Equal(t, inner, s.SpanContext(), "the handler runs in the span")
	require.Len(t, s.Links(), 1)
	assert.Equal(t, span.SpanContext(), s.Links()[0].SpanContext.WithRemote(false))
	assert.Equal(t, codes.Unset, s.Status().Code, "a Drop is not an error")
	assert.NotEmpty(t, s.Events(), "the Drop is recorded")
	attrs := attribute.NewSet(s.Attributes()...)
	for k, want := range map[attribute.Key]attribute.Value{
		dsotel.AttrAttempt: attribute.IntValue(3), dsotel.AttrDeliveries: attribute.Int64Value(2),
		"messaging.consumer.group.name": attribute.StringValue("g"), "messaging.destination.name": attribute.StringValue("q"),
		dsotel.AttrEntryID: attribute.StringValue("1-0"), "messaging.operation.type": attribute.StringValue("process"),
	} {
		v, ok := attrs.Value(k)
		assert.True(t, ok, k)
		assert.Equal(t, want, v, k)
	}

	// Any other error sets the status.
	require.Error(t, mw(func(context.Context, *delaystream.Delivery) error {
		return delaystream.RetryAfter(time.Second, errors.New("busy"))
	})(context.Background(), &delaystream.Delivery{ID: "r"}))
	ended = spans.Ended()
	assert.Equal(t, codes.Error, ended[len(ended)-1].Status().Code)

	// No headers: a span without links.
	require.NoError(t, mw(func(context.Context, *delaystream.Delivery) error { return nil })(context.Background(), &delaystream.Delivery{ID: "x"}))
	ended = spans.Ended()
	assert.Empty(t, ended[len(ended)-1].Links())

	// A panic marks the span and goes on.
	assert.Panics(t, func() {
		_ = mw(func(context.Context, *delaystream.Delivery) error { panic("boom") })(context.Background(), &delaystream.Delivery{ID: "p"})
	})
	ended = spans.Ended()
	assert.Equal(t, codes.Error, ended[len(ended)-1].Status().Code)
}

// reservedKey is a header key under the prefix delaystream reserves.
const reservedKey = "ds.x"

// reservedWriter is a propagator that tries to write a reserved header.
type reservedWriter struct{}

func (reservedWriter) Inject(ctx context.Context, c propagation.TextMapCarrier) {
	if trace.SpanContextFromContext(ctx).IsValid() {
		c.Set(reservedKey, "1")
	}
}
func (reservedWriter) Extract(ctx context.Context, _ propagation.TextMapCarrier) context.Context {
	return ctx
}
func (reservedWriter) Fields() []string { return []string{reservedKey} }

func TestOptions(t *testing.T) {
	t.Parallel()
	for name, opt := range map[string]dsotel.Option{
		"nil meter provider":  dsotel.WithMeterProvider(nil),
		"nil tracer provider": dsotel.WithTracerProvider(nil),
		"nil propagator":      dsotel.WithPropagator(nil),
		"no lag buckets":      dsotel.WithLagBuckets(nil),
		"decreasing buckets":  dsotel.WithDurationBuckets([]float64{2, 1}),
		"timeout too short":   dsotel.WithStatsTimeout(time.Millisecond),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := dsotel.New(opt)
			assert.ErrorIs(t, err, dsotel.ErrInvalidOption)
		})
	}
	tel, err := dsotel.New(dsotel.WithLagBuckets([]float64{.01, 1}), dsotel.WithStatsTimeout(time.Second))
	require.NoError(t, err)
	assert.NoError(t, tel.Close())
}
