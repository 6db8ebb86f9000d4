package delay

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream/codec"
	"github.com/delaystream/delaystream/internal/scripts"
	"github.com/delaystream/delaystream/internal/wire"
)

// The committer's routing of a batch: its items validated, cut into
// chunks (one script call each) by shard, encoded and sent, and their
// results filled in from the replies.

// send makes the queue's shard-count check, then the script calls of p,
// and fills in results. err is the first failure, as ScheduleBatch reports
// it; replErr the replication error under WithReplicaAck. If errs is not
// nil, errs[i] gets the error of the call that failed to write item i.
func (cm *committer) send(ctx context.Context, items []Item, results []Result, p *batchPlan, errs []error) (err, replErr error) {
	if err = cm.set.check(ctx); err != nil {
		return err, nil
	}
	calls, byScript := cm.calls(items, results, p)
	var cmds []*redis.Cmd
	switch {
	case cm.ack != nil:
		cmds, replErr = cm.ack.run(ctx, func(c int) *redis.Script { return p.chunks[c].script() }, calls)
	case byScript == nil:
		cmds, err = scripts.RunPipelined(ctx, cm.set.rdb, p.chunks[0].script(), calls)
		for i, cmd := range cmds {
			if e := cmd.Err(); e != nil {
				cmd.SetErr(explain(ctx, cm.set.rdb, e, calls[i].Keys))
			}
		}
	default:
		cmds, err = runPipelinedMixed(ctx, cm.set.rdb, byScript, calls)
	}
	if err == nil {
		err = cm.fillResults(items, results, p, cmds, errs)
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
func (cm *committer) plan(items []Item, results []Result) (batchPlan, error) {
	now := time.Now()
	for i := range items {
		if err := cm.checkItem(&items[i], now); err != nil {
			return batchPlan{}, itemError(len(items), i, err)
		}
	}
	return cm.route(items, results), nil
}

// checkItem validates one item against the queue's limits; now is the
// producer's clock, for its deadline.
func (cm *committer) checkItem(it *Item, now time.Time) error {
	if err := validate(&it.Message, cm.cfg.maxPayload); err != nil {
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
func (cm *committer) route(items []Item, results []Result) batchPlan {
	n := len(cm.set.lanes)
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
				shardOf[i] = uint16(cm.set.layout.ShardOf(it.Message.ID))
			}
		}
	}
	var p batchPlan
	bs := cm.cfg.batchSize
	if n == 1 {
		p.chunks = make([]chunk, 0, (len(items)+bs-1)/bs)
		cm.cut(items, &p, 0, 0, len(items))
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
		cm.cut(items, &p, s, start, end)
		start = end
	}
	return p
}

// cut appends the chunks of shard s's items p.order[start:end] (or
// items[start:end]) to p.chunks.
func (cm *committer) cut(items []Item, p *batchPlan, s, start, end int) {
	for seq := 0; start < end; seq++ {
		c := chunk{shard: s, seq: seq, start: start, end: min(start+cm.cfg.batchSize, end), generated: true}
		for k := c.start; k < c.end && c.generated; k++ {
			c.generated = items[p.item(k)].Message.ID == ""
		}
		p.chunks = append(p.chunks, c)
		start = c.end
	}
}

// scripts returns each chunk's script, or nil when every chunk runs the
// same one.
func (p *batchPlan) scripts() []*redis.Script {
	for _, ch := range p.chunks[1:] {
		if ch.generated != p.chunks[0].generated {
			out := make([]*redis.Script, len(p.chunks))
			for c := range p.chunks {
				out[c] = p.chunks[c].script()
			}
			return out
		}
	}
	return nil
}

// calls encodes the chunks of p into script calls. A call in which every
// message gets a generated id takes the fast path: nothing to look up, two
// arguments per message. byScript is nil when every call runs the same
// script, else each call's script.
func (cm *committer) calls(items []Item, results []Result, p *batchPlan) (calls []scripts.Call, byScript []*redis.Script) {
	calls = make([]scripts.Call, len(p.chunks))
	byScript = p.scripts()
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
		l := &cm.set.lanes[ch.shard]
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
				args = append(args, cm.packed(it, results[i].ID, created), when)
				continue
			}
			policy := it.Message.OnDuplicate
			if policy == QueueDefault {
				policy = cm.cfg.policy
			}
			if pol == nil || policy != lastPolicy {
				pol, lastPolicy = policy.arg(), policy
			}
			if it.Message.ID == "" {
				args = append(args, "", cm.packed(it, results[i].ID, created), when, pol)
			} else {
				env := codec.Envelope{Payload: it.Message.Payload, Headers: it.Message.Headers, Attempt: 1, Created: created,
					Deadline: cm.deadline(it, created)}
				args = append(args, it.Message.ID, wire.MarshalEnvelope(&env), when, pol)
			}
		}
		if !ch.generated || !cm.tokens.spares(items, p, ch.start, ch.end) {
			keys, args = cm.tokens.add(l, keys, args)
		}
		calls[c] = scripts.Call{Keys: keys, Args: args}
	}
	return calls, byScript
}

// packed returns the packed delayed-set member of the message it, whose
// generated id has the random part random: the script stores it as is
// (see internal/scripts/ids.lua), and the id is its due time's part
// followed by random.
func (cm *committer) packed(it *Item, random string, created time.Time) []byte {
	env := codec.Envelope{Payload: it.Message.Payload, Headers: it.Message.Headers, Attempt: 1, Created: created,
		Deadline: cm.deadline(it, created)}
	val := make([]byte, 0, 1+len(random)+wire.EnvelopeSize(&env))
	val = append(append(val, wire.PackedKind), random...)
	return wire.AppendEnvelope(val, &env)
}

// deadline returns the deadline of the message it: its own, or the queue's
// default after its due time, or zero.
func (cm *committer) deadline(it *Item, now time.Time) time.Time {
	if !it.Message.Deadline.IsZero() || cm.cfg.expire <= 0 {
		return it.Message.Deadline
	}
	return it.When.estimate(now).Add(cm.cfg.expire)
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
func (cm *committer) fillResults(items []Item, results []Result, p *batchPlan, cmds []*redis.Cmd, errs []error) error {
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
			err = fmt.Errorf("delaystream: script reply has %d items for %d messages", len(codes), want)
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
