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

	"github.com/delaystream/delaystream/internal/delay"
	"github.com/delaystream/delaystream/internal/group"
)

// systemName is the messaging.system of delaystream's spans.
const systemName = "delaystream"

// Inject writes the trace context of ctx (and whatever else the
// propagator carries; see [WithPropagator]) into msg's headers, with the
// W3C keys "traceparent" and "tracestate" by default. msg.Headers is
// replaced by a copy with the keys added, so a map shared between
// messages is never changed; with no span in ctx, msg is left as it is.
// Keys starting with delay.ReservedHeaderPrefix are not written. The
// headers count towards delay.MaxHeaders. Use it before Schedule or for
// each item of ScheduleBatch; [Telemetry.Schedule] does it in a span of
// its own.
func (t *Telemetry) Inject(ctx context.Context, msg *delay.Message) {
	carrier := propagation.MapCarrier{}
	t.prop.Inject(ctx, carrier)
	if len(carrier) == 0 {
		return
	}
	h := make(map[string]string, len(msg.Headers)+len(carrier))
	maps.Copy(h, msg.Headers)
	for k, v := range carrier {
		if !strings.HasPrefix(k, delay.ReservedHeaderPrefix) {
			h[k] = v
		}
	}
	msg.Headers = h
}

// Schedule schedules msg on q (delay.Queue.Schedule; with the front door,
// q.Producer()) in a producer span "schedule <queue>" (a child of ctx's
// span), whose context it injects into the message's headers (see
// [Telemetry.Inject]), so that the handler's span ([Telemetry.Handler])
// links to it however long the message waits. The span records the
// message id and an error, if any; Schedule returns what q.Schedule does.
func (t *Telemetry) Schedule(ctx context.Context, q *delay.Queue, msg delay.Message, when delay.When) (delay.Result, error) {
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

// Handler wraps h so that every run is a consumer span "process <queue>"
// with a link to the span that scheduled the message (read from its
// headers by the propagator; no link when they carry none). The span
// starts a new trace (or is a child of a span in the handler's ctx, if
// any): a delayed message is handled long after its producer's trace
// ended, so it is linked, not parented. Its attributes are the messaging
// system ("delaystream"), operation ("process"), queue
// (messaging.destination.name), group (messaging.consumer.group.name),
// message id, and [AttrAttempt], [AttrDeliveries], [AttrEntryID]. h runs
// with the span in its ctx, plus the message's baggage if the propagator
// carries baggage. A handler error is recorded on the span and sets its
// status to Error, except a group.Drop error, which is recorded only; a
// panic sets the status to Error and goes on up to the consumer.
func (t *Telemetry) Handler(queue string, h group.Handler) group.Handler {
	name := "process " + queue
	return func(ctx context.Context, m *group.Message) error {
		pctx := t.prop.Extract(context.Background(), propagation.MapCarrier(m.Headers))
		opts := []trace.SpanStartOption{
			trace.WithSpanKind(trace.SpanKindConsumer),
			trace.WithAttributes(
				semconv.MessagingSystemKey.String(systemName),
				semconv.MessagingOperationTypeProcess,
				semconv.MessagingOperationName("process"),
				semconv.MessagingDestinationName(queue),
				semconv.MessagingConsumerGroupName(m.Group),
				semconv.MessagingMessageID(m.ID),
				AttrAttempt.Int(m.Attempt),
				AttrDeliveries.Int64(m.Deliveries),
				AttrEntryID.String(m.EntryID),
			),
		}
		if sc := trace.SpanContextFromContext(pctx); sc.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
		}
		if b := baggage.FromContext(pctx); b.Len() > 0 {
			ctx = baggage.ContextWithBaggage(ctx, b)
		}
		ctx, span := t.tracer.Start(ctx, name, opts...)
		defer span.End()
		defer func() {
			if p := recover(); p != nil { // the consumer turns it into an error
				span.SetStatus(codes.Error, fmt.Sprintf("panic: %v", p))
				panic(p)
			}
		}()
		err := h(ctx, m)
		if err != nil {
			span.RecordError(err)
			var drop *group.DropError
			if !errors.As(err, &drop) {
				span.SetStatus(codes.Error, err.Error())
			}
		}
		return err
	}
}
