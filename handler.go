package delaystream

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/delaystream/delaystream/codec"
	"github.com/delaystream/delaystream/internal/group"
	"github.com/delaystream/delaystream/internal/stream"
)

// Delivery is one message as a consumer group's handler receives it.
type Delivery struct {
	ID         string            // the message id given or generated at scheduling
	Payload    []byte            // as scheduled
	Headers    map[string]string // as scheduled; nil when none
	Attempt    int               // 1 on the first delivery, +1 per counted retry
	Deliveries int64             // times this stream entry was delivered: 1, more after a crashed consumer's entries are reclaimed (entries handed back unstarted at a stop or pause keep their count)
	Due        time.Time         // when it was due (Redis clock)
	Created    time.Time         // when it was first scheduled (producer clock)
	Deadline   time.Time         // when it expires unhandled (producer clock); zero: never
	Group      string            // the consumer group
	EntryID    string            // the stream entry id (unique per delivery attempt)
}

// delivery returns the Delivery of m, built once: the handler and the
// group's hooks get the same one.
func delivery(m *group.Message) *Delivery {
	if m == nil {
		return nil
	}
	if d, ok := m.View.(*Delivery); ok {
		return d
	}
	d := &Delivery{ID: m.ID, Payload: m.Payload, Headers: m.Headers, Attempt: m.Attempt, Deliveries: m.Deliveries,
		Due: m.Due, Created: m.Created, Deadline: m.Deadline, Group: m.Group, EntryID: m.EntryID}
	m.View = d
	return d
}

// Appended returns when the message was appended to the stream it was
// read from (the time part of EntryID, by the Redis clock): Appended
// minus Due is how late promotion was.
func (d *Delivery) Appended() time.Time { return stream.EntryTime(d.EntryID) }

// Handler handles one delivery. It returns nil to acknowledge it; an error
// schedules the next attempt after the group's backoff, or dead-letters the
// message once the group's attempts are used up. [DeadLetter], [Drop],
// [RetryAfter] and [Snooze] wrap an error to ask for something else. A
// panic counts as an error. ctx ends when the attempt's time is up
// ([WithHandlerTimeout]), when another consumer took the entry over, or
// when the drain timeout passed at shutdown.
type Handler func(ctx context.Context, d *Delivery) error

// Middleware wraps a handler: logging, tracing, recovery, per-tenant
// checks. It calls next to go on, or returns without calling it to settle
// the delivery itself.
type Middleware func(next Handler) Handler

// DeadLetter returns an error that sends the message to the group's dead
// letters at once, without further attempts, with err as its last error.
func DeadLetter(err error) error { return group.DeadLetter(err) }

// Drop returns an error that acknowledges the message without retry and
// without a dead letter: the handler decided it needs no handling.
func Drop(err error) error { return group.Drop(err) }

// RetryAfter returns an error that schedules the next attempt after d
// instead of the group's backoff (for a downstream that answered "retry
// after d"). The attempt counts towards [WithMaxAttempts] like any
// failure.
func RetryAfter(d time.Duration, err error) error {
	return &group.RetryError{Delay: d, Counted: true, Err: err}
}

// Snooze returns an error that delivers the message again after d without
// counting an attempt: the next delivery has the same Attempt. A handler
// that snoozes for ever keeps its message for ever.
func Snooze(d time.Duration) error { return &group.RetryError{Delay: d} }

// chain applies the group's middleware (the first given outermost) and its
// handler timeout around h.
func chain(h Handler, mw []Middleware, timeout time.Duration) Handler {
	for i := len(mw) - 1; i >= 0; i-- {
		h = mw[i](h)
	}
	if timeout <= 0 {
		return h
	}
	return func(ctx context.Context, d *Delivery) error {
		ctx, cancel := context.WithTimeoutCause(ctx, timeout, errHandlerTimeout)
		defer cancel()
		err := h(ctx, d)
		if context.Cause(ctx) == errHandlerTimeout {
			return fmt.Errorf("%w (%s): %w", errHandlerTimeout, timeout, errors.Join(err, context.DeadlineExceeded))
		}
		return err
	}
}

var errHandlerTimeout = errors.New("delaystream: handler timed out")

// internalHandler adapts h to the consumer's handler type.
func internalHandler(h Handler) group.Handler {
	return func(ctx context.Context, m *group.Message) error { return h(ctx, delivery(m)) }
}

// typed decodes the payload into a T with cd before calling h; a payload
// that does not decode dead-letters the message with [ReasonUndecodable].
func typed[T any](cd codec.Codec, h func(ctx context.Context, d *Delivery, v T) error) Handler {
	return func(ctx context.Context, d *Delivery) error {
		var v T
		if err := cd.Unmarshal(d.Payload, &v); err != nil {
			return &group.UndecodableError{Err: fmt.Errorf("decode payload as %T: %w", v, err)}
		}
		return h(ctx, d, v)
	}
}
