package dsotel

import (
	"errors"
	"fmt"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/delaystream/delaystream"
)

// ScopeName is the instrumentation scope of the meter and the tracer.
const ScopeName = "github.com/delaystream/delaystream/contrib/otel"

// Attribute keys of the metrics and spans, beyond OpenTelemetry's
// messaging conventions (messaging.destination.name is the queue,
// messaging.consumer.group.name the group).
const (
	// AttrLane: "main" for a first attempt (the queue stream), "retry" for
	// a later one (the group's retry lane).
	AttrLane = attribute.Key("delaystream.lane")
	// AttrOutcome: how a handler's run ended (delaystream.HandlerOutcome's
	// String).
	AttrOutcome = attribute.Key("delaystream.outcome")
	// AttrReason: a dead letter's reason (attempts, deliveries, handler,
	// undecodable, deleted, expired, other).
	AttrReason = attribute.Key("delaystream.reason")
	// AttrStuck: whether a mover error repeats until the data is fixed.
	AttrStuck = attribute.Key("delaystream.stuck")
	// AttrAttempt: the message's attempt (1, then +1 per retry).
	AttrAttempt = attribute.Key("delaystream.attempt")
	// AttrDeliveries: times the stream entry was delivered (more than 1
	// after reclaims).
	AttrDeliveries = attribute.Key("delaystream.deliveries")
	// AttrEntryID: the stream entry id.
	AttrEntryID = attribute.Key("delaystream.entry_id")
)

// Telemetry is delaystream's OpenTelemetry instrumentation: metrics fed by
// the core's hooks ([Telemetry.GroupHooks], [Telemetry.MoverHooks]),
// observable gauges of the watched queues and groups read from Redis at
// each collection ([Telemetry.Watch]), and tracing across the delay: the
// producer writes the trace context into the message's headers
// ([Telemetry.Inject], [Telemetry.Schedule]) and the consumer's handler
// runs in a span linked to it ([Telemetry.Middleware]). Its methods are safe
// for concurrent use; its hooks never block.
type Telemetry struct {
	cfg    config
	tracer trace.Tracer
	prop   propagation.TextMapPropagator

	promotionLag    metric.Float64Histogram
	deliveryLag     metric.Float64Histogram
	handlerDuration metric.Float64Histogram
	deadLettered    metric.Int64Counter
	reclaimed       metric.Int64Counter
	deletedPending  metric.Int64Counter
	groupDataLoss   metric.Int64Counter
	limitWait       metric.Float64Counter

	promoted        metric.Int64Counter
	quarantined     metric.Int64Counter
	batchSize       metric.Int64Histogram
	promoteDuration metric.Float64Histogram
	moverErrors     metric.Int64Counter
	ownedShards     metric.Int64Gauge
	moverDataLoss   metric.Int64Counter

	statsErrors metric.Int64Counter
	gauges      gauges
	reg         metric.Registration

	mu      sync.Mutex
	watched []*watch
}

// New returns Telemetry with the given options (errors wrap
// [ErrInvalidOption]): it creates its instruments with the meter provider
// and registers the callback of its observable gauges, which reads
// nothing until [Telemetry.Watch] is called. It starts no goroutine;
// [Telemetry.Close] unregisters the callback.
func New(opts ...Option) (*Telemetry, error) {
	cfg := defaults()
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&cfg); err != nil {
			return nil, err
		}
	}
	t := &Telemetry{cfg: cfg, tracer: cfg.tracers.Tracer(ScopeName), prop: cfg.propagator}
	mt := cfg.meters.Meter(ScopeName)
	var errs []error
	fhist := func(name, desc, unit string, buckets []float64) metric.Float64Histogram {
		h, err := mt.Float64Histogram(name, metric.WithDescription(desc), metric.WithUnit(unit), metric.WithExplicitBucketBoundaries(buckets...))
		errs = append(errs, err)
		return h
	}
	counter := func(name, desc, unit string) metric.Int64Counter {
		c, err := mt.Int64Counter(name, metric.WithDescription(desc), metric.WithUnit(unit))
		errs = append(errs, err)
		return c
	}
	var err0 error
	t.promotionLag = fhist("delaystream.promotion.lag",
		"Time from a message's due time to its append to the stream (Redis clock), observed by each group at the entry's first delivery.", "s", cfg.lagBuckets)
	t.deliveryLag = fhist("delaystream.delivery.lag",
		"Time from a message's due time (Redis clock) to the start of its handler (consumer clock), per delivery.", "s", cfg.lagBuckets)
	t.handlerDuration = fhist("delaystream.handler.duration", "Run time of the handler, by how the run ended.", "s", cfg.durationBuckets)
	t.deadLettered = counter("delaystream.dead_lettered", "Entries appended to the group's dead letters, by reason.", "{message}")
	t.reclaimed = counter("delaystream.reclaimed", "Pending entries this process's consumers took over from other consumers (XAUTOCLAIM).", "{message}")
	t.deletedPending = counter("delaystream.deleted_while_pending", "Pending entries XAUTOCLAIM found deleted from the stream (recorded as dead letters).", "{message}")
	t.groupDataLoss = counter("delaystream.group.data_loss", "Times a consumer found that Redis lost the queue's data.", "{event}")
	t.limitWait, err0 = mt.Float64Counter("delaystream.group.limit_wait",
		metric.WithDescription("Time this process's consumers waited, with workers free, for the group's flow limits."), metric.WithUnit("s"))
	errs = append(errs, err0)
	t.promoted = counter("delaystream.mover.promoted", "Due messages the mover appended to the queue stream.", "{message}")
	t.quarantined = counter("delaystream.mover.quarantined", "Waiting-set members the mover could not read and set aside in the quarantine.", "{message}")
	var err error
	t.batchSize, err = mt.Int64Histogram("delaystream.mover.batch_size",
		metric.WithDescription("Entries appended to the stream by one promote call, for calls that appended any."),
		metric.WithUnit("{message}"), metric.WithExplicitBucketBoundaries(BatchBuckets...))
	errs = append(errs, err)
	t.promoteDuration = fhist("delaystream.mover.promote.duration",
		"Duration of one promote script call (round trip included), for calls that moved or quarantined anything.", "s", PromoteBuckets)
	t.moverErrors = counter("delaystream.mover.errors", "Failed promote calls and mover registry beats.", "{error}")
	t.ownedShards, err = mt.Int64Gauge("delaystream.mover.owned_shards",
		metric.WithDescription("Shards of the queue this process's mover promotes."), metric.WithUnit("{shard}"))
	errs = append(errs, err)
	t.moverDataLoss = counter("delaystream.mover.data_loss", "Times the mover found that Redis lost the queue's data.", "{event}")
	t.statsErrors = counter("delaystream.stats.errors", "Collections whose read of a watched queue's or group's figures failed or timed out.", "{error}")
	errs = append(errs, t.gauges.create(mt))
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("dsotel: create instruments: %w", err)
	}
	if t.reg, err = mt.RegisterCallback(t.observe, t.gauges.all()...); err != nil {
		return nil, fmt.Errorf("dsotel: register callback: %w", err)
	}
	return t, nil
}

// Close unregisters the callback of the observable gauges: collections no
// longer read Redis. The hooks keep working. It is idempotent.
func (t *Telemetry) Close() error {
	t.mu.Lock()
	reg := t.reg
	t.reg = nil
	t.mu.Unlock()
	if reg == nil {
		return nil
	}
	return reg.Unregister()
}

// Label values of the dead-letter reasons, from the one table of
// dead-letter reasons (delaystream.Reasons, delaystream.ReasonLabel).
var reasonLabels = func() map[string]string {
	m := map[string]string{}
	for _, r := range delaystream.Reasons() {
		m[r] = delaystream.ReasonLabel(r)
	}
	return m
}()

// reasonOther is the label value of dead-letter reasons this release does
// not know.
const reasonOther = delaystream.ReasonOther

// The handler outcomes, in the order of delaystream.HandlerOutcome.
var outcomes = []delaystream.HandlerOutcome{
	delaystream.HandlerAcked, delaystream.HandlerRetried, delaystream.HandlerDeadLettered, delaystream.HandlerDropped,
	delaystream.HandlerReclaimed, delaystream.HandlerHandedBack, delaystream.HandlerUnsettled,
}

// queueAttrs are the attributes naming a queue and, if given, a group.
func queueAttrs(queue, groupName string, more ...attribute.KeyValue) attribute.Set {
	kv := []attribute.KeyValue{semconv.MessagingDestinationName(queue)}
	if groupName != "" {
		kv = append(kv, semconv.MessagingConsumerGroupName(groupName))
	}
	return attribute.NewSet(append(kv, more...)...)
}
