package group

import (
	"context"
	"errors"
	"time"

	"github.com/delaystream/delaystream/codec"
	"github.com/delaystream/delaystream/internal/errs"
)

// Message is one delivery of a due message to a group.
type Message struct {
	ID         string            // message id given or generated at scheduling
	Payload    []byte            // as scheduled
	Headers    map[string]string // as scheduled; nil when none
	Attempt    int               // 1 on the first delivery, +1 per retry after a handler error
	Deliveries int64             // times this stream entry was delivered: 1, more after reclaims
	Due        time.Time         // when it was due (Redis clock)
	Created    time.Time         // when it was first scheduled (producer clock)
	Deadline   time.Time         // when the message expires unhandled (producer clock); zero: never
	Group      string            // the consumer group
	Stream     string            // the stream key it was read from (queue stream or retry lane)
	EntryID    string            // the stream entry id
	// View is the front door's view of the message, built by its first
	// user and kept here so that the handler and every hook share it. It
	// is written and read on the worker goroutine that handles the
	// message only; the consumer never reads it.
	View any
}

// Handler processes one message. Returning nil acknowledges it. Returning an
// error retries it in this group only, after the backoff, until the max
// attempts are used up; then it is dead-lettered. Wrap the error with
// [DeadLetter] to dead-letter at once, or with [Drop] to acknowledge without
// retry. A panic counts as an error. ctx is cancelled when the drain timeout
// ends or when another consumer has taken the entry over; handlers must
// honour it.
type Handler func(ctx context.Context, m *Message) error

// DeadLetterError asks for the message to be dead-lettered at once, without
// further attempts. Create it with [DeadLetter].
type DeadLetterError struct{ Err error }

// Error implements error.
func (e *DeadLetterError) Error() string { return "dead-letter: " + errString(e.Err) }

// Unwrap returns the cause.
func (e *DeadLetterError) Unwrap() error { return e.Err }

// DropError asks for the message to be acknowledged and not retried; it is
// counted in Counters.Dropped and reported to Hooks.OnDropped. Create it with
// [Drop].
type DropError struct{ Err error }

// Error implements error.
func (e *DropError) Error() string { return "drop: " + errString(e.Err) }

// Unwrap returns the cause.
func (e *DropError) Unwrap() error { return e.Err }

// Is makes a DropError match errs.ErrDropped.
func (e *DropError) Is(target error) bool { return target == errs.ErrDropped }

// DeadLetter wraps err so the handler's failure dead-letters the message now.
func DeadLetter(err error) error { return &DeadLetterError{Err: err} }

// Drop wraps err so the handler's failure acknowledges the message without
// retry ("this no longer matters").
func Drop(err error) error { return &DropError{Err: err} }

// RetryError asks for the next attempt after Delay instead of the
// backoff's. Counted says whether the attempt counts towards the group's
// maximum; an uncounted one is delivered again with the same Attempt.
type RetryError struct {
	Delay   time.Duration
	Counted bool
	Err     error
}

func (e *RetryError) Error() string {
	if !e.Counted {
		return "snooze " + e.Delay.String()
	}
	return "retry after " + e.Delay.String() + ": " + errString(e.Err)
}

func (e *RetryError) Unwrap() error { return e.Err }

// UndecodableError dead-letters the entry with [ReasonUndecodable]: its
// payload does not decode into the handler's type.
type UndecodableError struct{ Err error }

func (e *UndecodableError) Error() string { return "undecodable payload: " + errString(e.Err) }

func (e *UndecodableError) Unwrap() error { return e.Err }

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// Typed adapts a handler of values of type T, decoded from the payload with
// cd (use the producer's codec; codec.Msgpack by default). A payload that
// does not decode is dead-lettered at once with the decoding error.
func Typed[T any](cd codec.Codec, h func(ctx context.Context, m *Message, v T) error) Handler {
	return func(ctx context.Context, m *Message) error {
		var v T
		if err := cd.Unmarshal(m.Payload, &v); err != nil {
			return &UndecodableError{Err: err}
		}
		return h(ctx, m, v)
	}
}

// Hooks are optional callbacks about deliveries. They run on the
// consumer's goroutines and must not block; nil hooks are skipped.
type Hooks struct {
	OnDelivered func(m *Message)                     // before the handler runs
	OnAcked     func(m *Message, took time.Duration) // handler succeeded
	// OnFailed is called for every failure of the handler (a Snooze too,
	// though it counts no attempt; not a Drop error), once it is settled, with the
	// handler's error: retried, with retryIn the wait before the next
	// attempt; or the last one (the last attempt, a DeadLetter error, an
	// undecodable payload), with retryIn 0, just before OnDeadLettered
	// gets the reason. OnHandled's outcome tells the two apart.
	OnFailed       func(m *Message, err error, retryIn time.Duration)
	OnDeadLettered func(m *Message, reason string)         // m is nil for entries that could not be decoded
	OnDropped      func(m *Message, err error)             // handler returned a Drop error
	OnReclaimed    func(stream string, n int, deleted int) // XAUTOCLAIM took n entries; deleted were gone from the stream
	// OnLimitWait is called after each wait of the reader for the group's
	// flow limits (WithConcurrencyLimit, WithRateLimit), with its length.
	OnLimitWait func(d time.Duration)
	// OnDataLoss is called, once per loss, when a read finds the group
	// missing and the queue's record (stream.Layout.Meta) gone or
	// recreated since this consumer last saw it: Redis lost the queue's
	// data (restarted without persistence, FLUSHALL, a failover to a
	// replica that had none of it). err wraps stream.ErrDataLost; the loss
	// is also logged at error level. The group is recreated and the
	// consumer goes on.
	OnDataLoss func(err error)
	// OnHandled is called once after every run of the handler, when its
	// outcome is settled (or settling it was tried), with how long the
	// handler ran (settling not included). Entries settled without running
	// the handler (expired, too many deliveries, undecodable) are reported
	// only to OnDeadLettered. It is called after the outcome's own hook
	// (OnAcked, OnFailed, OnDeadLettered, OnDropped). With OnDelivered,
	// which runs just before the handler, it is all a metrics adapter
	// needs per delivery: the delivery lag is the time from m.Due to
	// OnDelivered, and the promotion lag is m.EntryID's time
	// (stream.EntryTime, the Redis clock when the entry was appended) minus
	// m.Due, both by the Redis clock, on the first delivery (Deliveries 1).
	OnHandled func(m *Message, outcome Outcome, took time.Duration)
}

// Outcome is how one run of the handler ended, as reported to
// [Hooks].OnHandled. The zero value is not an outcome.
type Outcome int

// The outcomes of a handler's run.
const (
	// OutcomeAcked: the handler returned nil; the entry is acknowledged.
	OutcomeAcked Outcome = iota + 1
	// OutcomeRetried: the handler failed; the message was scheduled in the
	// group's retry lane for its next attempt.
	OutcomeRetried
	// OutcomeDeadLettered: the handler failed for the last allowed attempt,
	// or asked for it with [DeadLetter]; the message is in the dead letters.
	OutcomeDeadLettered
	// OutcomeDropped: the handler returned a [Drop] error; the entry is
	// acknowledged without retry.
	OutcomeDropped
	// OutcomeReclaimed: another consumer of the group took the entry over
	// (reclaimed it after the visibility timeout) before this one settled
	// it; this consumer settled nothing, the other one handles it.
	OutcomeReclaimed
	// OutcomeHandedBack: the drain timeout cancelled the handler, which
	// failed; the entry was handed back to the group for another consumer.
	OutcomeHandedBack
	// OutcomeUnsettled: the handler failed and settling the failure (retry
	// or dead letter) failed in Redis (the failure is logged); the entry
	// stays pending and is reclaimed after the visibility timeout.
	OutcomeUnsettled
)

// String returns the outcome's name in snake case ("acked", "retried",
// "dead_lettered", "dropped", "reclaimed", "handed_back", "unsettled"), fit
// for a metric label; "unknown" for any other value.
func (o Outcome) String() string {
	switch o {
	case OutcomeAcked:
		return "acked"
	case OutcomeRetried:
		return "retried"
	case OutcomeDeadLettered:
		return "dead_lettered"
	case OutcomeDropped:
		return "dropped"
	case OutcomeReclaimed:
		return "reclaimed"
	case OutcomeHandedBack:
		return "handed_back"
	case OutcomeUnsettled:
		return "unsettled"
	}
	return "unknown"
}

// Dead-letter reasons.
const (
	ReasonAttempts    = "attempts exhausted"
	ReasonDeliveries  = "max deliveries exceeded"
	ReasonHandler     = "handler asked to dead-letter"
	ReasonUndecodable = "undecodable entry"
	ReasonDeleted     = "entry deleted while pending"
	// ReasonExpired: the message's deadline (delay.Message.Deadline,
	// delay.WithExpireAfter) passed before this group handled it.
	ReasonExpired = "expired"
)

var errOwnershipLost = errors.New("delaystream: entry was taken over by another consumer")
