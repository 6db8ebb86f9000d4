package delaystream

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/delaystream/delaystream/codec"
	"github.com/delaystream/delaystream/internal/delay"
)

// Message is a message to schedule.
type Message struct {
	// ID identifies the message in its queue: Cancel, Reschedule and Get
	// take it, and a second message with a waiting id is a duplicate (see
	// [Policy]). At most 256 bytes, no control characters. Empty: a unique
	// id is generated and returned in [Result].ID.
	ID string
	// Payload is delivered as is (at most [WithMaxPayload] bytes).
	Payload []byte
	// Headers are delivered with the payload; nil when none. At most
	// [MaxHeaders]; keys are non-empty and do not start with
	// [ReservedHeaderPrefix].
	Headers map[string]string
	// OnDuplicate overrides the queue's duplicate policy for this message.
	OnDuplicate Policy
	// Deadline, when set, is when the message expires unhandled: a group
	// that gets it later dead-letters it with [ReasonExpired] instead of
	// handling it (by the producer's clock). Zero: the queue's
	// [WithExpireAfter], or never.
	Deadline time.Time
}

// When is a due time; build it with [After] or [At]. The zero When is
// invalid: scheduling with it fails with [ErrInvalidMessage].
type When struct{ w delay.When }

// After returns a due time d after the Redis server runs the schedule
// script (its clock, not this host's). d must not be negative.
func After(d time.Duration) When { return When{delay.After(d)} }

// At returns the absolute due time t. A time in the past is due at once.
func At(t time.Time) When { return When{delay.At(t)} }

// String describes w ("after 30s", "at 2026-...").
func (w When) String() string { return w.w.String() }

// Item is one message of [Queue.ScheduleBatch].
type Item struct {
	Message Message // the message; its ID may be empty
	When    When    // when it is due
}

// Result reports what scheduling did with one message.
type Result struct {
	ID      string    // the message id: generated if the message had none
	Due     time.Time // the due time now stored (the existing one for Kept and Rejected)
	Outcome Outcome   // Created, Replaced, Kept or Rejected
}

// Policy says what scheduling does with a message whose id is already
// waiting. It does not look at messages already due: once promoted, an id
// may be scheduled again.
type Policy int

// The duplicate policies.
const (
	// PolicyDefault defers to the queue's [WithDuplicatePolicy] (by
	// default PolicyKeep).
	PolicyDefault Policy = iota
	// PolicyKeep leaves the waiting message as it is and reports
	// [OutcomeKept].
	PolicyKeep
	// PolicyReplace overwrites the waiting message (payload, headers, due
	// time) and reports [OutcomeReplaced].
	PolicyReplace
	// PolicyReject refuses the new message: Schedule returns an error
	// wrapping [ErrDuplicate], ScheduleBatch reports [OutcomeRejected].
	PolicyReject
)

// String returns the policy's name ("keep", ...).
func (p Policy) String() string { return delay.Policy(p).String() }

// Outcome is what scheduling did with one message.
type Outcome int

// The scheduling outcomes.
const (
	// OutcomeUnknown: the call failed before the outcome was known.
	OutcomeUnknown Outcome = iota
	// OutcomeCreated: the message is new and now waits.
	OutcomeCreated
	// OutcomeReplaced: a waiting message with the id was overwritten.
	OutcomeReplaced
	// OutcomeKept: a waiting message with the id was kept, the new one
	// dropped.
	OutcomeKept
	// OutcomeRejected: a waiting message with the id was kept, the new one
	// refused.
	OutcomeRejected
)

// String returns the outcome's name ("created", ...).
func (o Outcome) String() string { return delay.Outcome(o).String() }

func (m Message) internal() delay.Message {
	return delay.Message{ID: m.ID, Payload: m.Payload, Headers: m.Headers, OnDuplicate: delay.Policy(m.OnDuplicate), Deadline: m.Deadline}
}

func result(r delay.Result) Result {
	return Result{ID: r.ID, Due: r.Due, Outcome: Outcome(r.Outcome)}
}

// Schedule stores msg until when. It returns once Redis has the message
// (and, with [WithReplicaAck], its replicas). An invalid message is
// refused with [ErrInvalidMessage] and nothing is written; a waiting
// duplicate is handled by the message's or the queue's [Policy]. A write
// Redis refuses for memory returns an error wrapping [ErrOutOfMemory]
// that says how full it is; under [WithNoEvictionRequired], a Redis that
// can evict is refused with [ErrEvictionPolicy]. Either way nothing was
// written.
func (q *Queue) Schedule(ctx context.Context, msg Message, when When) (Result, error) {
	if err := q.mem.gate(ctx); err != nil {
		return Result{}, err
	}
	r, err := q.producer.Schedule(ctx, msg.internal(), when.w)
	return result(r), err
}

// ScheduleBatch schedules many messages with one round trip per chunk
// (per shard on a sharded queue). It returns one Result per item, in
// order. Invalid items fail the whole call before anything is written; a
// Redis failure may leave some chunks written: their Results say which.
func (q *Queue) ScheduleBatch(ctx context.Context, items []Item) ([]Result, error) {
	if err := q.mem.gate(ctx); err != nil {
		return nil, err
	}
	buf := itemBufs.Get().(*[]delay.Item)
	in := slices.Grow((*buf)[:0], len(items))[:len(items)]
	for i, it := range items {
		in[i] = delay.Item{Message: it.Message.internal(), When: it.When.w}
	}
	rs, err := q.producer.ScheduleBatch(ctx, in)
	clear(in) // the buffer keeps no payloads alive
	*buf = in[:0]
	itemBufs.Put(buf)
	out := make([]Result, len(rs))
	for i, r := range rs {
		out[i] = result(r)
	}
	return out, err
}

// itemBufs holds the buffers ScheduleBatch converts its items into, so
// that a stream of large batches does not allocate one per call.
var itemBufs = sync.Pool{New: func() any { return new([]delay.Item) }}

// Cancel removes the waiting message id and reports whether it was
// waiting. A message already due is not cancelled: it is delivered.
func (q *Queue) Cancel(ctx context.Context, id string) (bool, error) {
	return q.producer.Cancel(ctx, id)
}

// Reschedule changes the due time of the waiting message id and returns
// the new due time. A message not waiting (unknown, cancelled or already
// due) gives an error wrapping [ErrNotFound].
func (q *Queue) Reschedule(ctx context.Context, id string, when When) (time.Time, error) {
	return q.producer.Reschedule(ctx, id, when.w)
}

// Get returns the waiting message id: its payload, headers, due and
// creation times. A message not waiting gives an error wrapping
// [ErrNotFound].
func (q *Queue) Get(ctx context.Context, id string) (codec.Envelope, error) {
	return q.producer.Get(ctx, id)
}

// Len returns how many messages are waiting (not yet due or not yet
// promoted).
func (q *Queue) Len(ctx context.Context) (int64, error) { return q.producer.Len(ctx) }

// Schedule is [Queue.Schedule] for a payload of type T: v, encoded with
// the queue's codec (see [WithCodec]), is the payload, and msg gives the
// rest (its ID, empty for a generated one; Headers; OnDuplicate;
// Deadline). msg.Payload must be nil, else the error wraps
// [ErrInvalidMessage], as does a v the codec cannot encode; nothing is
// written then.
func Schedule[T any](ctx context.Context, q *Queue, msg Message, v T, when When) (Result, error) {
	if msg.Payload != nil {
		return Result{}, fmt.Errorf("%w: Schedule of a typed value encodes the payload from it: leave Message.Payload nil", ErrInvalidMessage)
	}
	b, err := q.cfg.codec.Marshal(v)
	if err != nil {
		return Result{}, fmt.Errorf("%w: %w", ErrInvalidMessage, err)
	}
	msg.Payload = b
	return q.Schedule(ctx, msg, when)
}

// Get is [Queue.Get] for a payload of type T, decoded with the queue's
// codec: it returns the decoded payload and the message's envelope.
func Get[T any](ctx context.Context, q *Queue, id string) (T, codec.Envelope, error) {
	return delay.NewTyped[T](q.producer).Get(ctx, id)
}
