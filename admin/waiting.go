package admin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/codec"
	"github.com/delaystream/delaystream/internal/delay"
)

// WaitingMessage is a message waiting in a queue's delayed set.
type WaitingMessage struct {
	ID       string            `json:"id"`
	Shard    int               `json:"shard"`
	Due      time.Time         `json:"due,omitzero"`
	Overdue  bool              `json:"overdue"`           // due by the Redis clock, not promoted yet
	Attempt  int               `json:"attempt,omitempty"` // 1, more for a message redriven or retried
	Created  time.Time         `json:"created,omitzero"`  // producer clock
	Deadline time.Time         `json:"deadline,omitzero"` // expiry; absent for never
	Headers  map[string]string `json:"headers,omitempty"`
	Size     int               `json:"size"`              // payload bytes (whole, also when Payload is cut by MaxPayloadBytes)
	Payload  []byte            `json:"payload"`           // base64 in JSON
	Problem  string            `json:"problem,omitempty"` // why it cannot be read (the mover will quarantine it when due)
	Member   []byte            `json:"member,omitempty"`  // the raw delayed-set member, when not a plain id
}

// Peek returns waiting messages of queue without changing them: the
// opts.Limit earliest over every shard (0 means 100, at most [MaxPeek]),
// overdue first, then upcoming, with opts.MaxPayloadBytes of each payload
// at most (see [ListOptions]); or, with opts.IDs, those messages, in
// order. Peek by Limit only reads (a read-only ACL user may call it), and
// reports a member it cannot read with its Problem rather than failing.
// Peek by IDs fails with an error wrapping delaystream.ErrNotFound for a
// message not waiting (never scheduled, cancelled, or already promoted).
func (in *Operator) Peek(ctx context.Context, queue string, opts ListOptions) ([]WaitingMessage, error) {
	if err := opts.check("Peek", true, false, MaxPeek); err != nil {
		return nil, err
	}
	h, err := in.open(ctx, queue)
	if err != nil {
		return nil, err
	}
	if len(opts.IDs) > 0 {
		return in.get(ctx, h, opts.IDs)
	}
	var ws []delay.Waiting
	if opts.MaxPayloadBytes > 0 {
		ws, err = h.producer.PeekCut(ctx, opts.limit(), opts.MaxPayloadBytes)
	} else {
		ws, err = h.producer.Peek(ctx, opts.limit())
	}
	if err != nil {
		return nil, err
	}
	out := make([]WaitingMessage, len(ws))
	for i, w := range ws {
		m := fromEnvelope(w.Envelope)
		m.ID, m.Shard, m.Due, m.Overdue, m.Problem, m.Member, m.Size = w.ID, w.Shard, w.Due, w.Overdue, w.Problem, w.Member, w.Size
		out[i] = m
	}
	return out, nil
}

// get returns the waiting messages ids of h.
func (in *Operator) get(ctx context.Context, h *handle, ids []string) ([]WaitingMessage, error) {
	out := make([]WaitingMessage, len(ids))
	for i, id := range ids {
		env, err := h.producer.Get(ctx, id)
		if err != nil {
			return nil, invalidMessage(err)
		}
		out[i] = fromEnvelope(env)
		out[i].ID, out[i].Shard, out[i].Due = id, h.layout.ShardOf(id), env.Due
	}
	now, err := in.rdb.Time(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("peek %s: time: %w", h.info.Name, err)
	}
	for i := range out {
		out[i].Overdue = !out[i].Due.After(now)
	}
	return out, nil
}

// invalidMessage adds delaystream.ErrInvalidOption to the producer's
// complaint about a message id.
func invalidMessage(err error) error {
	if errors.Is(err, delaystream.ErrInvalidMessage) {
		return invalid(err)
	}
	return err
}

func fromEnvelope(env codec.Envelope) WaitingMessage {
	return WaitingMessage{ID: env.ID, Due: env.Due, Attempt: env.Attempt, Created: env.Created,
		Deadline: env.Deadline, Headers: env.Headers, Size: len(env.Payload), Payload: env.Payload}
}
