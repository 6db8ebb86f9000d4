package group

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/delaystream/delaystream/internal/memory"
	"github.com/delaystream/delaystream/internal/stream"
	"github.com/delaystream/delaystream/internal/wire"
	"github.com/redis/go-redis/v9"
)

// reclaimer takes over, with XAUTOCLAIM, entries other consumers of the
// group left pending, and queues them with the reader's entries. It records
// pending entries found deleted from the stream as dead letters.
type reclaimer struct {
	r  *runState
	rd *reader
}

// loop takes over entries that other consumers of the group held
// longer than the visibility timeout (crashed, stuck, or handed back),
// passing only over the streams that may have entries pending (see
// activity and loopShards): an idle group makes no reclaim calls.
func (rc *reclaimer) loop(ctx context.Context) error {
	c := rc.r.c
	sleepCtx(ctx, time.Duration(rand.Int64N(int64(c.cfg.reclaimEvery)/4+1)))
	// A fixed rate, not a pause after each pass: a pass over many shards'
	// streams takes time, which must not stretch the interval (the 3 s
	// crash-redelivery default is visibility + interval).
	tick := time.NewTicker(c.cfg.reclaimEvery)
	defer tick.Stop()
	return rc.loopShards(ctx, tick)
}

// claimFrom runs XAUTOCLAIM calls over one stream's pending entries from
// cursor, each for as many entries as there is room for (like a read) but
// at most reclaimBatch (or the number of workers, if more), until the
// cursor wraps. A pass keeps claiming while there is more to claim: after
// a call that claimed all it asked for (full; true when the caller's call
// before did), it waits for the workers to make room (at most one reclaim
// interval) rather than leave the rest for the next pass, so that a
// crashed consumer's entries, handlers' and read-ahead alike, are all
// taken in one round however little this consumer holds. Only what there
// is room for is claimed: claimed entries are held like read ones
// (extended while queued, handed back on stop). A call that claims less
// than it asked for and does not end the scan (XAUTOCLAIM scans at most
// ten times its count) finds mostly live consumers' entries; at most
// maxScans of those are made per pass, which bounds the cost of a pass
// over a large pending list that has little to claim. A consumer busy
// when there is no sign of more to claim claims nothing: it leaves the
// entries to other consumers of the group, or to its next pass.
func (rc *reclaimer) claimFrom(ctx context.Context, streamKey, cursor string, full bool) error {
	c, rd := rc.r.c, rc.rd
	for scans := 0; scans < maxScans && ctx.Err() == nil && !rc.r.pause.paused(); {
		n := rd.free()
		if full && !rd.roomy(n) {
			n = rc.waitRoom(ctx, c.cfg.reclaimEvery)
		}
		n = min(n, max(rd.workers, reclaimBatch))
		if n <= 0 {
			return nil // busy: leave the entries for another consumer
		}
		res, err := xautoclaim(ctx, c.rdb, streamKey, c.group, c.cfg.consumer, c.cfg.visibility, cursor, int(n))
		if err != nil {
			return err
		}
		rc.took(ctx, streamKey, res)
		if res.next == "0-0" {
			return nil
		}
		cursor = res.next
		if full = res.full(n); !full {
			scans++
		}
	}
	return nil
}

// maxScans bounds the XAUTOCLAIM calls of one reclaim pass over one
// stream that claim less than they ask for (see claimFrom).
const maxScans = 16

// waitRoom waits until the reader has room worth a claim (as for a read:
// see reader.roomy), at most d, and returns the free room (0 when ctx is
// done; what there is, if anything, after d).
func (rc *reclaimer) waitRoom(ctx context.Context, d time.Duration) int64 {
	rd := rc.rd
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		if n := rd.free(); rd.roomy(n) {
			return n
		}
		select {
		case <-rd.rcRoom:
		case <-ctx.Done():
			return 0
		case <-t.C:
			return rd.free()
		}
	}
}

// took queues what one XAUTOCLAIM took and records what it found deleted.
func (rc *reclaimer) took(ctx context.Context, streamKey string, res claimResult) {
	rc.admit(ctx, rc.take(ctx, streamKey, res))
}

// take records what one XAUTOCLAIM found deleted and takes what it
// claimed: queued for the workers, or, under flow limits, held (so
// extended) and returned, to be queued by admit as permits are granted;
// nil when nothing waits for them.
func (rc *reclaimer) take(ctx context.Context, streamKey string, res claimResult) []flight {
	c := rc.r.c
	if len(res.deleted) > 0 {
		rc.recordDeleted(ctx, streamKey, res.deleted)
	}
	var waiting []flight
	if len(res.msgs) > 0 {
		res.msgs = c.held.drop(streamKey, res.msgs)
	}
	if len(res.msgs) > 0 {
		c.ctr.reclaimed.Add(uint64(len(res.msgs)))
		counts := rc.deliveryCounts(ctx, streamKey, res.msgs)
		if lim := rc.rd.lim; lim != nil {
			waiting = rc.rd.hold(streamKey, res.msgs, counts).flights
			rc.rd.waiting.Add(int64(len(waiting)))
			lim.reclaim(int64(len(waiting)))
		} else {
			rc.rd.enqueue(ctx, streamKey, res.msgs, counts)
		}
	}
	if h := c.cfg.hooks.OnReclaimed; h != nil && (len(res.msgs) > 0 || len(res.deleted) > 0) {
		h(streamKey, len(res.msgs), len(res.deleted))
	}
	return waiting
}

// deliveryCounts returns the delivery count of each claimed entry, read
// with one XPENDING over their id range (the range may hold other entries
// of this consumer, so the count covers those too). An entry whose count
// cannot be read is taken as delivered twice: once, and this reclaim.
func (rc *reclaimer) deliveryCounts(ctx context.Context, streamKey string, msgs []redis.XMessage) map[string]int64 {
	r, c := rc.r, rc.r.c
	counts := make(map[string]int64, len(msgs))
	for _, x := range msgs {
		counts[x.ID] = 2
	}
	// The claim is made: its counts are read even when a stop comes
	// meanwhile (the entries are then handed back with them kept).
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
	defer cancel()
	pend, err := c.rdb.XPendingExt(ctx, &redis.XPendingExtArgs{
		Stream: streamKey, Group: c.group, Start: msgs[0].ID, End: msgs[len(msgs)-1].ID,
		Count: int64(len(msgs)) + rc.rd.held.Load(), Consumer: c.cfg.consumer,
	}).Result()
	if err != nil {
		r.log.WarnContext(ctx, "reading delivery counts failed; taking 2", slog.String("stream", streamKey), slog.Any("err", err))
		return counts
	}
	for _, p := range pend {
		if _, ok := counts[p.ID]; ok {
			counts[p.ID] = max(p.RetryCount, 1) // 1: handed back unstarted, its count kept (giveBack)
		}
	}
	return counts
}

// recordDeleted dead-letters (as a record: there is no content left) the
// pending entries XAUTOCLAIM found deleted from the stream.
func (rc *reclaimer) recordDeleted(ctx context.Context, streamKey string, ids []string) {
	r, c := rc.r, rc.r.c
	c.ctr.deletedPending.Add(uint64(len(ids)))
	r.log.WarnContext(ctx, "pending entries were deleted from the stream before being acknowledged",
		slog.String("stream", streamKey), slog.Int("count", len(ids)))
	// XAUTOCLAIM has already dropped these ids from the pending list: the
	// record must be written even when the reclaim loop is stopping, so it
	// runs on the work context (which outlives intake), bounded like any
	// outcome. Records Redis refuses for memory are written again after a
	// growing pause while the loop runs, and once more as it stops.
	sh := c.shardOf(streamKey)
	pause := refusedFirstWait
	for {
		refused, oom, err := rc.writeDeleted(sh.dead, streamKey, ids)
		if err != nil {
			r.log.ErrorContext(ctx, "recording deleted entries failed", slog.Any("ids", ids), slog.Any("err", err))
			return
		}
		if len(refused) == 0 {
			r.refused.accepted(r.opCtx, r.log)
			return
		}
		ids = refused
		c.ctr.memoryRefused.Add(1)
		if ctx.Err() != nil {
			r.log.ErrorContext(r.opCtx, "recording deleted entries failed: Redis refuses writes for memory",
				slog.Any("ids", ids), slog.Any("err", c.explain(r.opCtx, oom, sh)))
			return
		}
		r.refused.refused(r.opCtx, r.log, c.explain(r.opCtx, oom, sh))
		sleepCtx(ctx, jitter(pause))
		pause = min(2*pause, refusedMaxWait)
	}
}

// writeDeleted appends a dead letter for each of ids (pending entries of
// streamKey found deleted) to dead, in one pipeline, and counts those
// written. It returns the ids whose record Redis refused for memory with
// the refusal, and any other failure.
func (rc *reclaimer) writeDeleted(dead, streamKey string, ids []string) (refused []string, oom, err error) {
	r, c := rc.r, rc.r.c
	ctx, cancel := context.WithTimeout(r.opCtx, opTimeout)
	defer cancel()
	pipe := c.rdb.Pipeline()
	adds := make([]*redis.StringCmd, len(ids))
	for i, id := range ids {
		adds[i] = pipe.XAdd(ctx, &redis.XAddArgs{Stream: dead, Values: []any{
			wire.FieldReason, ReasonDeleted, fieldSource, streamKey, fieldEntry, id,
		}})
	}
	// Trim to the cap separately (not XADD MAXLEN), so what the cap drops
	// is counted like in dead.lua: nothing is dropped silently.
	var trimmed *redis.IntCmd
	if c.cfg.deadCap > 0 {
		trimmed = pipe.XTrimMaxLen(ctx, dead, c.cfg.deadCap)
	}
	_, _ = pipe.Exec(ctx) // each command's error is read below
	written := 0
	for i, cmd := range adds {
		switch e := cmd.Err(); {
		case e == nil:
			written++
		case memory.IsOOM(e):
			refused, oom = append(refused, ids[i]), e
		case err == nil:
			err = e
		}
	}
	if err != nil && written == 0 && len(refused) == 0 {
		return nil, nil, err
	}
	c.ctr.deadLettered.Add(uint64(written))
	if trimmed != nil && trimmed.Val() > 0 {
		c.ctr.deadDropped.Add(uint64(trimmed.Val()))
		r.log.WarnContext(ctx, "dead-letter cap reached; oldest dead letters trimmed", slog.Int64("dropped", trimmed.Val()), slog.Int64("cap", c.cfg.deadCap))
	}
	if h := c.cfg.hooks.OnDeadLettered; h != nil {
		for range written {
			h(nil, ReasonDeleted)
		}
	}
	return refused, oom, err
}

// reclaimBatch bounds one XAUTOCLAIM's count (see claimFrom).
const reclaimBatch = 64

// claimResult is an XAUTOCLAIM reply: the next cursor, the claimed entries
// and the ids of pending entries found deleted.
type claimResult struct {
	next    string
	msgs    []redis.XMessage
	deleted []string
}

// full reports whether the call, made with COUNT n, took as many entries
// as it could (claimed or found deleted): there is probably more to claim.
func (res claimResult) full(n int64) bool { return int64(len(res.msgs)+len(res.deleted)) >= n }

// xautoclaim runs XAUTOCLAIM and parses all three reply elements (go-redis
// drops the third, the ids of entries deleted while pending).
func xautoclaim(ctx context.Context, rdb redis.UniversalClient, key, group, consumer string, minIdle time.Duration, start string, count int) (claimResult, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	v, err := rdb.Do(ctx, "XAUTOCLAIM", key, group, consumer, minIdle.Milliseconds(), start, "COUNT", count).Slice()
	if err != nil {
		err = stream.ExplainWrongType(ctx, rdb, err, stream.KeyType{Key: key, Want: "stream"})
		return claimResult{}, fmt.Errorf("xautoclaim %s: %w", key, err)
	}
	return parseClaim(key, v)
}

// parseClaim reads an XAUTOCLAIM reply.
func parseClaim(key string, v []any) (claimResult, error) {
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

// admit queues the claimed entries fs (of one batch) of a group with flow
// limits as the limits grant them permits, ahead of fresh reads (see
// limit.go): until then they are held (extended, their room kept) and
// their count is recorded in the flow state, so that no fresh read takes
// the slots and permits they wait for. It returns once all are queued,
// or, when ctx ends or the group is paused first, once it handed the
// others back with their delivery counts kept, for a later pass. A
// crashed consumer's entries so wait at most for the slots that free
// first.
func (rc *reclaimer) admit(ctx context.Context, fs []flight) {
	if len(fs) == 0 {
		return
	}
	rd, lim, streamKey := rc.rd, rc.rd.lim, fs[0].b.stream
	for len(fs) > 0 {
		g := min(lim.acquireFirst(ctx, int64(len(fs))), int64(len(fs)))
		if g == 0 {
			break
		}
		rd.queue(ctx, fs[:g]) // counted as held before the room they kept is freed
		rd.waiting.Add(-g)
		lim.settle(g, g)
		fs = fs[g:]
	}
	if len(fs) == 0 {
		return
	}
	lim.reclaim(-int64(len(fs)))
	rd.waiting.Add(-int64(len(fs)))
	back := make([]*flight, 0, len(fs))
	for i := range fs {
		f := &fs[i]
		if f.takeBack() { // not handed back by the drain timeout already
			back = append(back, f)
		}
		f.settled.Store(true)
		if f.b.left.Add(-1) == 0 {
			rd.r.c.held.remove(f.b)
		}
	}
	rd.settle.handBackKept(rc.r.opCtx, streamKey, back)
	lim.released() // the count recorded in Redis is stale
	rd.roomFreed()
}
