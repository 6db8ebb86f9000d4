package inspect

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/delaystream/delaystream/codec"
	"github.com/delaystream/delaystream/internal/delay"
)

// PreviewLen is how many characters [Preview] keeps by default.
const PreviewLen = 80

// Message is a message waiting in a queue's delayed set.
type Message struct {
	ID       string            `json:"id"`
	Shard    int               `json:"shard"`
	Due      time.Time         `json:"due,omitzero"`
	Overdue  bool              `json:"overdue"`           // due by the Redis clock, not promoted yet
	Attempt  int               `json:"attempt,omitempty"` // 1, more for a message redriven or retried
	Created  time.Time         `json:"created,omitzero"`  // producer clock
	Deadline time.Time         `json:"deadline,omitzero"` // expiry; absent for never
	Headers  map[string]string `json:"headers,omitempty"` //
	Size     int               `json:"size"`              // payload bytes
	Payload  []byte            `json:"payload"`           // base64 in JSON
	Preview  string            `json:"preview"`           // see Preview
	Problem  string            `json:"problem,omitempty"` // why it cannot be read (the mover will quarantine it when due)
	Member   []byte            `json:"member,omitempty"`  // the raw delayed-set member, when not a plain id
}

// Peek returns up to count of the earliest waiting messages of queue
// (overdue first, then upcoming), in due order over every shard; see
// delay.Queue.Peek. count must be 1 to delay.MaxPeek.
func (in *Inspector) Peek(ctx context.Context, queue string, count int) ([]Message, error) {
	if count < 1 || count > delay.MaxPeek {
		return nil, fmt.Errorf("%w: count must be 1 to %d, got %d", ErrInvalid, delay.MaxPeek, count)
	}
	h, err := in.open(ctx, queue)
	if err != nil {
		return nil, err
	}
	ws, err := h.producer.Peek(ctx, count)
	if err != nil {
		return nil, err
	}
	out := make([]Message, len(ws))
	for i, w := range ws {
		m := fromEnvelope(w.Envelope)
		m.ID, m.Shard, m.Due, m.Overdue, m.Problem, m.Member = w.ID, w.Shard, w.Due, w.Overdue, w.Problem, w.Member
		out[i] = m
	}
	return out, nil
}

// Get returns the waiting message id of queue. It returns an error
// wrapping [ErrNotFound] when no such message waits (never scheduled,
// cancelled, or already promoted to the stream).
func (in *Inspector) Get(ctx context.Context, queue, id string) (Message, error) {
	h, err := in.open(ctx, queue)
	if err != nil {
		return Message{}, err
	}
	env, err := h.producer.Get(ctx, id)
	if err != nil {
		return Message{}, mapDelayErr(err)
	}
	now, err := in.rdb.Time(ctx).Result()
	if err != nil {
		return Message{}, fmt.Errorf("get %s: time: %w", id, err)
	}
	m := fromEnvelope(env)
	m.ID, m.Shard, m.Due = id, h.layout.ShardOf(id), env.Due
	m.Overdue = !env.Due.After(now)
	return m, nil
}

// Cancel removes the waiting message id of queue. It returns an error
// wrapping [ErrNotFound] when the message was not waiting.
func (in *Inspector) Cancel(ctx context.Context, queue, id string) error {
	h, err := in.open(ctx, queue)
	if err != nil {
		return err
	}
	ok, err := h.producer.Cancel(ctx, id)
	if err != nil {
		return mapDelayErr(err)
	}
	if !ok {
		return fmt.Errorf("cancel %s: message not waiting: %w", id, ErrNotFound)
	}
	return nil
}

// Reschedule moves the due time of the waiting message id of queue to
// when (delay.After, by the Redis clock, or delay.At) and returns the new
// due time. It returns an error wrapping [ErrNotFound] when the message is
// not waiting.
func (in *Inspector) Reschedule(ctx context.Context, queue, id string, when delay.When) (time.Time, error) {
	h, err := in.open(ctx, queue)
	if err != nil {
		return time.Time{}, err
	}
	due, err := h.producer.Reschedule(ctx, id, when)
	if err != nil {
		return time.Time{}, mapDelayErr(err)
	}
	return due, nil
}

// mapDelayErr adds this package's sentinels to the producer's errors.
func mapDelayErr(err error) error {
	switch {
	case errors.Is(err, delay.ErrNotFound):
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	case errors.Is(err, delay.ErrInvalidMessage):
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return err
}

func fromEnvelope(env codec.Envelope) Message {
	return Message{ID: env.ID, Due: env.Due, Attempt: env.Attempt, Created: env.Created,
		Deadline: env.Deadline, Headers: env.Headers, Size: len(env.Payload), Payload: env.Payload,
		Preview: Preview(env.Payload, PreviewLen)}
}

// Preview renders payload for a human in at most max characters (an
// ellipsis marks a cut): printable UTF-8 text (JSON included) as it is, a
// msgpack value (the default codec's encoding) as JSON prefixed with
// "msgpack:", anything else as "hex:" and its bytes. An empty payload is "".
func Preview(payload []byte, max int) string {
	if len(payload) == 0 {
		return ""
	}
	var s string
	switch {
	case printable(payload):
		s = string(payload)
	default:
		var v any
		r := bytes.NewReader(payload) // an io.ByteScanner: the decoder reads it unbuffered
		dec := msgpack.NewDecoder(r)
		if err := dec.Decode(&v); err == nil && r.Len() == 0 {
			if js, err := json.Marshal(jsonable(v)); err == nil {
				s = "msgpack:" + string(js)
				break
			}
		}
		s = "hex:" + hex.EncodeToString(payload[:min(len(payload), max)])
	}
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) > max && max > 1 {
		r := []rune(s)
		s = string(r[:max-1]) + "…"
	}
	return s
}

// printable reports whether b is valid UTF-8 made of printable characters
// and whitespace.
func printable(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if !unicode.IsPrint(r) && !unicode.IsSpace(r) {
			return false
		}
	}
	return true
}

// jsonable turns what msgpack decodes into something encoding/json takes
// (maps with non-string keys, byte strings).
func jsonable(v any) any {
	switch x := v.(type) {
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[fmt.Sprint(k)] = jsonable(e)
		}
		return m
	case map[string]any:
		for k, e := range x {
			x[k] = jsonable(e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = jsonable(e)
		}
		return x
	case []byte:
		if printable(x) {
			return string(x)
		}
		return "hex:" + hex.EncodeToString(x)
	}
	return v
}
