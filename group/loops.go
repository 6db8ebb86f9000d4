package group

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream/internal/scripts"
	"github.com/delaystream/delaystream/stream"
)

// ackBatch is how many queued acknowledgements make the acker send at once,
// without waiting for the ack delay.
const ackBatch = 512

// acker batches acknowledgements: an ack waits at most the ack delay (2 ms)
// or until ackBatch are queued; then one XACK per stream (pipelined when
// there are two) acknowledges them all. Workers only append to a buffer
// under a mutex; the acker goroutine is woken once per batch, not per ack.
type acker struct {
	r    *runState
	mu   sync.Mutex
	buf  []ackReq      // queued; guarded by mu
	kick chan struct{} // a token when buf got its first or its ackBatch-th entry
	stop chan struct{}
}

func newAcker(r *runState) *acker {
	return &acker{r: r, buf: make([]ackReq, 0, ackBatch), kick: make(chan struct{}, 1), stop: make(chan struct{})}
}

// ackReq is one entry to acknowledge; success says whether its handler
// succeeded (counted in Counters.Acked once the XACK went through) or it
// was dropped (counted in Dropped already).
type ackReq struct {
	stream, id string
	success    bool
}

func (a *acker) add(streamKey, id string, success bool) {
	a.mu.Lock()
	a.buf = append(a.buf, ackReq{stream: streamKey, id: id, success: success})
	n := len(a.buf)
	a.mu.Unlock()
	if n == 1 || n == ackBatch {
		select {
		case a.kick <- struct{}{}:
		default: // a wake-up is pending already
		}
	}
}

// close flushes what is queued and ends run. Call it after every handler
// has returned.
func (a *acker) close() { close(a.stop) }

func (a *acker) run() {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	spare := make([]ackReq, 0, ackBatch)
	for {
		stopping := false
		select {
		case <-a.kick:
			a.mu.Lock()
			n := len(a.buf)
			a.mu.Unlock()
			if n > 0 && n < ackBatch {
				timer.Reset(a.r.c.cfg.ackDelay)
				select {
				case <-timer.C:
				case <-a.kick: // full
					timer.Stop()
				case <-a.stop:
					timer.Stop()
					stopping = true
				}
			}
		case <-a.stop:
			stopping = true
		}
		a.mu.Lock()
		reqs := a.buf
		a.buf = spare[:0]
		a.mu.Unlock()
		a.flush(reqs)
		spare = reqs
		if stopping {
			a.mu.Lock()
			reqs = a.buf // handlers have returned: nothing more comes
			a.mu.Unlock()
			a.flush(reqs)
			return
		}
	}
}

func (a *acker) flush(reqs []ackReq) {
	if len(reqs) == 0 {
		return
	}
	r, c := a.r, a.r.c
	// Group by stream: entries come from the queue stream and the retry
	// lane, so there are one or two groups.
	type group struct {
		stream string
		ids    []string
	}
	var groups []group
	successes := 0
	for _, q := range reqs {
		if q.success {
			successes++
		}
		i := 0
		for i < len(groups) && groups[i].stream != q.stream {
			i++
		}
		if i == len(groups) {
			groups = append(groups, group{stream: q.stream, ids: make([]string, 0, len(reqs))})
		}
		groups[i].ids = append(groups[i].ids, q.id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	var err error
	if len(groups) == 1 {
		err = c.rdb.XAck(ctx, groups[0].stream, c.group, groups[0].ids...).Err()
	} else {
		pipe := c.rdb.Pipeline()
		for _, g := range groups {
			pipe.XAck(ctx, g.stream, c.group, g.ids...)
		}
		_, err = pipe.Exec(ctx)
	}
	if err != nil {
		// Unacknowledged entries stay pending and are redelivered after the
		// visibility timeout: at-least-once, never lost.
		r.log.Error("xack failed; entries will be redelivered", slog.Any("err", err))
		return
	}
	for _, g := range groups {
		r.settled(g.stream)
	}
	c.ctr.acked.Add(uint64(successes))
}

// extendLoop keeps entries held by running handlers from being reclaimed:
// every third of the visibility timeout it resets the idle time of entries
// held longer than that, after checking this consumer still owns them. A
// handler whose entry was taken over has its ctx cancelled.
func (r *runState) extendLoop(ctx context.Context) error {
	c := r.c
	every := c.cfg.visibility / 3
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			// Handlers may still drain: keep extending until they finish.
			return r.extendWhileDraining(every)
		case <-t.C:
			r.extendOnce(context.WithoutCancel(ctx), every)
		}
	}
}

func (r *runState) extendWhileDraining(every time.Duration) error {
	done := make(chan struct{})
	go func() { r.handlers.Wait(); close(done) }()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-done:
			return nil
		case <-t.C:
			r.extendOnce(context.WithoutCancel(r.workCtx), every)
		}
	}
}

func (r *runState) extendOnce(ctx context.Context, every time.Duration) {
	c := r.c
	now := time.Now()
	var due []*flight
	c.mu.Lock()
	for b := range c.batches {
		for i := range b.flights {
			f := &b.flights[i]
			// every/2, not every: an entry extended at the previous tick is
			// seen a little less than every later (ticker jitter) and must
			// not wait a second tick, which would let its idle time reach 2/3
			// of the visibility timeout.
			if now.Sub(f.since) >= every/2 && !f.settled.Load() && !f.handedBack.Load() {
				due = append(due, f)
			}
		}
	}
	c.mu.Unlock()
	if len(due) == 0 {
		return
	}
	calls := make([]scripts.Call, len(due))
	for i, f := range due {
		calls[i] = scripts.Call{Keys: []string{f.b.stream}, Args: []any{c.group, c.cfg.consumer, f.x.ID}}
	}
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	cmds, err := scripts.RunPipelined(ctx, c.rdb, scripts.Extend, calls)
	if err != nil {
		r.log.WarnContext(ctx, "extending held entries failed", slog.Any("err", err))
		return
	}
	for i, cmd := range cmds {
		f := due[i]
		owned, err := cmd.Int64()
		if err != nil {
			r.log.WarnContext(ctx, "extending held entry failed", slog.String("entry", f.x.ID), slog.Any("err", err))
			continue
		}
		if owned == 1 {
			c.mu.Lock()
			f.since = now
			c.mu.Unlock()
			continue
		}
		f.mu.Lock()
		if f.cancel != nil {
			f.cancel(errOwnershipLost)
		}
		f.mu.Unlock()
	}
}

// reclaimLoop takes over entries that other consumers of the group held
// longer than the visibility timeout (crashed, stuck, or handed back).
func (r *runState) reclaimLoop(ctx context.Context) error {
	c := r.c
	sleepCtx(ctx, time.Duration(rand.Int64N(int64(c.cfg.reclaimEvery)/4+1)))
	for ctx.Err() == nil {
		for _, s := range []string{c.main.Stream, c.retry.Stream} {
			if err := r.reclaimOnce(ctx, s); err != nil && ctx.Err() == nil {
				r.log.WarnContext(ctx, "reclaim failed", slog.String("stream", s), slog.Any("err", err))
			}
		}
		sleepCtx(ctx, c.cfg.reclaimEvery)
	}
	return nil
}

// reclaimOnce runs XAUTOCLAIM passes over one stream's pending entries, each
// for as many entries as there is room for (like a read) but at most
// reclaimBatch (or the number of workers, if more), and at most 16 passes:
// a crashed consumer's whole read-ahead is taken in one round, while one
// pass scans at most ten times its count of the group's pending entries.
func (r *runState) reclaimOnce(ctx context.Context, streamKey string) error {
	c := r.c
	cursor := "0-0"
	for pass := 0; pass < 16 && ctx.Err() == nil; pass++ {
		n := min(r.free(), max(r.workers, reclaimBatch))
		if n <= 0 {
			return nil // busy: leave the entries for another consumer
		}
		res, err := xautoclaim(ctx, c.rdb, streamKey, c.group, c.cfg.consumer, c.cfg.visibility, cursor, int(n))
		if err != nil {
			return err
		}
		if len(res.deleted) > 0 {
			r.recordDeleted(ctx, streamKey, res.deleted)
		}
		if len(res.msgs) > 0 {
			c.ctr.reclaimed.Add(uint64(len(res.msgs)))
			r.enqueue(ctx, streamKey, res.msgs, r.deliveryCounts(ctx, streamKey, res.msgs))
		}
		if h := c.cfg.hooks.OnReclaimed; h != nil && (len(res.msgs) > 0 || len(res.deleted) > 0) {
			h(streamKey, len(res.msgs), len(res.deleted))
		}
		cursor = res.next
		if cursor == "0-0" {
			return nil
		}
	}
	return nil
}

// deliveryCounts returns the delivery count of each claimed entry, read
// with one XPENDING over their id range (the range may hold other entries
// of this consumer, so the count covers those too). An entry whose count
// cannot be read is taken as delivered twice: once, and this reclaim.
func (r *runState) deliveryCounts(ctx context.Context, streamKey string, msgs []redis.XMessage) map[string]int64 {
	c := r.c
	counts := make(map[string]int64, len(msgs))
	for _, x := range msgs {
		counts[x.ID] = 2
	}
	pend, err := c.rdb.XPendingExt(ctx, &redis.XPendingExtArgs{
		Stream: streamKey, Group: c.group, Start: msgs[0].ID, End: msgs[len(msgs)-1].ID,
		Count: int64(len(msgs)) + r.held.Load(), Consumer: c.cfg.consumer,
	}).Result()
	if err != nil {
		r.log.WarnContext(ctx, "reading delivery counts failed", slog.String("stream", streamKey), slog.Any("err", err))
		return counts
	}
	for _, p := range pend {
		if _, ok := counts[p.ID]; ok {
			counts[p.ID] = max(p.RetryCount, 2)
		}
	}
	return counts
}

// recordDeleted dead-letters (as a record: there is no content left) the
// pending entries XAUTOCLAIM found deleted from the stream.
func (r *runState) recordDeleted(ctx context.Context, streamKey string, ids []string) {
	c := r.c
	c.ctr.deletedPending.Add(uint64(len(ids)))
	r.log.WarnContext(ctx, "pending entries were deleted from the stream before being acknowledged",
		slog.String("stream", streamKey), slog.Int("count", len(ids)))
	pipe := c.rdb.Pipeline()
	for _, id := range ids {
		pipe.XAdd(ctx, &redis.XAddArgs{Stream: c.dead, Values: []any{
			stream.FieldReason, ReasonDeleted, fieldSource, streamKey, fieldEntry, id,
		}})
	}
	// Trim to the cap separately (not XADD MAXLEN), so what the cap drops
	// is counted like in dead.lua: nothing is dropped silently.
	var trimmed *redis.IntCmd
	if c.cfg.deadCap > 0 {
		trimmed = pipe.XTrimMaxLen(ctx, c.dead, c.cfg.deadCap)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		r.log.ErrorContext(ctx, "recording deleted entries failed", slog.Any("err", err))
		return
	}
	c.ctr.deadLettered.Add(uint64(len(ids)))
	if trimmed != nil && trimmed.Val() > 0 {
		c.ctr.deadDropped.Add(uint64(trimmed.Val()))
		r.log.WarnContext(ctx, "dead-letter cap reached; oldest dead letters trimmed", slog.Int64("dropped", trimmed.Val()), slog.Int64("cap", c.cfg.deadCap))
	}
	if h := c.cfg.hooks.OnDeadLettered; h != nil {
		for range ids {
			h(nil, ReasonDeleted)
		}
	}
}

// reclaimBatch bounds one XAUTOCLAIM's count (see reclaimOnce).
const reclaimBatch = 64

type claimResult struct {
	next    string
	msgs    []redis.XMessage
	deleted []string
}

// xautoclaim runs XAUTOCLAIM and parses all three reply elements (go-redis
// drops the third, the ids of entries deleted while pending).
func xautoclaim(ctx context.Context, rdb redis.UniversalClient, key, group, consumer string, minIdle time.Duration, start string, count int) (claimResult, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	v, err := rdb.Do(ctx, "XAUTOCLAIM", key, group, consumer, minIdle.Milliseconds(), start, "COUNT", count).Slice()
	if err != nil {
		return claimResult{}, fmt.Errorf("xautoclaim %s: %w", key, err)
	}
	if len(v) < 2 {
		return claimResult{}, fmt.Errorf("xautoclaim %s: reply has %d elements", key, len(v))
	}
	res := claimResult{}
	res.next, _ = v[0].(string)
	entries, _ := v[1].([]any)
	for _, e := range entries {
		pair, ok := e.([]any)
		if !ok || len(pair) != 2 {
			continue
		}
		id, _ := pair[0].(string)
		kv, _ := pair[1].([]any)
		vals := make(map[string]any, len(kv)/2)
		for i := 0; i+1 < len(kv); i += 2 {
			k, _ := kv[i].(string)
			vals[k] = kv[i+1]
		}
		res.msgs = append(res.msgs, redis.XMessage{ID: id, Values: vals})
	}
	if len(v) > 2 {
		del, _ := v[2].([]any)
		for _, d := range del {
			if s, ok := d.(string); ok {
				res.deleted = append(res.deleted, s)
			}
		}
	}
	return res, nil
}

// trimLoop trims the queue stream and the retry lane below the oldest entry
// some group still needs, and removes stale consumers without pending
// entries. It trims a stream at most every trim interval, and only when
// this consumer settled (acknowledged, dropped, retried or dead-lettered)
// entries of it since its last trim of it, which is what moves the
// threshold; so an idle consumer makes no trim calls. Every trimIdleEvery
// (or trim interval, if longer), the first time one such period after
// start, it trims both streams anyway, for what other groups' progress, a
// retention or a removed group freed; stale consumers are removed on the
// same schedule.
func (r *runState) trimLoop(ctx context.Context) error {
	c := r.c
	idleEvery := max(c.cfg.trimEvery, trimIdleEvery)
	sleepCtx(ctx, time.Duration(rand.Int64N(int64(c.cfg.trimEvery))))
	lastStale, lastFull := time.Now(), time.Now()
	for ctx.Err() == nil {
		full := time.Since(lastFull) >= idleEvery
		if full {
			lastFull = time.Now()
		}
		for i, s := range []string{c.main.Stream, c.retry.Stream} {
			// Clear before trimming: what is settled meanwhile is trimmed
			// on the next pass.
			if !r.trimDue[i].Swap(false) && !full {
				continue
			}
			_, more, err := trim(ctx, c.rdb, s, c.cfg.retention)
			if more { // failed or bounded: go on at the next pass
				r.trimDue[i].Store(true)
			}
			if err != nil && ctx.Err() == nil {
				r.log.WarnContext(ctx, "trim failed", slog.String("stream", s), slog.Any("err", err))
			}
		}
		if time.Since(lastStale) >= min(c.cfg.staleConsumer/4, idleEvery) {
			lastStale = time.Now()
			for _, s := range []string{c.main.Stream, c.retry.Stream} {
				if err := r.removeStale(ctx, s); err != nil && ctx.Err() == nil {
					r.log.WarnContext(ctx, "removing stale consumers failed", slog.String("stream", s), slog.Any("err", err))
				}
			}
		}
		sleepCtx(ctx, c.cfg.trimEvery)
	}
	return nil
}

// trimIdleEvery is how often a consumer that settled nothing still trims.
const trimIdleEvery = time.Minute

// Trimming is bounded: one script call removes at most trimLimit entries,
// one trim pass makes at most trimPasses calls; the rest waits for the next
// pass.
const (
	trimLimit  = 1000
	trimPasses = 100
)

// trim runs the trim script on one stream and returns how many entries it
// removed, and whether the bound on one pass stopped it before the threshold.
func trim(ctx context.Context, rdb redis.UniversalClient, key string, retention time.Duration) (int64, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	var total int64
	for pass := 0; pass < trimPasses; pass++ {
		v, err := scripts.Trim.Run(ctx, rdb, []string{key}, retention.Milliseconds(), trimLimit).Slice()
		if err != nil {
			return total, true, fmt.Errorf("trim %s: %w", key, err)
		}
		n, _ := v[0].(int64)
		total += n
		if more, _ := v[2].(int64); more == 0 {
			return total, false, nil
		}
	}
	return total, true, nil
}

func (r *runState) removeStale(ctx context.Context, streamKey string) error {
	c := r.c
	cs, err := c.rdb.XInfoConsumers(ctx, streamKey, c.group).Result()
	if err != nil {
		return err
	}
	for _, x := range cs {
		if x.Name == c.cfg.consumer || x.Pending > 0 || x.Idle < c.cfg.staleConsumer {
			continue
		}
		removed, err := scripts.DelConsumer.Run(ctx, c.rdb, []string{streamKey}, c.group, x.Name).Int64()
		if err != nil {
			return err
		}
		if removed == 1 {
			r.log.InfoContext(ctx, "removed stale consumer", slog.String("stream", streamKey), slog.String("stale", x.Name), slog.Duration("idle", x.Idle))
		}
	}
	return nil
}
