package delay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream/codec"
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
	rdb    redis.UniversalClient
	name   string
	layout *stream.Layout
	guard  *shards.Guard
	lanes  []laneArgs // per shard, the arguments of its main lane's scripts
	cfg    config
	commit committer // group commit of concurrent Schedule calls (commit.go)
	// tokenTTL is the time to live of call tokens in ms, 0 when calls
	// carry none (see callTokenTTL, once.go).
	tokenTTL int64
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
		return nil, fmt.Errorf("%w: %w", ErrInvalidOption, err)
	}
	q := &Queue{rdb: rdb, name: queue, layout: layout, guard: shards.NewGuard(layout, "producer"),
		lanes: make([]laneArgs, layout.Shards()), cfg: cfg}
	q.commit.init(rdb, layout.Shards())
	q.tokenTTL = callTokenTTL(rdb).Milliseconds()
	for i := range q.lanes {
		l := layout.Shard(i).Main()
		q.lanes[i] = laneArgs{lane: l, zset: []string{l.Delayed}, lookup: []string{l.Delayed, l.Envelopes}, wake: scripts.Channel(l.Wake, l.Sharded),
			calls: layout.Shard(i).CallPrefix()}
	}
	return q, nil
}

// Name returns the queue's name.
func (q *Queue) Name() string { return q.name }

// Keys returns the keys of the queue's shard 0: for a queue of one shard
// (the default), its only key set. A sharded queue's other shards are in
// [Queue.Layout].
func (q *Queue) Keys() stream.Keys { return q.layout.Shard(0) }

// Layout returns the names of every key of the queue: its shards' keys
// and the queue-wide ones (the record of its shard count among them).
func (q *Queue) Layout() *stream.Layout { return q.layout }

// Shards returns the queue's shard count (see [WithShards]); 1 by default.
func (q *Queue) Shards() int { return len(q.lanes) }

// Codec returns the codec used by [Typed] wrappers of this queue.
func (q *Queue) Codec() codec.Codec { return q.cfg.codec }

// check makes the queue's shard-count check (see [Queue]): one call to
// Redis on the Queue's first use, none after it succeeded.
func (q *Queue) check(ctx context.Context) error { return q.guard.Check(ctx, q.rdb) }

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
// Concurrent calls share script calls (group commit; see the package doc,
// "Group commit", and [WithoutGroupCommit]): a call that finds no call of
// its queue (on a Cluster with several shards, of its master) in flight
// sends its message at once; calls that arrive meanwhile wait for it and
// are then sent together, in arrival order, as one call of up to the
// batch size. Each still gets its own Result and error. A call whose ctx
// ends while it waits returns an error wrapping ctx.Err() at once without
// failing the others: its message was not written if no call had taken it
// yet, and may be written if one had (as when a lone call is cancelled on
// the wire: the outcome is [Unknown]).
func (q *Queue) Schedule(ctx context.Context, msg Message, when When) (Result, error) {
	if q.cfg.alone {
		return q.scheduleAlone(ctx, msg, when)
	}
	return q.scheduleGrouped(ctx, Item{Message: msg, When: when})
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
	p, err := q.plan(items, results)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return results, nil
	}
	err, replErr = q.send(ctx, items, results, &p, nil)
	for i := range results {
		if items[i].Message.ID == "" && results[i].Outcome == Unknown {
			results[i].ID = ""
		}
	}
	switch {
	case err != nil && replErr != nil:
		heal.After(q.rdb, err)
		return results, fmt.Errorf("schedule %s: %w; %w", q.name, err, replErr)
	case err != nil:
		heal.After(q.rdb, err)
		return results, fmt.Errorf("schedule %s: %w", q.name, err)
	case replErr != nil:
		return results, fmt.Errorf("schedule %s: %w", q.name, replErr)
	}
	return results, nil
}

// send makes the queue's shard-count check, then the script calls of p,
// and fills in results. err is the first failure, as ScheduleBatch reports
// it; replErr the replication error under WithReplicaAck. If errs is not
// nil, errs[i] gets the error of the call that failed to write item i.
func (q *Queue) send(ctx context.Context, items []Item, results []Result, p *batchPlan, errs []error) (err, replErr error) {
	if err = q.check(ctx); err != nil {
		return err, nil
	}
	calls, byScript := q.calls(items, results, p)
	var cmds []*redis.Cmd
	switch {
	case q.cfg.ack.replicas > 0:
		cmds, replErr = q.runAcked(ctx, func(c int) *redis.Script { return p.chunks[c].script() }, calls)
	case byScript == nil:
		cmds, err = scripts.RunPipelined(ctx, q.rdb, p.chunks[0].script(), calls)
		for i, cmd := range cmds {
			if e := cmd.Err(); e != nil {
				cmd.SetErr(explain(ctx, q.rdb, e, calls[i].Keys))
			}
		}
	default:
		cmds, err = runPipelinedMixed(ctx, q.rdb, byScript, calls)
	}
	if err == nil {
		err = q.fillResults(items, results, p, cmds, errs)
	}
	return err, replErr
}

// itemError reports the failure of item i of n: a single message's error
// does not speak of items.
func itemError(n, i int, err error) error {
	if n == 1 {
		return fmt.Errorf("schedule: %w", err)
	}
	return fmt.Errorf("schedule item %d: %w", i, err)
}

// batchPlan is how ScheduleBatch sends its items: in chunks, each one
// script call on one shard.
type batchPlan struct {
	// order lists item indexes grouped by shard, in the caller's order
	// within a shard; nil for a queue of one shard, whose chunks take the
	// items in the caller's order.
	order  []int32
	chunks []chunk
}

// chunk is one script call of a batch: the items order[start:end] (or
// items[start:end] when order is nil), all of one shard.
type chunk struct {
	shard      int
	seq        int // the chunk's number among its shard's chunks
	start, end int
	generated  bool // every message gets a generated id: the fast script
}

func (c *chunk) script() *redis.Script {
	if c.generated {
		return scripts.ScheduleGenerated
	}
	return scripts.Schedule
}

// item returns the index in items of the k-th message of the plan.
func (p *batchPlan) item(k int) int {
	if p.order == nil {
		return k
	}
	return int(p.order[k])
}

// plan validates items, then routes them (see route). It talks to no
// server.
func (q *Queue) plan(items []Item, results []Result) (batchPlan, error) {
	now := time.Now()
	for i := range items {
		if err := q.checkItem(&items[i], now); err != nil {
			return batchPlan{}, itemError(len(items), i, err)
		}
	}
	return q.route(items, results), nil
}

// checkItem validates one item against the queue's limits; now is the
// producer's clock, for its deadline.
func (q *Queue) checkItem(it *Item, now time.Time) error {
	if err := validate(&it.Message, q.cfg.maxPayload); err != nil {
		return err
	}
	if _, _, err := it.When.millis(); err != nil {
		return err
	}
	return checkDeadline(&it.Message, it.When, now)
}

// route notes the ids of validated items in results (for generated ids,
// the random part, drawn here unless results already holds one: their
// time part is known once Redis has answered), routes each to its shard
// and cuts each shard's items into chunks of up to the batch size.
func (q *Queue) route(items []Item, results []Result) batchPlan {
	n := len(q.lanes)
	var shardOf []uint16 // MaxShards fits
	if n > 1 {
		shardOf = make([]uint16, len(items))
	}
	var ids idGen
	for i := range items {
		it := &items[i]
		if it.Message.ID == "" {
			if results[i].ID == "" {
				results[i].ID = ids.next(len(items) - i)
			}
			if n > 1 {
				shardOf[i] = uint16(wire.ShardOfRandom(results[i].ID, n))
			}
		} else {
			results[i].ID = it.Message.ID
			if n > 1 {
				shardOf[i] = uint16(q.layout.ShardOf(it.Message.ID))
			}
		}
	}
	var p batchPlan
	bs := q.cfg.batchSize
	if n == 1 {
		p.chunks = make([]chunk, 0, (len(items)+bs-1)/bs)
		q.cut(items, &p, 0, 0, len(items))
		return p
	}
	// A counting sort: the items of each shard, in the caller's order.
	next := make([]int32, n+1) // next[s]: where shard s's next item goes in order
	for _, s := range shardOf {
		next[s+1]++
	}
	used := 0 // shards with items
	for s := range n {
		if next[s+1] > 0 {
			used++
		}
		next[s+1] += next[s]
	}
	p.order = make([]int32, len(items))
	p.chunks = make([]chunk, 0, used+len(items)/bs)
	for i, s := range shardOf {
		p.order[next[s]] = int32(i)
		next[s]++
	}
	// next[s] is now the end of shard s's items, and the start of shard s+1's.
	start := 0
	for s := range n {
		end := int(next[s])
		q.cut(items, &p, s, start, end)
		start = end
	}
	return p
}

// cut appends the chunks of shard s's items p.order[start:end] (or
// items[start:end]) to p.chunks.
func (q *Queue) cut(items []Item, p *batchPlan, s, start, end int) {
	for seq := 0; start < end; seq++ {
		c := chunk{shard: s, seq: seq, start: start, end: min(start+q.cfg.batchSize, end), generated: true}
		for k := c.start; k < c.end && c.generated; k++ {
			c.generated = items[p.item(k)].Message.ID == ""
		}
		p.chunks = append(p.chunks, c)
		start = c.end
	}
}

// calls encodes the chunks of p into script calls. A call in which every
// message gets a generated id takes the fast path: nothing to look up, two
// arguments per message. byScript is nil when every call runs the same
// script, else each call's script.
func (q *Queue) calls(items []Item, results []Result, p *batchPlan) (calls []scripts.Call, byScript []*redis.Script) {
	calls = make([]scripts.Call, len(p.chunks))
	for _, ch := range p.chunks[1:] {
		if ch.generated != p.chunks[0].generated {
			byScript = make([]*redis.Script, len(p.chunks))
			for c := range p.chunks {
				byScript[c] = p.chunks[c].script()
			}
			break
		}
	}
	created := time.Now()
	// Items in a run with the same When or policy (the usual batch) share
	// one argument each: no formatting and no allocation per item.
	var (
		lastWhen   When
		lastPolicy Policy
		when, pol  any
	)
	for c := range p.chunks {
		ch := &p.chunks[c]
		l := &q.lanes[ch.shard]
		keys, per := l.lookup, 4
		if ch.generated {
			keys, per = l.zset, 2
		}
		args := make([]any, 1, 1+per*(ch.end-ch.start))
		args[0] = l.wake
		for k := ch.start; k < ch.end; k++ {
			i := p.item(k)
			it := &items[i]
			if when == nil || it.When != lastWhen {
				w, _ := it.When.arg() // plan has validated it
				when, lastWhen = w, it.When
			}
			if per == 2 {
				args = append(args, q.packed(it, results[i].ID, created), when)
				continue
			}
			policy := it.Message.OnDuplicate
			if policy == QueueDefault {
				policy = q.cfg.policy
			}
			if pol == nil || policy != lastPolicy {
				pol, lastPolicy = policy.arg(), policy
			}
			if it.Message.ID == "" {
				args = append(args, "", q.packed(it, results[i].ID, created), when, pol)
			} else {
				env := codec.Envelope{Payload: it.Message.Payload, Headers: it.Message.Headers, Attempt: 1, Created: created,
					Deadline: q.deadline(it, created)}
				args = append(args, it.Message.ID, wire.MarshalEnvelope(&env), when, pol)
			}
		}
		keys, args = q.withToken(l, keys, args)
		calls[c] = scripts.Call{Keys: keys, Args: args}
	}
	return calls, byScript
}

// packed returns the packed delayed-set member of the message it, whose
// generated id has the random part random: the script stores it as is
// (see internal/scripts/ids.lua), and the id is its due time's part
// followed by random.
func (q *Queue) packed(it *Item, random string, created time.Time) []byte {
	env := codec.Envelope{Payload: it.Message.Payload, Headers: it.Message.Headers, Attempt: 1, Created: created,
		Deadline: q.deadline(it, created)}
	val := make([]byte, 0, 1+len(random)+wire.EnvelopeSize(&env))
	val = append(append(val, wire.PackedKind), random...)
	return wire.AppendEnvelope(val, &env)
}

// deadline returns the deadline of the message it: its own, or the queue's
// default after its due time, or zero.
func (q *Queue) deadline(it *Item, now time.Time) time.Time {
	if !it.Message.Deadline.IsZero() || q.cfg.expire <= 0 {
		return it.Message.Deadline
	}
	return it.When.estimate(now).Add(q.cfg.expire)
}

// runPipelinedMixed is scripts.RunPipelined for calls of several scripts,
// which RunPipelined (one script for every call) cannot send in one
// pipeline: call i runs byScript[i], all calls go in one pipeline, and the
// calls answered with NOSCRIPT (the call did not run) are then retried one
// by one with Run, which loads the script. The error of each reply is in
// its Cmd; the returned error reports only a failure to send the pipeline
// at all. It can go once scripts.Call may name its own script.
func runPipelinedMixed(ctx context.Context, rdb redis.UniversalClient, byScript []*redis.Script, calls []scripts.Call) ([]*redis.Cmd, error) {
	pipe := rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(calls))
	for i, c := range calls {
		cmds[i] = byScript[i].EvalSha(ctx, pipe, c.Keys, c.Args...)
	}
	if _, err := pipe.Exec(ctx); err != nil && ctx.Err() != nil {
		return cmds, fmt.Errorf("pipeline: %w", err)
	}
	for i, c := range calls {
		if redis.HasErrorPrefix(cmds[i].Err(), "NOSCRIPT") {
			cmds[i] = byScript[i].Run(ctx, rdb, c.Keys, c.Args...)
		}
		if err := cmds[i].Err(); err != nil {
			cmds[i].SetErr(explain(ctx, rdb, err, c.Keys))
		}
	}
	return cmds, nil
}

// fillResults fills in results from the replies of the schedule scripts,
// one per chunk of p. It returns the first failed chunk's error, if any;
// if errs is not nil, errs[i] gets the error of item i's chunk.
func (q *Queue) fillResults(items []Item, results []Result, p *batchPlan, cmds []*redis.Cmd, errs []error) error {
	var firstErr error
	for c, cmd := range cmds {
		ch := &p.chunks[c]
		want := ch.end - ch.start
		reply, err := cmd.Result()
		var codes []int64
		if err == nil {
			codes, err = scripts.Ints(reply)
		}
		if err == nil && len(codes) != 2*want {
			err = fmt.Errorf("script reply has %d items for %d messages", len(codes), want)
		}
		if err != nil {
			for k := ch.start; errs != nil && k < ch.end; k++ {
				errs[p.item(k)] = err
			}
			switch {
			case firstErr != nil:
			case len(cmds) == 1:
				firstErr = err
			case p.order == nil:
				firstErr = fmt.Errorf("chunk %d (items %d..): %w", c, ch.start, err)
			default:
				firstErr = fmt.Errorf("shard %d chunk %d (%d items, the first item %d): %w",
					ch.shard, ch.seq, want, p.item(ch.start), err)
			}
			continue
		}
		for j := 0; j < len(codes); j += 2 {
			i := p.item(ch.start + j/2)
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
// cancelled or delivered, never both. It calls the shard of id only.
// Under [WithReplicaAck], a cancel (true) that too few replicas confirmed
// also returns an error wrapping [ErrNotReplicated].
func (q *Queue) Cancel(ctx context.Context, id string) (bool, error) {
	if err := ValidateID(id); err != nil {
		return false, fmt.Errorf("cancel: %w", err)
	}
	if err := q.check(ctx); err != nil {
		return false, fmt.Errorf("cancel %s: %w", id, err)
	}
	l := &q.lanes[q.layout.ShardOf(id)]
	keys, args := q.withToken(l, l.lookup, []any{id})
	cmd, replErr := q.run(ctx, scripts.Cancel, keys, args...)
	n, err := cmd.Int64()
	if err != nil {
		heal.After(q.rdb, err)
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
	if err := q.check(ctx); err != nil {
		return time.Time{}, fmt.Errorf("reschedule %s: %w", id, err)
	}
	l := &q.lanes[q.layout.ShardOf(id)]
	keys, args := q.withToken(l, l.lookup, []any{id, w, l.wake})
	cmd, replErr := q.run(ctx, scripts.Reschedule, keys, args...)
	due, err := cmd.Int64()
	if err != nil {
		heal.After(q.rdb, err)
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
	if err := q.check(ctx); err != nil {
		return codec.Envelope{}, fmt.Errorf("get %s: %w", id, err)
	}
	l := &q.lanes[q.layout.ShardOf(id)]
	reply, err := scripts.Get.Run(ctx, q.rdb, l.lookup, id).Slice()
	if err != nil {
		heal.After(q.rdb, err)
		return codec.Envelope{}, fmt.Errorf("get %s: %w", id, explain(ctx, q.rdb, err, l.lookup))
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

func (q *Queue) shardStats(ctx context.Context) ([]Stats, error) {
	if err := q.check(ctx); err != nil {
		return nil, err
	}
	calls := make([]scripts.Call, len(q.lanes))
	for i := range q.lanes {
		calls[i] = scripts.Call{Keys: q.lanes[i].zset}
	}
	cmds, err := scripts.RunPipelined(ctx, q.rdb, scripts.Stats, calls)
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
			err = errors.New("stats script: unexpected reply")
		}
		if err != nil {
			err = explain(ctx, q.rdb, err, q.lanes[i].zset)
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
	if err := q.check(ctx); err != nil {
		return 0, fmt.Errorf("len %s: %w", q.name, err)
	}
	if len(q.lanes) == 1 {
		n, err := q.rdb.ZCard(ctx, q.lanes[0].lane.Delayed).Result()
		if err != nil {
			return 0, fmt.Errorf("len %s: %w", q.name, explain(ctx, q.rdb, err, q.lanes[0].zset))
		}
		return n, nil
	}
	cmds := make([]*redis.IntCmd, len(q.lanes))
	_, _ = q.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range q.lanes {
			cmds[i] = p.ZCard(ctx, q.lanes[i].lane.Delayed)
		}
		return nil
	})
	var sum int64
	for i, cmd := range cmds {
		n, err := cmd.Result()
		if err != nil {
			return 0, fmt.Errorf("len %s: shard %d: %w", q.name, i, explain(ctx, q.rdb, err, q.lanes[i].zset))
		}
		sum += n
	}
	return sum, nil
}
