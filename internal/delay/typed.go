package delay

import (
	"context"
	"fmt"

	"github.com/delaystream/delaystream/codec"
)

// Typed schedules values of type T, encoded with the queue's codec
// (codec.Msgpack unless WithCodec says otherwise). It is safe for
// concurrent use.
type Typed[T any] struct {
	q *Queue
}

// NewTyped returns a typed producer over q.
func NewTyped[T any](q *Queue) *Typed[T] { return &Typed[T]{q: q} }

// Queue returns the underlying queue, for Cancel, Reschedule and Stats.
func (t *Typed[T]) Queue() *Queue { return t.q }

// Schedule encodes v and schedules it like [Queue.Schedule]. id may be empty
// to have one generated. An encoding failure writes nothing.
func (t *Typed[T]) Schedule(ctx context.Context, id string, v T, when When) (Result, error) {
	b, err := t.q.cfg.codec.Marshal(v)
	if err != nil {
		return Result{}, fmt.Errorf("%w: %w", ErrInvalidMessage, err)
	}
	return t.q.Schedule(ctx, Message{ID: id, Payload: b}, when)
}

// Get returns the waiting value id and its envelope (due time, headers).
func (t *Typed[T]) Get(ctx context.Context, id string) (T, codec.Envelope, error) {
	var v T
	env, err := t.q.Get(ctx, id)
	if err != nil {
		return v, env, err
	}
	if err := t.q.cfg.codec.Unmarshal(env.Payload, &v); err != nil {
		return v, env, fmt.Errorf("get %s: %w", id, err)
	}
	return v, env, nil
}
