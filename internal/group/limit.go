package group

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/delaystream/delaystream/internal/flow"
	"github.com/delaystream/delaystream/internal/scripts"
)

// Flow limits (WithConcurrencyLimit, WithRateLimit) are kept in Redis, in
// the group's flow state on shard 0 (stream.Keys.Flow), by one script,
// flow.lua, which a limited consumer calls before each read: it reports
// the slots it holds, asks for as many permits as it has free workers and
// reads only what it was granted. A group without limits makes no such
// call: its read path is what it always was.
//
//   - Concurrency: each consumer's slots are a field of the state with a
//     deadline a visibility timeout ahead, renewed by every call (at least
//     every third of it while it holds any). A consumer that dies stops
//     renewing, and its slots lapse within the visibility timeout, as its
//     entries become reclaimable. Slots freed while another consumer was
//     refused one are announced on shard 0's arrivals channel, so waiting
//     consumers wake at once (and poll every slotPoll in case the notice is
//     lost).
//   - Rate: GCRA, the generic cell rate algorithm (a token bucket kept as
//     one number, the theoretical arrival time). One number of state means
//     one HGET and one HSET per call whatever the burst, nothing to refill
//     on a timer, and a refusal that knows the exact time of the next
//     permit: a consumer told to wait sleeps until then instead of polling.
//     A consumer asks for at least a quarter of the burst at a time; when
//     fewer are free, it reserves them for the time they will be (within
//     rateReserve) and waits until then before it reads: consumers of a
//     busy limit take turns, each call a grant, instead of racing for each
//     permit.
//
// A limited consumer reads no entries ahead of its workers (it could not
// start them), gives back the permits a read did not use at its next call,
// and counts the time it waits (Counters.LimitWait, Hooks.OnLimitWait).
//
// Crashed work goes first (DESIGN invariant 11). Entries a consumer
// reclaims take permits too, but not in turn with fresh reads: under a
// saturated limit a fresh read takes every slot the moment it frees, and
// reclaimed entries asking now and then would wait behind the whole
// backlog. So the reclaimer keeps the entries it claimed and got no
// permits for (held, so extended, but not queued: see admit in
// reclaim.go) and records their count in the flow state ("r:<consumer>",
// with the slots' deadline, renewed by each call). While any consumer's
// count is recorded, flow.lua grants fresh reads no slot those entries
// wait for and no rate permit, while the reclaimer's own calls are
// granted as if none were recorded; a freed slot's notice wakes the
// reclaimer (and the fresh readers, which are refused again). The record
// lapses with the consumer's slots if it dies, and is removed once its
// entries are granted, handed back (stop, pause) or the consumer stops,
// so a reclaimer can hold fresh reads off no longer than it lives.
const (
	slotPoll      = time.Second           // a consumer refused a slot asks again at least this often
	flushCoalesce = 20 * time.Millisecond // slots freed by workers are reported together, this long after the first
	rateReserve   = time.Second           // rate permits due within this are granted ahead (flow.lua ARGV[12])
)

// limiter is a limited consumer's side of flow.lua. Its methods are safe
// for concurrent use; calls to Redis are serialised.
type limiter struct {
	r       *runState
	rd      *reader
	key     string
	lim     flow.Limits
	need    int64  // rate permits worth waking for
	channel string // where freed slots are announced (shard 0's arrivals)
	payload string // the announcement: flow.SlotsNotice + group

	mu          sync.Mutex
	outstanding int64 // granted, not yet read or claimed; guarded by mu
	back        int64 // rate permits granted and not used, given back at the next call; guarded by mu
	reported    int64 // slots held in Redis after the last call; guarded by mu
	reclaimed   int64 // reclaimed entries waiting for permits (flow.lua ARGV[14]); guarded by mu
	recorded    int64 // reclaimed as Redis records it after the last call; guarded by mu

	// Each goroutine that calls logs its own failures.
	readFails, claimFails, loopFails failures
	refusedLogged                    time.Time // when noteRefused last logged; the reader's only

	freed      chan struct{} // a token: a worker finished (slots to report)
	kick       chan struct{} // a token for the reader: another consumer freed slots
	rcKick     chan struct{} // kick's twin for the reclaimer, which waits for permits for reclaimed entries
	unreported atomic.Int64  // ns waited for permits, not yet added to the group's total in Redis
	slotWait   atomic.Bool   // the reader waits for slots (none free at its last call): a worker's release wakes it
	rcWait     atomic.Bool   // the reclaimer waits for slots: a worker's release wakes it
}

func newLimiter(r *runState, rd *reader) *limiter {
	c := r.c
	k := c.layout.Shard(0)
	main := k.Main()
	l := &limiter{r: r, rd: rd, key: k.Flow(c.group), lim: c.cfg.limits,
		channel: scripts.Channel(main.Arrivals, main.Sharded), payload: flow.SlotsNotice + c.group,
		freed: make(chan struct{}, 1), kick: make(chan struct{}, 1), rcKick: make(chan struct{}, 1)}
	l.need = max(int64(l.lim.Burst)/4, 1)
	return l
}

// grant is the reply of one flow.lua call.
type grant struct {
	n       int64
	wait    time.Duration // granted: until the permits are due; refused by the rate: until need can be reserved
	blocker int64         // 0 none, 1 slots, 2 rate, 3 reclaimed entries go first
}

// call runs flow.lua: it reports the slots held (entries held plus
// permits granted and not yet read) and the reclaimed entries waiting,
// gives back unused permits and asks for want; with first, for reclaimed
// entries (ahead of fresh reads).
func (l *limiter) call(ctx context.Context, want int64, first bool) (grant, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.r.c
	held := l.rd.held.Load() + l.outstanding
	back := l.back
	waited := l.unreported.Swap(0)
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	need, flag := l.need, "0"
	if first {
		// Reclaimed entries take any permit free, or the next one.
		need, flag = 1, "1"
	}
	reply, err := scripts.Flow.Run(ctx, c.rdb, []string{l.key},
		c.cfg.consumer, held, want, need, l.lim.Concurrency, l.lim.Interval().Microseconds(), l.lim.Burst,
		c.cfg.visibility.Milliseconds(), back, l.channel, l.payload, rateReserve.Microseconds(),
		time.Duration(waited).Microseconds(), l.reclaimed, flag).Result()
	var v []int64
	if err == nil {
		v, err = scripts.Ints(reply)
	}
	if err == nil && len(v) != 3 {
		err = errors.New("flow script: unexpected reply")
	}
	if err != nil {
		l.unreported.Add(waited) // the next call reports it
		return grant{}, err
	}
	l.back -= back
	l.outstanding += v[0]
	if l.lim.Concurrency > 0 {
		l.reported = held + v[0]
	}
	if first {
		l.reclaimed -= v[0]
	}
	l.recorded = l.reclaimed
	return grant{n: v[0], wait: time.Duration(v[1]) * time.Microsecond, blocker: v[2]}, nil
}

// acquire waits until up to want permits (and slots) are granted and
// returns how many; 0 once ctx ended or the group was paused. The time
// it waits is counted.
func (l *limiter) acquire(ctx context.Context, want int64) int64 {
	var since time.Time
	defer func() {
		if !since.IsZero() {
			l.count(time.Since(since))
		}
	}()
	backoff := minReadBackoff
	if l.slotWait.Load() {
		since = l.awaitFreedSlot(ctx)
	}
	for ctx.Err() == nil && !l.r.pause.paused() {
		g, err := l.call(ctx, want, false)
		if err != nil {
			if ctx.Err() == nil {
				l.readFails.failed(ctx, l.r.log, "flow limit call failed", err, slog.Duration("retry_in", backoff))
			}
			sleepCtx(ctx, jitter(backoff))
			backoff = min(2*backoff, maxReadBackoff)
			continue
		}
		l.readFails.succeeded(ctx, l.r.log, "flow limit calls recovered")
		if g.n > 0 && g.wait > 0 {
			// Reserved: due after wait. Given back if the wait is cut.
			if since.IsZero() {
				since = time.Now()
			}
			if !l.sleep(ctx, g.wait, nil) {
				l.settle(g.n, 0)
				return 0
			}
		}
		if g.n > 0 {
			// Only the cap limits: fewer slots than wanted means none is free.
			l.slotWait.Store(g.n < want && l.capOnly())
			return g.n
		}
		if since.IsZero() {
			since = time.Now()
		}
		l.noteRefused(ctx, g, since)
		d, kick := slotPoll, l.kick // refused a slot, or behind reclaimed entries: a notice wakes it
		if g.blocker == 2 {
			d, kick = max(g.wait, time.Millisecond), nil
		}
		l.slotWait.Store(kick != nil)
		l.sleep(ctx, d, kick)
		l.slotWait.Store(false)
	}
	return 0
}

// refusedLogEvery is how often a consumer refused by its group's flow
// limits for that long says so, at debug level, with what it reported.
const refusedLogEvery = 5 * time.Second

// noteRefused logs at debug level, every refusedLogEvery of a wait that
// began at since, why the limits refuse this consumer's reads and what it
// reported to them: a group that stops reading can be told from one that
// waits its turn.
func (l *limiter) noteRefused(ctx context.Context, g grant, since time.Time) {
	if time.Since(since) < refusedLogEvery || time.Since(l.refusedLogged) < refusedLogEvery {
		return
	}
	l.refusedLogged = time.Now()
	l.mu.Lock()
	held, outstanding, reclaimed, reported := l.rd.held.Load(), l.outstanding, l.reclaimed, l.reported
	l.mu.Unlock()
	l.r.log.DebugContext(ctx, "flow limits refuse reads", slog.Int64("blocker", g.blocker), slog.Duration("waiting", time.Since(since)),
		slog.Int64("held", held), slog.Int64("outstanding", outstanding), slog.Int64("reclaimed", reclaimed),
		slog.Int64("reported", reported), slog.Int64("queued", l.rd.waiting.Load()))
}

// capOnly reports whether the group's only limit is the concurrency cap.
func (l *limiter) capOnly() bool { return l.lim.Concurrency > 0 && l.lim.Interval() == 0 }

// awaitFreedSlot waits, when the cap left workers without slots at the
// last grant, until a slot is freed (a worker's release or another
// consumer's notice wakes it; slotPoll at most), so that the next call is
// not made at once only to be refused. It returns when it began.
func (l *limiter) awaitFreedSlot(ctx context.Context) time.Time {
	since := time.Now()
	l.sleep(ctx, slotPoll, l.kick)
	l.slotWait.Store(false)
	return since
}

// sleep waits d, or less: until ctx ends, the group is paused or a token
// comes on kick (nil: none), which a freed slot sends. It reports whether
// d passed.
func (l *limiter) sleep(ctx context.Context, d time.Duration, kick <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	l.r.pause.mu.Lock()
	changed := l.r.pause.changed
	l.r.pause.mu.Unlock()
	select {
	case <-ctx.Done():
	case <-t.C:
		return true
	case <-kick:
	case <-changed:
	}
	return false
}

// reclaim adds n (less than 0: takes away) to the reclaimed entries
// waiting for permits, which every call records in Redis.
func (l *limiter) reclaim(n int64) {
	l.mu.Lock()
	l.reclaimed += n
	l.mu.Unlock()
}

// acquireFirst waits until up to want permits (and slots) are granted for
// reclaimed entries, ahead of fresh reads (reclaim must count them), and
// returns how many: they are no longer counted as reclaimed. It returns 0
// once ctx ended or the group was paused. The time it waits is counted.
func (l *limiter) acquireFirst(ctx context.Context, want int64) int64 {
	var since time.Time
	defer func() {
		if !since.IsZero() {
			l.count(time.Since(since))
		}
	}()
	backoff := minReadBackoff
	for ctx.Err() == nil && !l.r.pause.paused() {
		g, err := l.call(ctx, want, true)
		if err != nil {
			if ctx.Err() == nil {
				l.claimFails.failed(ctx, l.r.log, "flow limit call failed", err, slog.Duration("retry_in", backoff))
			}
			sleepCtx(ctx, jitter(backoff))
			backoff = min(2*backoff, maxReadBackoff)
			continue
		}
		l.claimFails.succeeded(ctx, l.r.log, "flow limit calls recovered")
		if g.n > 0 && g.wait > 0 {
			// Reserved, the next permits: due after wait.
			if since.IsZero() {
				since = time.Now()
			}
			if !l.sleep(ctx, g.wait, nil) {
				l.settle(g.n, 0)
				l.reclaim(g.n) // still waiting: the caller hands them back
				return 0
			}
		}
		if g.n > 0 {
			return g.n
		}
		if since.IsZero() {
			since = time.Now()
		}
		d, kick := slotPoll, l.rcKick
		if g.blocker == 2 {
			d, kick = max(g.wait, time.Millisecond), nil
		}
		l.rcWait.Store(kick != nil)
		l.sleep(ctx, d, kick)
		l.rcWait.Store(false)
	}
	return 0
}

// settle accounts for a read or claim that was granted granted permits
// and took used entries (queued, so now counted as held): the rest of the
// rate permits are given back at the next call, and the slots are
// reported then.
func (l *limiter) settle(granted, used int64) {
	l.mu.Lock()
	l.outstanding -= granted
	if l.lim.Rate > 0 && granted > used {
		l.back += granted - used
	}
	l.mu.Unlock()
	if granted > used {
		l.released()
	}
}

// released notes that slots or permits may be reported or given back (a
// worker finished, a read used less than granted), and wakes this
// consumer's reclaimer or reader if it waits for slots: its next call
// reports the slot freed here and takes it again, rather than leaving it
// unused in Redis until the loop reports it. The reclaimer, whose entries
// go first, is woken alone when both wait.
func (l *limiter) released() {
	signal(l.freed)
	switch {
	case l.rcWait.Load():
		signal(l.rcKick)
	case l.slotWait.Load():
		signal(l.kick)
	}
}

// poke wakes a consumer waiting for slots (its reader and its reclaimer):
// it or another one freed some.
func (l *limiter) poke() {
	signal(l.kick)
	signal(l.rcKick)
}

// signal puts a token on ch unless one waits there.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// count adds a wait to the counters and the hook.
func (l *limiter) count(d time.Duration) {
	l.unreported.Add(int64(d))
	l.r.c.ctr.limitWait.Add(int64(d))
	if h := l.r.c.cfg.hooks.OnLimitWait; h != nil {
		h(d)
	}
}

// stale reports whether Redis holds another count of this consumer's
// slots than it holds, or unused permits wait to be given back.
func (l *limiter) stale() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.back > 0 || l.unreported.Load() > 0 || l.recorded != l.reclaimed ||
		l.lim.Concurrency > 0 && l.reported != l.rd.held.Load()+l.outstanding
}

// holding reports whether Redis counts slots or reclaimed entries of this
// consumer (which lapse unless renewed).
func (l *limiter) holding() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reported > 0 || l.recorded > 0
}

// loop reports freed slots and unused permits shortly after they were
// freed (unless a read reported them meanwhile), and renews the deadline
// of the slots held every third of the visibility timeout, until ctx
// ends; then it reports what is held once the handlers are done.
func (l *limiter) loop(ctx context.Context) error {
	renew := time.NewTicker(l.r.c.cfg.visibility / 3)
	defer renew.Stop()
	coalesce := time.NewTimer(time.Hour)
	coalesce.Stop()
	defer coalesce.Stop()
	armed := false // the coalesce timer runs: what is freed until it fires is reported with it
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-l.freed:
			if !armed {
				coalesce.Reset(flushCoalesce)
				armed = true
			}
			continue
		case <-coalesce.C:
			armed = false
			if !l.stale() {
				continue
			}
		case <-renew.C:
			if !l.holding() && !l.stale() {
				continue
			}
		}
		if _, err := l.call(ctx, 0, false); err != nil && ctx.Err() == nil {
			l.loopFails.failed(ctx, l.r.log, "flow limit call failed", err)
		}
		l.poke() // this consumer's reader may wait for the slots it freed
	}
}

// close reports, after the handlers are done, that this consumer holds
// nothing any more, so its slots are free at once rather than at their
// deadline.
func (l *limiter) close() {
	if !l.holding() && !l.stale() {
		return
	}
	if _, err := l.call(l.r.opCtx, 0, false); err != nil {
		l.r.log.WarnContext(l.r.opCtx, "releasing flow limit slots failed; they lapse within the visibility timeout", slog.Any("err", err))
	}
}
