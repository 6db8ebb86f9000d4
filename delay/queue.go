package delay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream/codec"
	"github.com/delaystream/delaystream/internal/optcheck"
	"github.com/delaystream/delaystream/internal/scripts"
	"github.com/delaystream/delaystream/internal/wire"
	"github.com/delaystream/delaystream/stream"
)

// Queue schedules messages for later delivery. It is safe for concurrent
// use, starts no goroutines and holds no resources of its own: it borrows
// the Redis client and never closes it.
type Queue struct {
	rdb  redis.UniversalClient
	name string
	keys stream.Keys
	lane stream.Lane
	cfg  config
}

// New returns a producer for queue. It validates its arguments and options
// (errors wrap [ErrInvalidOption]), talks to no server and starts nothing.
// queue must satisfy stream.ValidateName.
func New(rdb redis.UniversalClient, queue string, opts ...Option) (*Queue, error) {
	if rdb == nil {
		return nil, fmt.Errorf("%w: nil redis client", ErrInvalidOption)
	}
	cfg := config{
		prefix:     stream.DefaultPrefix,
		codec:      codec.Msgpack,
		maxPayload: DefaultMaxPayload,
		policy:     Keep,
		batchSize:  DefaultBatchSize,
	}
	if err := optcheck.Apply(ErrInvalidOption, &cfg, opts); err != nil {
		return nil, err
	}
	keys, err := stream.NewKeys(cfg.prefix, queue, 0, 1)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOption, err)
	}
	return &Queue{rdb: rdb, name: queue, keys: keys, lane: keys.Main(), cfg: cfg}, nil
}

// Name returns the queue's name.
func (q *Queue) Name() string { return q.name }

// Keys returns the queue's key layout.
func (q *Queue) Keys() stream.Keys { return q.keys }

// Codec returns the codec used by [Typed] wrappers of this queue.
func (q *Queue) Codec() codec.Codec { return q.cfg.codec }

// Item is one message of a ScheduleBatch call.
type Item struct {
	Message Message // the message; its ID may be empty
	When    When    // when it is due
}

// Schedule stores msg until when. It returns the message id (generated when
// msg.ID is empty), the stored due time and the [Outcome]. A message whose id
// is already waiting is handled by the duplicate policy; with [Reject] the
// error is [ErrDuplicate]. Invalid input returns an error wrapping
// [ErrInvalidMessage] and writes nothing.
func (q *Queue) Schedule(ctx context.Context, msg Message, when When) (Result, error) {
	res, err := q.ScheduleBatch(ctx, []Item{{Message: msg, When: when}})
	if err != nil {
		return Result{}, err
	}
	if res[0].Outcome == Rejected {
		return res[0], fmt.Errorf("schedule %s: %w", res[0].ID, ErrDuplicate)
	}
	return res[0], nil
}

// ScheduleBatch schedules many messages with one script call per chunk of
// up to the batch size (see WithBatchSize), all chunks in one pipeline. Each
// message gets its own [Result], in order; duplicates are reported per
// message (Kept, Replaced, Rejected), not as errors. Every item is validated
// before anything is written: one invalid item fails the whole call and
// writes nothing. If Redis fails mid-way, the results of chunks that
// completed are filled in, the others are [Unknown], and the error says so.
// A generated id is known once Redis has answered (its time part is the due
// time): an [Unknown] result of a message without an id has an empty ID.
func (q *Queue) ScheduleBatch(ctx context.Context, items []Item) ([]Result, error) {
	results := make([]Result, len(items))
	script, calls, err := q.calls(items, results)
	if err != nil {
		return nil, err
	}
	if len(calls) == 0 {
		return results, nil
	}
	cmds, err := scripts.RunPipelined(ctx, q.rdb, script, calls)
	if err == nil {
		err = q.fillResults(items, results, cmds)
	}
	for i := range results {
		if items[i].Message.ID == "" && results[i].Outcome == Unknown {
			results[i].ID = ""
		}
	}
	if err != nil {
		return results, fmt.Errorf("schedule %s: %w", q.name, err)
	}
	return results, nil
}

// itemError reports the failure of item i of n: a single message's error
// does not speak of items.
func itemError(n, i int, err error) error {
	if n == 1 {
		return fmt.Errorf("schedule: %w", err)
	}
	return fmt.Errorf("schedule item %d: %w", i, err)
}

// calls validates items and encodes them into script calls of up to the
// batch size each, noting in results the random part of generated ids
// (their time part is known once Redis has answered). A call in which
// every message gets a generated id takes the fast path: nothing to look
// up, two arguments per message.
func (q *Queue) calls(items []Item, results []Result) (*redis.Script, []scripts.Call, error) {
	script, keys, per := scripts.ScheduleGenerated, []string{q.lane.Delayed}, 2
	for i := range items {
		if items[i].Message.ID != "" {
			script, keys, per = scripts.Schedule, []string{q.lane.Delayed, q.lane.Envelopes}, 4
			break
		}
	}
	args := make([]any, 0, 1+per*min(len(items), q.cfg.batchSize))
	var calls []scripts.Call
	created := time.Now()
	var ids idGen
	// Items in a run with the same When or policy (the usual batch) share
	// one argument each: no formatting and no allocation per item.
	var (
		lastWhen   When
		lastPolicy Policy
		when, pol  any
	)
	for i := range items {
		it := &items[i]
		if err := validate(&it.Message, q.cfg.maxPayload); err != nil {
			return nil, nil, itemError(len(items), i, err)
		}
		policy := it.Message.OnDuplicate
		if policy == QueueDefault {
			policy = q.cfg.policy
		}
		if when == nil || it.When != lastWhen {
			w, err := it.When.arg()
			if err != nil {
				return nil, nil, itemError(len(items), i, err)
			}
			when, lastWhen = w, it.When
		}
		if pol == nil || policy != lastPolicy {
			pol, lastPolicy = policy.arg(), policy
		}
		env := codec.Envelope{
			Payload: it.Message.Payload, Headers: it.Message.Headers,
			Attempt: 1, Created: created,
		}
		var id string
		var val []byte
		if it.Message.ID == "" {
			// A generated id: the script stores the packed member as is
			// (see internal/scripts/ids.lua); the result's id is its due
			// time's part followed by the random part kept here.
			val = make([]byte, 0, 1+16+wire.EnvelopeSize(&env))
			val = wire.AppendEnvelope(ids.appendPacked(val, len(items)-i), &env)
			results[i].ID = string(val[1:17])
		} else {
			id = it.Message.ID
			results[i].ID = id
			val = wire.MarshalEnvelope(&env)
		}
		if len(args) == 0 {
			args = append(args, q.lane.Wake)
		}
		if per == 2 {
			args = append(args, val, when)
		} else {
			args = append(args, id, val, when, pol)
		}
		if len(args) == 1+per*q.cfg.batchSize {
			calls = append(calls, scripts.Call{Keys: keys, Args: args})
			args = make([]any, 0, cap(args))
		}
	}
	if len(args) > 0 {
		calls = append(calls, scripts.Call{Keys: keys, Args: args})
	}
	return script, calls, nil
}

// fillResults fills in results from the replies of the schedule script, one
// per chunk. It returns the first chunk's error, if any.
func (q *Queue) fillResults(items []Item, results []Result, cmds []*redis.Cmd) error {
	var firstErr error
	for c, cmd := range cmds {
		base := c * q.cfg.batchSize
		want := min(q.cfg.batchSize, len(items)-base)
		reply, err := cmd.Result()
		var codes []int64
		if err == nil {
			codes, err = scripts.Ints(reply)
		}
		if err == nil && len(codes) != 2*want {
			err = fmt.Errorf("script reply has %d items for %d messages", len(codes), want)
		}
		if err != nil {
			if firstErr == nil && len(cmds) == 1 {
				firstErr = err
			} else if firstErr == nil {
				firstErr = fmt.Errorf("chunk %d (items %d..): %w", c, base, err)
			}
			continue
		}
		for j := 0; j < len(codes); j += 2 {
			i := base + j/2
			r := &results[i]
			r.Outcome = Outcome(codes[j])
			r.Due = time.UnixMilli(codes[j+1])
			if items[i].Message.ID == "" {
				r.ID = wire.GeneratedID(codes[j+1], r.ID)
			}
		}
	}
	return firstErr
}

// Cancel removes the waiting message id. It reports true if the message was
// waiting and is now gone, false if it was not waiting (never scheduled,
// already cancelled, or already promoted to the stream). Cancel and
// promotion are atomic with respect to each other: a message is either
// cancelled or delivered, never both.
func (q *Queue) Cancel(ctx context.Context, id string) (bool, error) {
	if err := ValidateID(id); err != nil {
		return false, fmt.Errorf("cancel: %w", err)
	}
	n, err := scripts.Cancel.Run(ctx, q.rdb, []string{q.lane.Delayed, q.lane.Envelopes}, id).Int64()
	if err != nil {
		return false, fmt.Errorf("cancel %s: %w", id, err)
	}
	return n == 1, nil
}

// Reschedule moves the due time of the waiting message id to when and
// returns the new due time. It returns [ErrNotFound] if the message is not
// waiting (for example because it is already due and promoted).
func (q *Queue) Reschedule(ctx context.Context, id string, when When) (time.Time, error) {
	if err := ValidateID(id); err != nil {
		return time.Time{}, fmt.Errorf("reschedule: %w", err)
	}
	w, err := when.arg()
	if err != nil {
		return time.Time{}, fmt.Errorf("reschedule %s: %w", id, err)
	}
	due, err := scripts.Reschedule.Run(ctx, q.rdb, []string{q.lane.Delayed, q.lane.Envelopes}, id, w, q.lane.Wake).Int64()
	if err != nil {
		return time.Time{}, fmt.Errorf("reschedule %s: %w", id, err)
	}
	if due < 0 {
		return time.Time{}, fmt.Errorf("reschedule %s: %w", id, ErrNotFound)
	}
	return time.UnixMilli(due), nil
}

// Get returns the waiting message id with its due time. It returns
// [ErrNotFound] if the message is not waiting, and an error wrapping
// codec.ErrUnknownFormat or codec.ErrCorrupt if its stored envelope cannot
// be decoded (the mover will quarantine it when due).
func (q *Queue) Get(ctx context.Context, id string) (codec.Envelope, error) {
	if err := ValidateID(id); err != nil {
		return codec.Envelope{}, fmt.Errorf("get: %w", err)
	}
	reply, err := scripts.Get.Run(ctx, q.rdb, []string{q.lane.Delayed, q.lane.Envelopes}, id).Slice()
	if err != nil {
		return codec.Envelope{}, fmt.Errorf("get %s: %w", id, err)
	}
	if len(reply) != 2 {
		return codec.Envelope{}, fmt.Errorf("get %s: %w", id, ErrNotFound)
	}
	due, _ := reply[0].(int64)
	raw, ok := reply[1].(string)
	if !ok {
		return codec.Envelope{}, fmt.Errorf("get %s: envelope missing: %w", id, ErrNotFound)
	}
	env := codec.Envelope{}
	if err := wire.UnmarshalEnvelope([]byte(raw), &env); err != nil {
		return codec.Envelope{}, fmt.Errorf("get %s: %w", id, err)
	}
	env.ID = id
	env.Due = time.UnixMilli(due)
	return env, nil
}

// Stats describes the waiting messages of a queue, by the Redis clock.
type Stats struct {
	Waiting int64     // messages scheduled and not yet promoted
	Overdue int64     // waiting messages whose due time has passed (a mover is late or absent)
	NextDue time.Time // due time of the earliest waiting message; zero when none
	Now     time.Time // the Redis clock when the figures were taken
}

// Stats returns figures about the waiting messages.
func (q *Queue) Stats(ctx context.Context) (Stats, error) {
	reply, err := scripts.Stats.Run(ctx, q.rdb, []string{q.lane.Delayed}).Result()
	var v []int64
	if err == nil {
		v, err = scripts.Ints(reply)
	}
	if err == nil && len(v) != 4 {
		err = errors.New("stats script: unexpected reply")
	}
	if err != nil {
		return Stats{}, fmt.Errorf("stats %s: %w", q.name, err)
	}
	s := Stats{Waiting: v[0], Overdue: v[1], Now: time.UnixMilli(v[3])}
	if v[2] >= 0 {
		s.NextDue = time.UnixMilli(v[2])
	}
	return s, nil
}

// Len returns how many messages are waiting.
func (q *Queue) Len(ctx context.Context) (int64, error) {
	n, err := q.rdb.ZCard(ctx, q.lane.Delayed).Result()
	if err != nil {
		return 0, fmt.Errorf("len %s: %w", q.name, err)
	}
	return n, nil
}
