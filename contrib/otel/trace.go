package dsotel

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"

	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/delaystream/delaystream"
)

// systemName is the messaging.system of delaystream's spans.
const systemName = "delaystream"

// reservedHeaderPrefix starts the header keys delaystream keeps for
// itself: scheduling refuses a message with such a header, so Inject never
// writes one.
const reservedHeaderPrefix = "ds."

// Inject writes the trace context of ctx (and whatever else the
// propagator carries; see [WithPropagator]) into msg's headers, with the
// W3C keys "traceparent" and "tracestate" by default. msg.Headers is
// replaced by a copy with the keys added, so a map shared between
// messages is never changed; with no span in ctx, msg is left as it is.
// Keys starting with "ds." (reserved by delaystream) are not written. The headers
// count towards delaystream's limit on headers per message. Use it before
// Queue.Schedule or for each item of Queue.ScheduleBatch;
// [Telemetry.Schedule] does it in a span of its own.
func (t *Telemetry) Inject(ctx context.Context, msg *delaystream.Message) {
	carrier := propagation.MapCarrier{}
	t.prop.Inject(ctx, carrier)
	if len(carrier) == 0 {
		return
	}
	h := make(map[string]string, len(msg.Headers)+len(carrier))
	maps.Copy(h, msg.Headers)
	for k, v := range carrier {
		if !strings.HasPrefix(k, reservedHeaderPrefix) {
			h[k] = v
		}
	}
	msg.Headers = h
}

// Schedule schedules msg on q (Queue.Schedule) in a producer span
// "schedule <queue>" (a child of ctx's span), whose context it injects
// into the message's headers (see [Telemetry.Inject]), so that the span
// of the handler run ([Telemetry.Middleware]) links to it however long
// the message waits. The span records the message id and an error, if
// any; Schedule returns what q.Schedule does.
func (t *Telemetry) Schedule(ctx context.Context, q *delaystream.Queue, msg delaystream.Message, when delaystream.When) (delaystream.Result, error) {
	ctx, span := t.tracer.Start(ctx, "schedule "+q.Name(),
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(
			semconv.MessagingSystemKey.String(systemName),
			semconv.MessagingOperationTypeSend,
			semconv.MessagingOperationName("schedule"),
			semconv.MessagingDestinationName(q.Name()),
		))
	defer span.End()
	t.Inject(ctx, &msg)
	res, err := q.Schedule(ctx, msg, when)
	if res.ID != "" {
		span.SetAttributes(semconv.MessagingMessageID(res.ID))
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	return res, err
}

// Middleware returns the tracing middleware of queue's groups: give it to
// each group with delaystream.WithMiddleware. Every handler run is a
// consumer span "process <queue>" with a link to the span that scheduled
// the message (read from its headers by the propagator; no link when they
// carry none). The span starts a new trace (or is a child of a span in the
// handler's ctx, if any): a delayed message is handled long after its
// producer's trace ended, so it is linked, not parented. Its attributes
// are the messaging system ("delaystream"), operation ("process"), queue
// (messaging.destination.name), group (messaging.consumer.group.name),
// message id, and [AttrAttempt], [AttrDeliveries], [AttrEntryID]. The
// handler runs with the span in its ctx, plus the message's baggage if the
// propagator carries baggage. A handler error is recorded on the span and
// sets its status to Error, except a delaystream.Drop error, which is
// recorded only; a panic sets the status to Error and goes on up to the
// consumer. Given first to WithMiddleware, the span also covers the
// group's other middleware.
func (t *Telemetry) Middleware(queue string) delaystream.Middleware {
	name := "process " + queue
	return func(next delaystream.Handler) delaystream.Handler {
		return func(ctx context.Context, d *delaystream.Delivery) error {
			ctx, span := t.startProcess(ctx, name, queue, d)
			defer span.End()
			defer func() {
				if p := recover(); p != nil { // the consumer turns it into an error
					span.SetStatus(codes.Error, fmt.Sprintf("panic: %v", p))
					panic(p)
				}
			}()
			err := next(ctx, d)
			if err != nil {
				span.RecordError(err)
				if !isDrop(err) {
					span.SetStatus(codes.Error, err.Error())
				}
			}
			return err
		}
	}
}

// startProcess starts the span of one handler run of d, linked to the
// span found in d's headers, and returns ctx with the span and the
// message's baggage.
func (t *Telemetry) startProcess(ctx context.Context, name, queue string, d *delaystream.Delivery) (context.Context, trace.Span) {
	pctx := t.prop.Extract(context.Background(), propagation.MapCarrier(d.Headers))
	opts := []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			semconv.MessagingSystemKey.String(systemName),
			semconv.MessagingOperationTypeProcess,
			semconv.MessagingOperationName("process"),
			semconv.MessagingDestinationName(queue),
			semconv.MessagingConsumerGroupName(d.Group),
			semconv.MessagingMessageID(d.ID),
			AttrAttempt.Int(d.Attempt),
			AttrDeliveries.Int64(d.Deliveries),
			AttrEntryID.String(d.EntryID),
		),
	}
	if sc := trace.SpanContextFromContext(pctx); sc.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
	}
	if b := baggage.FromContext(pctx); b.Len() > 0 {
		ctx = baggage.ContextWithBaggage(ctx, b)
	}
	return t.tracer.Start(ctx, name, opts...)
}

// isDrop reports whether err asks, as delaystream.Drop does, for its
// delivery to be dropped.
func isDrop(err error) bool { return errors.Is(err, delaystream.ErrDropped) }
