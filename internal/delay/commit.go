package delay

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream/internal/heal"
	"github.com/delaystream/delaystream/internal/wire"
)

// Group commit of concurrent Schedule calls, as databases commit the
// transactions that wait on one log flush together.
//
// Calls are grouped: one group per Queue, or, with a ClusterClient and
// several shards, one per master (the master of the slot of the message's
// shard), so that masters never wait for each other. A call that finds its
// group idle sends its message at once, alone. Calls that arrive while the
// group's call is in flight queue up in arrival order. When that call
// returns, its caller (the leader) hands the lead to the oldest queued
// caller, which takes the queue (up to the batch size and flushBytes),
// sends it as one ScheduleBatch (one script call per shard, one pipeline),
// hands the lead on and gives every caller of its call its own result.
// The sender is always one of the callers, waiting for its own message
// anyway: nothing runs in the background, and a Queue starts no goroutine.
//
// Ordering: a group has at most one call in flight, and a call's messages
// are in arrival order, so two messages with one id are applied in the
// order their callers queued, as separate calls made one after the other
// would be; the schedule script applies duplicates within one call in
// order (see ScheduleBatch).
//
// Contexts: a caller that waits for a call stops waiting when its ctx
// ends. One that is still queued is removed: its message is not written.
// One whose message a call has taken returns at once; its message may
// still be written. A call carrying several callers' messages runs under
// the leader's ctx values without its cancellation, and with the latest
// deadline of its callers (none if one has none): no caller's ctx makes
// the call fail for the others.

// flushBytes bounds the size of one grouped call: it takes no more
// messages once their payloads, ids and headers reach it (it always
// takes one), so that large messages are not sent by the hundred in one
// script call.
const flushBytes = 1 << 20

// committer sends a Queue's schedule writes: it routes the items of a
// batch to their shards and chunks (batch.go), sends them, under
// WithReplicaAck through the replicaAck, and groups concurrent Schedule
// calls into shared script calls.
type committer struct {
	name   string // the queue's name, for errors
	set    *shardSet
	cfg    *config
	tokens callTokens
	ack    *replicaAck // nil: writes do not wait for replicas

	one     commitGroup          // the group of every call, unless cluster is set
	cluster *redis.ClusterClient // a Cluster client with several shards: a group per master
	nodes   sync.Map             // master address -> *commitGroup, when cluster is set
}

func newCommitter(name string, set *shardSet, cfg *config, tokens callTokens, ack *replicaAck) *committer {
	cm := &committer{name: name, set: set, cfg: cfg, tokens: tokens, ack: ack}
	if cc, ok := set.rdb.(*redis.ClusterClient); ok && len(set.lanes) > 1 {
		cm.cluster = cc
	}
	return cm
}

// commitGroup is the calls that share script calls.
type commitGroup struct {
	mu    sync.Mutex
	busy  bool      // a call is in flight, or the lead has been handed to a queued caller
	queue []*waiter // callers whose messages no call has taken yet, in arrival order
}

// waitState is where a queued caller stands; guarded by its group's mu.
type waitState uint8

const (
	queued  waitState = iota // in the queue
	leading                  // handed the lead, still at the head of the queue
	taken                    // in a call another caller sends
)

// waiter is one Schedule call.
type waiter struct {
	ctx   context.Context
	item  Item
	rnd   string // the random part of its generated id, when drawn to find its group
	size  int    // its share of flushBytes
	state waitState
	wake  chan struct{} // buffered 1: the lead handed over, or res and err set
	res   Result
	err   error
}

// errLeaderPanicked is the error of the callers of a grouped call whose
// sender panicked (in a go-redis hook, say) before their results were known.
var errLeaderPanicked = errors.New("delaystream: the call sending this message panicked; it may or may not have been written")

// scheduleGrouped is Schedule with group commit.
func (cm *committer) scheduleGrouped(ctx context.Context, it Item) (Result, error) {
	if err := cm.checkItem(&it, time.Now()); err != nil {
		return Result{}, itemError(1, 0, err)
	}
	w := &waiter{ctx: ctx, item: it}
	g := cm.groupOf(ctx, w)
	g.mu.Lock()
	if !g.busy {
		g.busy = true
		g.mu.Unlock()
		cm.lead(g, []*waiter{w})
		return w.res, w.err
	}
	w.wake = make(chan struct{}, 1)
	w.size = sizeOf(&it.Message)
	g.queue = append(g.queue, w)
	g.mu.Unlock()

	select {
	case <-w.wake:
		g.mu.Lock()
		if w.state != leading {
			g.mu.Unlock()
			return w.res, w.err // another caller sent it
		}
		if ctx.Err() != nil {
			g.remove(w)
			g.handover()
			g.mu.Unlock()
			return Result{}, fmt.Errorf("schedule %s: %w", cm.name, ctx.Err())
		}
		batch := g.take(cm.cfg.batchSize)
		g.mu.Unlock()
		cm.lead(g, batch)
		return w.res, w.err
	case <-ctx.Done():
		g.mu.Lock()
		switch w.state {
		case queued:
			g.remove(w) // not written
		case leading:
			g.remove(w) // not written; the lead goes to the next caller
			g.handover()
		case taken:
			g.mu.Unlock()
			select {
			case <-w.wake: // the result came as ctx ended
				return w.res, w.err
			default: // in flight: may be written
			}
			return Result{}, fmt.Errorf("schedule %s: %w", cm.name, ctx.Err())
		}
		g.mu.Unlock()
		return Result{}, fmt.Errorf("schedule %s: %w", cm.name, ctx.Err())
	}
}

// groupOf returns the group of w's call. With a Cluster client and several
// shards it is the group of the master of w's shard, whose generated id's
// random part it then draws. A master that cannot be found (the cluster's
// state unknown) gives the queue's group: the call then reports the error.
func (cm *committer) groupOf(ctx context.Context, w *waiter) *commitGroup {
	if cm.cluster == nil {
		return &cm.one
	}
	var shard int
	if w.item.Message.ID == "" {
		var ids idGen
		w.rnd = ids.next(1)
		shard = wire.ShardOfRandom(w.rnd, len(cm.set.lanes))
	} else {
		shard = cm.set.layout.ShardOf(w.item.Message.ID)
	}
	node, err := cm.cluster.MasterForKey(ctx, cm.set.lanes[shard].zset[0])
	if err != nil {
		return &cm.one
	}
	addr := node.Options().Addr
	if g, ok := cm.nodes.Load(addr); ok {
		return g.(*commitGroup)
	}
	g, _ := cm.nodes.LoadOrStore(addr, &commitGroup{})
	return g.(*commitGroup)
}

// sizeOf is what m counts towards flushBytes.
func sizeOf(m *Message) int {
	n := 64 + len(m.ID) + len(m.Payload)
	for k, v := range m.Headers {
		n += len(k) + len(v)
	}
	return n
}

// lead sends the messages of batch (batch[0] is the caller's own) as one
// call, hands the lead on and gives every caller its result. It hands the
// lead on even if the call panics.
func (cm *committer) lead(g *commitGroup, batch []*waiter) {
	sent := false
	defer func() {
		if !sent {
			for _, w := range batch {
				w.res, w.err = Result{}, errLeaderPanicked
			}
		}
		g.mu.Lock()
		g.handover()
		g.mu.Unlock()
		for _, w := range batch[1:] {
			w.wake <- struct{}{}
		}
	}()
	cm.flush(batch)
	sent = true
}

// handover ends the call in flight: it hands the lead to the oldest queued
// caller, or leaves the group idle. g.mu is held.
func (g *commitGroup) handover() {
	if len(g.queue) == 0 {
		g.busy = false
		return
	}
	w := g.queue[0]
	w.state = leading
	w.wake <- struct{}{} // a queued caller's wake is empty
}

// take removes from the queue the messages of the next call: the oldest,
// then the next ones while there are at most limit and flushBytes holds
// them. g.mu is held.
func (g *commitGroup) take(limit int) []*waiter {
	k, size := 1, g.queue[0].size
	for k < len(g.queue) && k < limit && size+g.queue[k].size <= flushBytes {
		size += g.queue[k].size
		k++
	}
	batch := make([]*waiter, k)
	copy(batch, g.queue)
	for _, w := range batch[1:] {
		w.state = taken
	}
	n := copy(g.queue, g.queue[k:])
	clear(g.queue[n:])
	g.queue = g.queue[:n]
	return batch
}

// remove takes w out of the queue. g.mu is held.
func (g *commitGroup) remove(w *waiter) {
	for i, x := range g.queue {
		if x == w {
			n := copy(g.queue[i:], g.queue[i+1:])
			g.queue[i+n] = nil
			g.queue = g.queue[:i+n]
			return
		}
	}
}

// flush sends the messages of batch as one ScheduleBatch and sets each
// waiter's res and err as Schedule reports them.
func (cm *committer) flush(batch []*waiter) {
	items := make([]Item, len(batch))
	results := make([]Result, len(batch))
	for i, w := range batch {
		items[i] = w.item
		results[i].ID = w.rnd
	}
	ctx, cancel := flushContext(batch)
	defer cancel()
	p := cm.route(items, results)
	var errs []error
	if len(batch) > 1 {
		errs = make([]error, len(batch))
	}
	err, replErr := cm.send(ctx, items, results, &p, errs)
	if err != nil {
		heal.After(cm.set.rdb, err)
	}
	for i, w := range batch {
		itemErr := err
		if errs != nil && errs[i] != nil {
			itemErr = errs[i]
		}
		w.res, w.err = cm.result(results[i], itemErr, replErr)
	}
}

// flushContext returns the context of a call sending batch: the leader's
// own for a call of its message alone; else the leader's values without
// its cancellation, with the latest deadline among the callers (none if one
// has none), so that no caller's ctx fails the call for the others.
func flushContext(batch []*waiter) (context.Context, context.CancelFunc) {
	lead := batch[0].ctx
	if len(batch) == 1 {
		return lead, func() {}
	}
	var latest time.Time
	for _, w := range batch {
		d, ok := w.ctx.Deadline()
		if !ok {
			return context.WithoutCancel(lead), func() {}
		}
		if d.After(latest) {
			latest = d
		}
	}
	return context.WithDeadline(context.WithoutCancel(lead), latest)
}

// result returns what Schedule returns for a message whose result is r:
// err is the error of its call, if it failed before Redis wrote it (r is
// then Unknown); replErr the replication error of its call.
func (cm *committer) result(r Result, err, replErr error) (Result, error) {
	switch {
	case r.Outcome == Unknown:
		if err == nil { // cannot happen: a call without a reply has an error
			err = errors.New("delaystream: no reply from the schedule script")
		}
		return Result{}, fmt.Errorf("schedule %s: %w", cm.name, err)
	case r.Outcome == Rejected:
		dup := fmt.Errorf("schedule %s: %w", r.ID, ErrDuplicate)
		if replErr != nil {
			return r, fmt.Errorf("%w; schedule %s: %w", dup, cm.name, replErr)
		}
		return r, dup
	case replErr != nil:
		return r, fmt.Errorf("schedule %s: %w", cm.name, replErr)
	}
	return r, nil
}
