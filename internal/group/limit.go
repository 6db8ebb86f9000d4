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
// Entries it reclaims take permits too; those it gets none for are handed
// back at once for a later pass.
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

	// Each goroutine that calls logs its own failures.
	readFails, claimFails, loopFails failures

	freed      chan struct{} // a token: a worker finished (slots to report)
	kick       chan struct{} // a token: another consumer freed slots
	unreported atomic.Int64  // ns waited for permits, not yet added to the group's total in Redis
	slotWait   atomic.Bool   // the reader waits for slots (none free at its last call): a worker's release wakes it
}

func newLimiter(r *runState, rd *reader) *limiter {
	c := r.c
	k := c.layout.Shard(0)
	main := k.Main()
	l := &limiter{r: r, rd: rd, key: k.Flow(c.group), lim: c.cfg.limits,
		channel: scripts.Channel(main.Arrivals, main.Sharded), payload: flow.SlotsNotice + c.group,
		freed: make(chan struct{}, 1), kick: make(chan struct{}, 1)}
	l.need = max(int64(l.lim.Burst)/4, 1)
	return l
}

// grant is the reply of one flow.lua call.
type grant struct {
	n       int64
	wait    time.Duration // granted: until the permits are due; refused by the rate: until need can be reserved
	blocker int64         // 0 none, 1 slots, 2 rate
}

// call runs flow.lua: it reports the slots held (entries held plus
// permits granted and not yet read), gives back unused permits and asks
// for want.
func (l *limiter) call(ctx context.Context, want int64) (grant, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.r.c
	held := l.rd.held.Load() + l.outstanding
	back := l.back
	waited := l.unreported.Swap(0)
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	reply, err := scripts.Flow.Run(ctx, c.rdb, []string{l.key},
		c.cfg.consumer, held, want, l.need, l.lim.Concurrency, l.lim.Interval().Microseconds(), l.lim.Burst,
		c.cfg.visibility.Milliseconds(), back, l.channel, l.payload, rateReserve.Microseconds(),
		time.Duration(waited).Microseconds()).Result()
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
		g, err := l.call(ctx, want)
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
			if !l.sleep(ctx, g.wait, false) {
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
		d := slotPoll
		if g.blocker == 2 {
			d = max(g.wait, time.Millisecond)
		}
		l.slotWait.Store(g.blocker == 1)
		l.sleep(ctx, d, g.blocker == 1)
		l.slotWait.Store(false)
	}
	return 0
}

// capOnly reports whether the group's only limit is the concurrency cap.
func (l *limiter) capOnly() bool { return l.lim.Concurrency > 0 && l.lim.Interval() == 0 }

// awaitFreedSlot waits, when the cap left workers without slots at the
// last grant, until a slot is freed (a worker's release or another
// consumer's notice wakes it; slotPoll at most), so that the next call is
// not made at once only to be refused. It returns when it began.
func (l *limiter) awaitFreedSlot(ctx context.Context) time.Time {
	since := time.Now()
	l.sleep(ctx, slotPoll, true)
	l.slotWait.Store(false)
	return since
}

// sleep waits d, or less: until ctx ends, the group is paused or (slots)
// another consumer announces freed slots. It reports whether d passed.
func (l *limiter) sleep(ctx context.Context, d time.Duration, slots bool) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	var kick <-chan struct{}
	if slots {
		kick = l.kick
	}
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

// try asks once, without waiting, for up to want permits (for entries
// already claimed) and returns how many were granted; permits reserved
// for later are given back.
func (l *limiter) try(ctx context.Context, want int64) int64 {
	g, err := l.call(ctx, want)
	if err != nil {
		l.claimFails.failed(ctx, l.r.log, "flow limit call failed", err)
		return 0
	}
	if g.n > 0 && g.wait > 0 {
		l.settle(g.n, 0)
		return 0
	}
	return g.n
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
// consumer's reader if it waits for slots: its next call reports the slot
// freed here and takes it again, rather than leaving it unused in Redis
// until the loop reports it.
func (l *limiter) released() {
	select {
	case l.freed <- struct{}{}:
	default:
	}
	if l.slotWait.Load() {
		l.poke()
	}
}

// poke wakes a consumer waiting for slots: it or another one freed some.
func (l *limiter) poke() {
	select {
	case l.kick <- struct{}{}:
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
	return l.back > 0 || l.unreported.Load() > 0 || l.lim.Concurrency > 0 && l.reported != l.rd.held.Load()+l.outstanding
}

// holding reports whether Redis counts slots of this consumer.
func (l *limiter) holding() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reported > 0
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
		if _, err := l.call(ctx, 0); err != nil && ctx.Err() == nil {
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
	if _, err := l.call(l.r.opCtx, 0); err != nil {
		l.r.log.WarnContext(l.r.opCtx, "releasing flow limit slots failed; they lapse within the visibility timeout", slog.Any("err", err))
	}
}
