package delay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream/codec"
	"github.com/delaystream/delaystream/internal/errs"
	"github.com/delaystream/delaystream/internal/heal"
	"github.com/delaystream/delaystream/internal/optcheck"
	"github.com/delaystream/delaystream/internal/scripts"
	"github.com/delaystream/delaystream/internal/shards"
	"github.com/delaystream/delaystream/internal/stream"
	"github.com/delaystream/delaystream/internal/wire"
)

// Queue schedules messages for later delivery. It is safe for concurrent
// use, starts no goroutines that outlive a call (a durable batch over
// several Cluster masters sends to them at once) and holds no resources of
// its own: it borrows the Redis client and never closes it.
//
// A Queue of S shards (see [WithShards]) writes each message to the shard
// of its id. Before its first call to Redis it checks that the shard count
// recorded for the queue is its own (recording it on the queue's first
// use); once the check has passed it is not made again. While it fails,
// every method that touches Redis returns its error (wrapping
// stream.ErrShardCount on a disagreement) and writes nothing.
type Queue struct {
	name   string
	set    *shardSet
	cfg    config
	tokens callTokens
	ack    *replicaAck // nil unless WithReplicaAck
	commit *committer  // routing of batches and group commit of Schedule calls
}

// shardSet is a queue's shards as its producer reaches them: the client,
// the key names, the arguments of each shard's scripts and the check of
// the shard count. A Queue's parts share it.
type shardSet struct {
	rdb    redis.UniversalClient
	layout *stream.Layout
	guard  *shards.Guard
	lanes  []laneArgs // per shard, the arguments of its main lane's scripts
}

// laneArgs holds what the scripts of one shard's main lane take, built
// once in New so that calls share them instead of allocating them.
type laneArgs struct {
	lane   stream.Lane
	zset   []string // KEYS: the delayed set (schedule_generated.lua, stats.lua)
	lookup []string // KEYS: the delayed set and the envelopes (schedule, cancel, reschedule, get)
	wake   any      // ARGV[1] of the schedule scripts: the lane's wake channel
	calls  string   // the prefix of its call tokens' keys (stream.Keys.CallPrefix)
}

func newShardSet(rdb redis.UniversalClient, layout *stream.Layout) *shardSet {
	s := &shardSet{rdb: rdb, layout: layout, guard: shards.NewGuard(layout, "producer"),
		lanes: make([]laneArgs, layout.Shards())}
	for i := range s.lanes {
		l := layout.Shard(i).Main()
		s.lanes[i] = laneArgs{lane: l, zset: []string{l.Delayed}, lookup: []string{l.Delayed, l.Envelopes}, wake: scripts.Channel(l.Wake, l.Sharded),
			calls: layout.Shard(i).CallPrefix()}
	}
	return s
}

// check makes the queue's shard-count check (see [Queue]): one call to
// Redis on the Queue's first use, none after it succeeded.
func (s *shardSet) check(ctx context.Context) error { return s.guard.Check(ctx, s.rdb) }

// laneOf returns the arguments of the scripts of id's shard.
func (s *shardSet) laneOf(id string) *laneArgs { return &s.lanes[s.layout.ShardOf(id)] }

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
		shards:     1,
	}
	if err := optcheck.Apply(ErrInvalidOption, &cfg, opts); err != nil {
		return nil, err
	}
	if err := checkAckClient(rdb, &cfg); err != nil {
		return nil, err
	}
	layout, err := stream.NewLayout(cfg.prefix, queue, cfg.shards)
	if err != nil {
		return nil, errs.Invalid(err)
	}
	q := &Queue{name: queue, set: newShardSet(rdb, layout), cfg: cfg,
		tokens: newCallTokens(rdb), ack: newReplicaAck(rdb, cfg.ack)}
	q.commit = newCommitter(queue, q.set, &q.cfg, q.tokens, q.ack)
	return q, nil
}

// Name returns the queue's name.
func (q *Queue) Name() string { return q.name }

// Keys returns the keys of the queue's shard 0: for a queue of one shard
// (the default), its only key set. A sharded queue's other shards are in
// [Queue.Layout].
func (q *Queue) Keys() stream.Keys { return q.set.layout.Shard(0) }

// Layout returns the names of every key of the queue: its shards' keys
// and the queue-wide ones (the record of its shard count among them).
func (q *Queue) Layout() *stream.Layout { return q.set.layout }

// Shards returns the queue's shard count (see [WithShards]); 1 by default.
func (q *Queue) Shards() int { return len(q.set.lanes) }

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
// [ErrInvalidMessage] and writes nothing; so does a shard count that
// differs from the queue's (stream.ErrShardCount). Under [WithReplicaAck],
// a write that too few replicas confirmed returns its Result with an error
// wrapping [ErrNotReplicated].
//
// Concurrent calls share script calls (group commit; [WithoutGroupCommit]
// turns it off): a call that finds no call of its queue (on a Cluster with
// several shards, of its master) in flight sends its message at once;
// calls that arrive meanwhile wait for it and are then sent together, in
// arrival order, as one call of up to the batch size (and about 1 MiB),
// by one of the waiting callers: nothing runs in the background. Messages
// with one id are applied in the order their callers arrived, as by
// separate calls made one after the other, and each call still gets its
// own Result and error. A call carrying several callers' messages runs
// under the latest deadline among them (none if one has none), so that no
// caller's ctx fails it for the others. A call whose ctx ends while it
// waits returns an error wrapping ctx.Err() at once without failing the
// others: its message was not written if no call had taken it yet, and
// may be written if one had (as when a lone call is cancelled on the
// wire: the outcome is [Unknown]).
func (q *Queue) Schedule(ctx context.Context, msg Message, when When) (Result, error) {
	if q.cfg.alone {
		return q.scheduleAlone(ctx, msg, when)
	}
	return q.commit.scheduleGrouped(ctx, Item{Message: msg, When: when})
}

// scheduleAlone is Schedule without group commit: a batch of one.
func (q *Queue) scheduleAlone(ctx context.Context, msg Message, when When) (Result, error) {
	res, err := q.ScheduleBatch(ctx, []Item{{Message: msg, When: when}})
	if err != nil && !errors.Is(err, ErrNotReplicated) {
		return Result{}, err
	}
	if res[0].Outcome == Rejected {
		dup := fmt.Errorf("schedule %s: %w", res[0].ID, ErrDuplicate)
		if err != nil {
			return res[0], fmt.Errorf("%w; %w", dup, err)
		}
		return res[0], dup
	}
	return res[0], err // nil, or ErrNotReplicated with the result
}

// ScheduleBatch schedules many messages. Each message goes to the shard
// of its id (of its generated id's random part); each shard's messages,
// in the order given, are sent in script calls of up to the batch size
// (see WithBatchSize), and all calls of all shards in one pipeline (with a
// Cluster client, one per node, sent at once). A call whose messages all
// get generated ids takes the fast script. Each message gets its own
// [Result], in the order given; duplicates are reported per message (Kept,
// Replaced, Rejected), not as errors, and duplicates inside one batch are
// applied in the order given. Every item is validated before anything is
// sent: one invalid item fails the whole call (nil results) and writes
// nothing. If the queue's shard-count check fails (see [Queue]), nothing
// is written, every result is [Unknown] and the error says why. If Redis
// fails mid-way, the results of calls that completed are filled in, the
// others are [Unknown], and the error names the first failed call. A
// generated id is known once Redis has answered (its time part is the due
// time): an [Unknown] result of a message without an id has an empty ID.
// Under [WithReplicaAck] each master's calls are followed by WAIT on their
// connection; if a master's replicas fall short, every result is still
// filled in and the error wraps [ErrNotReplicated] (with a failed call's
// error too, if one failed).
func (q *Queue) ScheduleBatch(ctx context.Context, items []Item) ([]Result, error) {
	results := make([]Result, len(items))
	var replErr error // under WithReplicaAck: the writes were not confirmed
	p, err := q.commit.plan(items, results)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return results, nil
	}
	err, replErr = q.commit.send(ctx, items, results, &p, nil)
	for i := range results {
		if items[i].Message.ID == "" && results[i].Outcome == Unknown {
			results[i].ID = ""
		}
	}
	switch {
	case err != nil && replErr != nil:
		heal.After(q.set.rdb, err)
		return results, fmt.Errorf("schedule %s: %w; %w", q.name, err, replErr)
	case err != nil:
		heal.After(q.set.rdb, err)
		return results, fmt.Errorf("schedule %s: %w", q.name, err)
	case replErr != nil:
		return results, fmt.Errorf("schedule %s: %w", q.name, replErr)
	}
	return results, nil
}

// run runs script s once with keys and args, like s.Run; under
// WithReplicaAck on the master of keys followed by a WAIT. The second
// result is the replication error (wrapping ErrNotReplicated), reported
// apart from the call's own.
func (q *Queue) run(ctx context.Context, s *redis.Script, keys []string, args ...any) (*redis.Cmd, error) {
	if q.ack == nil {
		cmd := s.Run(ctx, q.set.rdb, keys, args...)
		if err := cmd.Err(); err != nil {
			cmd.SetErr(explain(ctx, q.set.rdb, err, keys))
		}
		return cmd, nil
	}
	cmds, replErr := q.ack.run(ctx, func(int) *redis.Script { return s }, []scripts.Call{{Keys: keys, Args: args}})
	return cmds[0], replErr
}

// Cancel removes the waiting message id. It reports true if the message was
// waiting and is now gone, false if it was not waiting (never scheduled,
// already cancelled, or already promoted to the stream). Cancel and
// promotion are atomic with respect to each other: a message is either
// cancelled or delivered, never both. It calls the shard of id only.
// Under [WithReplicaAck], a cancel (true) that too few replicas confirmed
// also returns an error wrapping [ErrNotReplicated].
func (q *Queue) Cancel(ctx context.Context, id string) (bool, error) {
	if err := ValidateID(id); err != nil {
		return false, fmt.Errorf("cancel: %w", err)
	}
	if err := q.set.check(ctx); err != nil {
		return false, fmt.Errorf("cancel %s: %w", id, err)
	}
	l := q.set.laneOf(id)
	keys, args := q.tokens.add(l, l.lookup, []any{id})
	cmd, replErr := q.run(ctx, scripts.Cancel, keys, args...)
	n, err := cmd.Int64()
	if err != nil {
		heal.After(q.set.rdb, err)
		return false, fmt.Errorf("cancel %s: %w", id, err)
	}
	if n == 1 && replErr != nil {
		return true, fmt.Errorf("cancel %s: %w", id, replErr)
	}
	return n == 1, nil
}

// Reschedule moves the due time of the waiting message id to when and
// returns the new due time. It returns [ErrNotFound] if the message is not
// waiting (for example because it is already due and promoted). It calls
// the shard of id only. Under [WithReplicaAck], a move that too few
// replicas confirmed returns the new due time with an error wrapping
// [ErrNotReplicated].
func (q *Queue) Reschedule(ctx context.Context, id string, when When) (time.Time, error) {
	if err := ValidateID(id); err != nil {
		return time.Time{}, fmt.Errorf("reschedule: %w", err)
	}
	w, err := when.arg()
	if err != nil {
		return time.Time{}, fmt.Errorf("reschedule %s: %w", id, err)
	}
	if err := q.set.check(ctx); err != nil {
		return time.Time{}, fmt.Errorf("reschedule %s: %w", id, err)
	}
	l := q.set.laneOf(id)
	keys, args := q.tokens.add(l, l.lookup, []any{id, w, l.wake})
	cmd, replErr := q.run(ctx, scripts.Reschedule, keys, args...)
	due, err := cmd.Int64()
	if err != nil {
		heal.After(q.set.rdb, err)
		return time.Time{}, fmt.Errorf("reschedule %s: %w", id, err)
	}
	if due < 0 {
		return time.Time{}, fmt.Errorf("reschedule %s: %w", id, ErrNotFound)
	}
	if replErr != nil {
		return time.UnixMilli(due), fmt.Errorf("reschedule %s: %w", id, replErr)
	}
	return time.UnixMilli(due), nil
}

// Get returns the waiting message id with its due time. It returns
// [ErrNotFound] if the message is not waiting, and an error wrapping
// codec.ErrUnknownFormat or codec.ErrCorrupt if its stored envelope cannot
// be decoded (the mover will quarantine it when due). It calls the shard
// of id only.
func (q *Queue) Get(ctx context.Context, id string) (codec.Envelope, error) {
	if err := ValidateID(id); err != nil {
		return codec.Envelope{}, fmt.Errorf("get: %w", err)
	}
	if err := q.set.check(ctx); err != nil {
		return codec.Envelope{}, fmt.Errorf("get %s: %w", id, err)
	}
	l := q.set.laneOf(id)
	reply, err := scripts.Get.Run(ctx, q.set.rdb, l.lookup, id).Slice()
	if err != nil {
		heal.After(q.set.rdb, err)
		return codec.Envelope{}, fmt.Errorf("get %s: %w", id, explain(ctx, q.set.rdb, err, l.lookup))
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

// Stats describes the waiting messages of a queue (or of one shard), by
// the Redis clock.
type Stats struct {
	Waiting int64     // messages scheduled and not yet promoted
	Overdue int64     // waiting messages whose due time has passed (a mover is late or absent)
	NextDue time.Time // due time of the earliest waiting message; zero when none
	Now     time.Time // the Redis clock when the figures were taken
}

// Stats returns figures about the waiting messages of every shard, taken
// with one script call per shard, all in one pipeline: Waiting and Overdue
// are summed, NextDue is the earliest, Now is the latest of the shards'
// Redis clocks (each shard counts its overdue messages by its own server's
// clock). The figures of different shards are not one atomic snapshot.
func (q *Queue) Stats(ctx context.Context) (Stats, error) {
	per, err := q.shardStats(ctx)
	if err != nil {
		return Stats{}, fmt.Errorf("stats %s: %w", q.name, err)
	}
	sum := per[0]
	for _, s := range per[1:] {
		sum.Waiting += s.Waiting
		sum.Overdue += s.Overdue
		if !s.NextDue.IsZero() && (sum.NextDue.IsZero() || s.NextDue.Before(sum.NextDue)) {
			sum.NextDue = s.NextDue
		}
		if s.Now.After(sum.Now) {
			sum.Now = s.Now
		}
	}
	return sum, nil
}

// ShardStats returns the figures of [Queue.Stats] for each shard: element
// i is shard i's, each by its own server's clock. Like Stats it makes one
// script call per shard, all in one pipeline.
func (q *Queue) ShardStats(ctx context.Context) ([]Stats, error) {
	per, err := q.shardStats(ctx)
	if err != nil {
		return nil, fmt.Errorf("shard stats %s: %w", q.name, err)
	}
	return per, nil
}

// shardStats returns the figures of every shard, after the check of the
// queue's record (read only with WithRecordReadOnly).
func (q *Queue) shardStats(ctx context.Context) ([]Stats, error) {
	check := q.set.check
	if q.cfg.readRecord {
		check = q.set.checkRecord
	}
	return q.set.stats(ctx, check)
}

// stats returns the figures of every shard (see Queue.ShardStats).
func (s *shardSet) stats(ctx context.Context, check func(context.Context) error) ([]Stats, error) {
	if err := check(ctx); err != nil {
		return nil, err
	}
	calls := make([]scripts.Call, len(s.lanes))
	for i := range s.lanes {
		calls[i] = scripts.Call{Keys: s.lanes[i].zset}
	}
	cmds, err := scripts.RunPipelined(ctx, s.rdb, scripts.Stats, calls)
	if err != nil {
		return nil, err
	}
	per := make([]Stats, len(cmds))
	for i, cmd := range cmds {
		reply, err := cmd.Result()
		var v []int64
		if err == nil {
			v, err = scripts.Ints(reply)
		}
		if err == nil && len(v) != 4 {
			err = errors.New("delaystream: unexpected reply from the stats script")
		}
		if err != nil {
			err = explain(ctx, s.rdb, err, s.lanes[i].zset)
			if len(cmds) > 1 {
				err = fmt.Errorf("shard %d: %w", i, err)
			}
			return nil, err
		}
		per[i] = Stats{Waiting: v[0], Overdue: v[1], Now: time.UnixMilli(v[3])}
		if v[2] >= 0 {
			per[i].NextDue = time.UnixMilli(v[2])
		}
	}
	return per, nil
}

// Len returns how many messages are waiting in every shard (one ZCARD per
// shard, all in one pipeline).
func (q *Queue) Len(ctx context.Context) (int64, error) {
	if err := q.set.check(ctx); err != nil {
		return 0, fmt.Errorf("len %s: %w", q.name, err)
	}
	if len(q.set.lanes) == 1 {
		n, err := q.set.rdb.ZCard(ctx, q.set.lanes[0].lane.Delayed).Result()
		if err != nil {
			return 0, fmt.Errorf("len %s: %w", q.name, explain(ctx, q.set.rdb, err, q.set.lanes[0].zset))
		}
		return n, nil
	}
	cmds := make([]*redis.IntCmd, len(q.set.lanes))
	_, _ = q.set.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range q.set.lanes {
			cmds[i] = p.ZCard(ctx, q.set.lanes[i].lane.Delayed)
		}
		return nil
	})
	var sum int64
	for i, cmd := range cmds {
		n, err := cmd.Result()
		if err != nil {
			return 0, fmt.Errorf("len %s: shard %d: %w", q.name, i, explain(ctx, q.set.rdb, err, q.set.lanes[i].zset))
		}
		sum += n
	}
	return sum, nil
}
