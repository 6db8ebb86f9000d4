package group

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Default read-ahead bounds: the workers' queue holds about what they
// handle in readAheadHorizon, between 4 × workers and maxReadAhead
// entries; none until the pace is measured, and none while handlers take
// slowHandler or longer, when an entry read ahead would wait for a worker
// while another consumer of the group may have one free.
const (
	readAheadHorizon = 100 * time.Millisecond
	maxReadAhead     = 256
	slowHandler      = readAheadHorizon
)

// reader is the intake: it reads the queue stream and the retry lane with
// XREADGROUP and queues the entries for the workers (the reclaimer queues
// what it claims here too), holding at most the workers plus the
// read-ahead. Entries that will not be handled are handed back through the
// settler.
type reader struct {
	r       *runState
	settle  *settler
	workers int64
	held    atomic.Int64  // entries held: queued or being handled
	waiting atomic.Int64  // reclaimed entries held for the flow limits' permits, not queued yet (reclaimer.admit)
	room    chan struct{} // a token when room was freed; the reader waits on it
	rcRoom  chan struct{} // room's twin for the reclaimer, which waits mid-pass (reclaimer.claimFrom)
	jobs    chan *flight  // entries waiting for a worker

	// Read-ahead: how many entries may be held beyond the workers. Fixed
	// with WithPrefetch; by default adapted by the reader to the handlers'
	// pace (see adapt).
	ahead              atomic.Int64
	minAhead, maxAhead int64
	handled, busy      atomic.Int64 // entries handled and the time they took (ns), for adapt
	act                *activity    // the streams that may have pending entries (reclaimshards.go)
	seenN, seenBusy    int64        // handled and busy at the last adapt; the reader's
	lim                *limiter     // the group's flow limits; nil without (limit.go)

	// A read in flight is not held yet: reading is its room, so that a
	// promote call's read for this consumer (take.go) does not take the
	// same room at once. roomMu orders the two claims.
	roomMu  sync.Mutex
	reading atomic.Int64
}

// claimRead records that a read of up to n entries is sent now and returns
// n, or less when a promote call's read took room meanwhile.
func (rd *reader) claimRead(n int64) int64 {
	rd.roomMu.Lock()
	defer rd.roomMu.Unlock()
	n = max(0, min(n, rd.free()))
	rd.reading.Store(n)
	return n
}

// readDone records that the read in flight was taken (its entries held).
func (rd *reader) readDone() { rd.reading.Store(0) }

// newReader returns the intake of one Run, its read-ahead set from the
// prefetch option.
func newReader(r *runState, settle *settler) *reader {
	c := r.c
	rd := &reader{r: r, settle: settle, workers: int64(c.cfg.workers), room: make(chan struct{}, 1), rcRoom: make(chan struct{}, 1)}
	rd.minAhead, rd.maxAhead = int64(c.cfg.prefetch), int64(c.cfg.prefetch)
	if c.cfg.prefetch < 0 { // adaptive
		rd.minAhead = 4 * rd.workers
		rd.maxAhead = max(maxReadAhead, rd.minAhead)
	}
	if !c.cfg.limits.Zero() {
		// A limited consumer reads only what its workers can start.
		rd.minAhead, rd.maxAhead = 0, 0
		rd.lim = newLimiter(r, rd)
	}
	if rd.minAhead == rd.maxAhead {
		rd.ahead.Store(rd.minAhead)
	} // adaptive: none until the pace is measured

	rd.jobs = make(chan *flight, rd.workers+rd.maxAhead)
	rd.act = newActivity(2 * len(c.shards))
	return rd
}

// capacity returns how many entries may be held: workers + read-ahead.
func (rd *reader) capacity() int64 { return rd.workers + rd.ahead.Load() }

// free returns how many more entries may be held (reclaimed entries
// waiting for permits keep the room they will be queued in).
func (rd *reader) free() int64 { return rd.capacity() - rd.held.Load() - rd.waiting.Load() }

// roomy reports whether free room is worth a read: while workers still
// have queued entries to take, half the capacity, so that a burst is read
// in few large reads; when the queue is empty, any room.
func (rd *reader) roomy(free int64) bool {
	return free > 0 && (2*free >= rd.capacity() || len(rd.jobs) == 0)
}

// waitRoom waits until there is room worth a read and returns it (0 when
// ctx is done).
func (rd *reader) waitRoom(ctx context.Context) int64 {
	for ctx.Err() == nil {
		rd.adapt()
		if n := rd.free(); rd.roomy(n) {
			return n
		}
		select {
		case <-rd.room:
		case <-ctx.Done():
		}
	}
	return 0
}

// adapt sets the default read-ahead to what the workers handle in
// readAheadHorizon at the pace measured since the last change (once at
// least one entry per worker was handled), within its bounds. Fast
// handlers get large reads, which cost Redis and the client much less per
// entry; slow handlers get a short queue, so one consumer does not sit on
// work other consumers of the group could do, and a crash strands little;
// handlers slower than slowHandler get none, so the consumer reads only
// for its free workers.
func (rd *reader) adapt() {
	if rd.minAhead == rd.maxAhead {
		return
	}
	n, busy := rd.handled.Load(), rd.busy.Load()
	if n-rd.seenN < rd.workers {
		return
	}
	rd.ahead.Store(readAheadFor(rd.workers, time.Duration(busy-rd.seenBusy)/time.Duration(n-rd.seenN), rd.minAhead, rd.maxAhead))
	rd.seenN, rd.seenBusy = n, busy
}

// readAheadFor returns how many entries workers handling one entry in
// each take within readAheadHorizon, bounded by lo and hi; none when each
// is slowHandler or longer.
func readAheadFor(workers int64, each time.Duration, lo, hi int64) int64 {
	switch {
	case each <= 0:
		return hi
	case each >= slowHandler:
		return 0
	}
	return min(max(workers*int64(readAheadHorizon/each), lo), hi)
}

// read is the intake loop (see readShards, which serves every queue: an
// unsharded one is a queue of one shard).
func (rd *reader) read(ctx context.Context) error { return rd.readShards(ctx) }

// enqueue registers entries as held (so they are extended while they wait)
// and queues them for the workers. deliveries gives each entry's delivery
// count (nil: 1, a first delivery). Once intake has stopped, the remaining
// entries are handed back instead.
func (rd *reader) enqueue(ctx context.Context, streamKey string, es []redis.XMessage, deliveries map[string]int64) {
	if len(es) == 0 {
		return
	}
	b := rd.hold(streamKey, es, deliveries)
	rd.queue(ctx, b.flights)
}

// hold registers entries (at least one) as held by this consumer, so that
// they are extended, and returns their batch; they are not queued, and
// not counted in rd.held, until queue. deliveries as for enqueue.
func (rd *reader) hold(streamKey string, es []redis.XMessage, deliveries map[string]int64) *batch {
	c := rd.r.c
	b := &batch{stream: streamKey, flights: make([]flight, len(es))}
	b.left.Store(int32(len(es)))
	now := time.Now()
	for i := range es {
		f := &b.flights[i]
		f.b, f.x, f.since, f.deliveries = b, es[i], now, 1
		if deliveries != nil {
			f.deliveries = deliveries[es[i].ID]
		}
	}
	c.held.add(b)
	return b
}

// queue counts held flights (of one batch) in rd.held and queues them for
// the workers. Once intake has stopped, the remaining ones are handed back
// instead.
func (rd *reader) queue(ctx context.Context, fs []flight) {
	rd.held.Add(int64(len(fs)))
	rd.push(ctx, fs)
}

// push queues flights counted in rd.held already for the workers, or,
// once intake has stopped, hands the remaining ones back.
func (rd *reader) push(ctx context.Context, fs []flight) {
	for i := range fs {
		f := &fs[i]
		if ctx.Err() == nil {
			select {
			case rd.jobs <- f: // usually room at once
				continue
			default:
			}
			select { // full: both streams and reclaim may fill it at once
			case rd.jobs <- f:
				continue
			case <-ctx.Done():
			}
		}
		rest := make([]*flight, 0, len(fs)-i)
		for j := i; j < len(fs); j++ {
			rest = append(rest, &fs[j])
		}
		rd.giveBack(rest)
		return
	}
}

// giveBack releases entries that will not be handled, never started (read
// or queued as the intake stopped or the group was paused), and hands them
// back, one call per stream; an entry the drain timeout handed back
// already is only released. Each entry's delivery count is set back by
// one, so that the claim that takes it next leaves it as it was: a stop or
// a pause does not bring an entry nearer the max deliveries, which count
// the deliveries a handler may have seen (a process that crashed holding
// it, or a handler cut short), not the restarts of a deployment.
func (rd *reader) giveBack(fs []*flight) {
	by := map[string][]*flight{} // by stream
	for _, f := range fs {
		if f.takeBack() {
			by[f.b.stream] = append(by[f.b.stream], f)
		}
		rd.release(f)
	}
	for stream, fs := range by {
		rd.settle.handBackKept(rd.r.opCtx, stream, fs)
	}
}

// release drops an entry from the held set and makes room for another.
func (rd *reader) release(f *flight) {
	f.settled.Store(true)
	if f.b.left.Add(-1) == 0 {
		rd.r.c.held.remove(f.b)
	}
	// Counted out before the limiter is told: the call its notice brings
	// reports the slot as free.
	free := rd.capacity() - rd.held.Add(-1)
	if rd.lim != nil && rd.lim.lim.Concurrency > 0 {
		rd.lim.released()
	}
	if rd.roomy(free) {
		rd.roomFreed()
	}
}

// roomFreed tells the reader and the reclaimer, if they wait for room,
// that some was freed.
func (rd *reader) roomFreed() {
	select {
	case rd.room <- struct{}{}:
	default:
	}
	select {
	case rd.rcRoom <- struct{}{}:
	default:
	}
}

// groupMissing handles a read that found the group (or its stream) gone:
// it recreates the group, and checks whether Redis lost the queue's data
// (the queue's record gone or recreated since this consumer last saw it),
// which it reports once per loss through the logger and the OnDataLoss
// hook. A group deleted by hand, with the data kept, is only recreated.
func (rd *reader) groupMissing(ctx context.Context, cause error) {
	r, c := rd.r, rd.r.c
	r.log.WarnContext(ctx, "group missing; recreating it", slog.Any("err", cause))
	if err := c.ensureGroups(ctx); err != nil && ctx.Err() == nil {
		r.log.ErrorContext(ctx, "recreating group failed", slog.Any("err", err))
	}
	vctx, cancel := context.WithTimeout(ctx, opTimeout)
	lost, err := c.guard.Verify(vctx, c.rdb)
	cancel()
	if err != nil || !lost {
		return
	}
	err = c.guard.LostError("when the group " + c.group + " was found missing")
	r.log.ErrorContext(ctx, "Redis lost the queue's data", slog.Any("err", err))
	if h := c.cfg.hooks.OnDataLoss; h != nil {
		h(err)
	}
}
