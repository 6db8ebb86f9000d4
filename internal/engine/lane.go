package engine

import (
	"context"
	"log/slog"
	mrand "math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/delaystream/delaystream/internal/heal"
	"github.com/delaystream/delaystream/internal/history"
	"github.com/delaystream/delaystream/internal/scripts"
	"github.com/delaystream/delaystream/internal/stream"
)

// lane promotes one delayed set into its stream.
type lane struct {
	m    *Engine
	keys stream.Lane
	// promoteKeys are the promote script's KEYS (lanePromoteKeys);
	// history, for a queue's main lane, adds the shard's history keys to
	// them (the counts of what the calls promote).
	promoteKeys []string
	history     *history.Keys
	shard       int
	token       string        // lease token for the promote script; "" = no lease
	arrivals    string        // channel on which the script announces appended entries; "" = none
	shardArg    string        // the payload of those announcements: the shard number
	wake        chan int64    // due times from the wake channel; 0 = lease released
	turn        chan struct{} // the lane's turn to probe its head (see idleProbes)
	owner       atomic.Bool   // whether this mover held the lease at the last call
	// renewed is when (the local clock, before the call was sent, in Unix
	// ns) a promote call last set the lease for this mover; 0 = not known.
	// A call within a third of the lease TTL of it asks the script not to
	// set it again (see promoteArgs).
	renewed atomic.Int64
	// failing: the lane's last promote call failed. Its calls then do not
	// count against the engine's in-flight bound: calls to a failed node
	// can hang for the client's retries and dial timeouts, and must not
	// hold up the lanes of the healthy nodes (a sharded queue's master
	// failing over).
	failing atomic.Bool
	until   atomic.Int64 // due ms the lane sleeps until; noDue while awake or when nothing is due
	// lastNext and lastAhead are the last reply's next due ms (-1: none;
	// 0: a full batch), or the due time of a wake-up the lane sleeps
	// toward (see rearm), and how far the Redis clock was ahead (ns): see
	// expects.
	lastNext, lastAhead atomic.Int64
}

func (m *Engine) newLane(keys stream.Lane) *lane {
	l := &lane{m: m, keys: keys, promoteKeys: lanePromoteKeys(keys), turn: make(chan struct{}, 1)}
	l.until.Store(noDue) // keep wake-ups that arrive before the lane runs
	l.lastNext.Store(0)  // not known: the first call may find entries due
	return l
}

// scriptKeys returns the promote script's KEYS for a call made at now.
func (l *lane) scriptKeys(now time.Time) []string {
	if l.history != nil {
		return l.history.At(now)
	}
	return l.promoteKeys
}

// owned reports whether this engine promotes the lane now.
func (l *lane) owned() bool {
	return l.m.reg == nil || l.m.reg.owns(l.shard)
}

// awaitOwnership waits until the lane is owned, and reports whether it is
// (false: ctx ended). The registry wakes a lane whose ownership changes.
func (l *lane) awaitOwnership(ctx context.Context) bool {
	l.until.Store(noDue)
	for !l.owned() {
		select {
		case <-ctx.Done():
			return false
		case <-l.wake:
		}
	}
	return true
}

// notify wakes the lane when due is earlier than what it sleeps until, or
// when a lease was released (due 0). It never blocks.
func (l *lane) notify(due int64) {
	if due != 0 && l.bucket(due) >= l.until.Load() && l.until.Load() != noDue {
		return
	}
	if due == 0 {
		// A pending due time must not hide a released lease: a standby
		// ignores due times, so replace it (an owner wakes for either).
		select {
		case <-l.wake:
		default:
		}
	}
	select {
	case l.wake <- due:
	default: // a wake-up is already pending
	}
}

// bucket returns the due ms a lane sleeps until for an entry due at due
// ms: the end of due's precision bucket, the first multiple of the
// precision at or after due (never before it), or due itself at a
// precision of 0 or 1 ms, and for noDue.
func (l *lane) bucket(due int64) int64 {
	p := l.m.cfg.precision
	if p <= 1 || due <= 0 || due > noDue-p {
		return due
	}
	return (due + p - 1) / p * p
}

// noDue stands for "nothing due": later than any due time.
const noDue = 1<<63 - 1

// resubscribed is the due time notified after a (re)subscription: earlier
// than anything, so an owner or idle lane checks at once; a standby, which
// only wakes for a released lease, ignores it.
const resubscribed = 1

// wait returns how long to sleep after r, and the due ms being waited for:
// the end of the precision bucket of the next due time (see bucket).
func (l *lane) wait(r result) (time.Duration, int64) {
	cfg := &l.m.cfg
	if r.leaseTTL >= 0 { // standby: check again when the holder's lease would lapse
		d := time.Duration(r.leaseTTL)*time.Millisecond + time.Duration(1+mrand.IntN(20))*time.Millisecond
		return min(d, cfg.leaseTTL), -1
	}
	if r.moved+r.quarantined >= cfg.batch {
		return 0, r.next // a full batch: more may be due
	}
	if r.next < 0 {
		return cfg.maxIdle, -1
	}
	until := l.bucket(r.next)
	d := time.Duration(until*1000-r.nowUs) * time.Microsecond
	return max(0, min(d, cfg.maxIdle)), until
}

// firstBackoff is a lane's pause after a failed call that follows a
// successful one; it doubles with each further failure, up to the max idle.
const firstBackoff = 50 * time.Millisecond

// run promotes the lane until ctx ends, whenever this engine owns it.
func (l *lane) run(ctx context.Context, log *slog.Logger) error {
	lr := &laneRun{l: l, log: log.With(slog.String("stream", l.keys.Stream))}
	lr.timer = time.NewTimer(time.Duration(mrand.IntN(20)) * time.Millisecond) // stagger movers started together
	defer lr.timer.Stop()
	// Between sleeps every wake-up is kept (until = max): an entry scheduled
	// while a promote call runs may be earlier than the reply's next due.
	l.until.Store(noDue)
	select {
	case <-ctx.Done():
		return nil
	case <-lr.timer.C:
	}
	lr.backoff = firstBackoff
	defer func() { lr.fails.watch.End() }()
	for ctx.Err() == nil {
		if !l.owned() {
			// Another mover promotes this shard: no calls until it is ours.
			if !l.awaitOwnership(ctx) {
				return nil
			}
			continue
		}
		r, err := lr.call(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			lr.failed(ctx, err)
			continue
		}
		lr.succeeded(ctx, r)
	}
	return nil
}

// laneRun is the state of a lane's run loop.
type laneRun struct {
	l       *lane
	log     *slog.Logger
	timer   *time.Timer   // the loop's one timer: its stagger, sleeps and retries
	backoff time.Duration // the pause after the next failed call
	fails   failing
}

// call runs the promote script once, cut short, after a failure on a
// Cluster, once the lane's slot moves to another master.
func (lr *laneRun) call(ctx context.Context) (result, error) {
	// A wake-up that arrived before this call is answered by it: the
	// call promotes everything due and returns the next due time.
	select {
	case <-lr.l.wake:
	default:
	}
	cctx, cancel := lr.fails.watch.Bound(ctx)
	defer cancel()
	return lr.l.runOnce(cctx)
}

// failed records a failed call, and waits the backoff (jittered) before
// the next one, or less: until a wake-up, or the lane's slot moving to
// another master, to which the next call then goes at once.
func (lr *laneRun) failed(ctx context.Context, err error) {
	l := lr.l
	if heal.Suggests(err) {
		// From the master the call failed on: the reload
		// heal.After asked for runs in the background.
		lr.fails.watch.Start(ctx, l.m.rdb, l.keys.Stream, "")
	}
	lr.fails.failed(ctx, lr.log, err, lr.backoff)
	l.failing.Store(true)
	if l.retryAfter(ctx, lr.timer, lr.backoff+time.Duration(mrand.Int64N(int64(lr.backoff/2))), lr.fails.watch.Moved()) {
		lr.fails.watch.End()      // the next failure watches the new master
		lr.backoff = firstBackoff // and this retry goes to it now
	} else {
		lr.backoff = min(2*lr.backoff, l.m.cfg.maxIdle)
	}
}

// succeeded handles the reply r of a successful call, then sleeps until
// the next call is due.
func (lr *laneRun) succeeded(ctx context.Context, r result) {
	l := lr.l
	if lr.fails.n > 0 {
		lr.fails.succeeded(ctx, lr.log)
		l.failing.Store(false)
		// Calls failed and work again: if Redis restarted, it may
		// have restarted empty. Check now rather than at the next tick.
		select {
		case l.m.dataPoke <- struct{}{}:
		default:
		}
	}
	lr.backoff = firstBackoff
	l.noteLease(ctx, lr.log, r.leaseTTL == -1)
	if r.quarantined > 0 {
		lr.log.WarnContext(ctx, "entries quarantined", slog.Int("count", r.quarantined), slog.String("quarantine", l.keys.Quarantine))
	}
	lr.pause(ctx, r)
}

// noteLease records whether this mover held the lane's lease at its last
// call, and reports a change.
func (l *lane) noteLease(ctx context.Context, log *slog.Logger, owner bool) {
	if l.owner.Swap(owner) != owner && l.m.reg == nil { // a registry's lanes take no lease
		log.DebugContext(ctx, "mover lease changed", slog.Bool("owner", owner))
		if h := l.m.cfg.hooks.OnLease; h != nil {
			h(l.keys.Stream, owner)
		}
	}
}

// pause sleeps after a successful call with reply r: not at all after a
// full batch, idle when nothing is due within the max idle (an owner), and
// otherwise until the next due time or the holder's lease would lapse.
func (lr *laneRun) pause(ctx context.Context, r result) {
	l := lr.l
	standby := r.leaseTTL >= 0
	d, until := l.wait(r)
	if d == 0 {
		return
	}
	if !standby && l.idle(r) {
		l.sleepIdle(ctx, lr.timer, r.next, r.redisAhead(), lr.log)
		return
	}
	if until < 0 {
		until = noDue
	}
	l.until.Store(until)
	l.sleep(ctx, lr.timer, d, standby, r.redisAhead())
	l.until.Store(noDue)
}

// idle reports whether nothing is due within the max idle after r.
func (l *lane) idle(r result) bool {
	return r.next < 0 || time.Duration(l.bucket(r.next)*1000-r.nowUs)*time.Microsecond > l.m.cfg.maxIdle
}

// sleep waits for d, a wake-up or ctx, and reports whether a wake-up ended
// it. A standby wakes only for a released lease; an owner for an entry due
// before the one it waits for, and when that entry's bucket ends later
// (by the Redis clock, redisAhead ahead of this host's) it sleeps until
// then instead, as a call now would only tell it to.
func (l *lane) sleep(ctx context.Context, timer *time.Timer, d time.Duration, standby bool, redisAhead time.Duration) bool {
	timer.Reset(d)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-timer.C:
			return false
		case due := <-l.wake:
			if standby && due != 0 {
				continue
			}
			left, until, ok := l.rearm(due, redisAhead)
			if !ok {
				return true
			}
			l.until.Store(until)
			timer.Reset(left)
		}
	}
}

// rearm returns, for a wake-up that announced an entry due at due ms, how
// long to sleep before the call that promotes it, and the end of its
// precision bucket, which the lane then sleeps until: a wake-up needs no
// call of its own, since the entry's due time is in it. The due time is
// noted as the next one, as a call's reply would have named it, so that
// the call at its end reads in its pipeline (see expects). ok is false when
// the lane must call now: for a released lease (0), a resubscription
// (resubscribed), or an entry whose bucket has ended. The call at the end
// decides due-ness by the Redis clock, as every promote call does: a
// redisAhead that errs can make it early for nothing or late by the error,
// never deliver early.
func (l *lane) rearm(due int64, redisAhead time.Duration) (time.Duration, int64, bool) {
	if due <= resubscribed {
		return 0, 0, false
	}
	until := l.bucket(due)
	left := untilRedis(until, redisAhead)
	if left <= 0 {
		return 0, 0, false
	}
	l.lastNext.Store(due)
	return left, until, true
}

// untilRedis returns the time left on this host until ms on the Redis
// clock, which runs redisAhead ahead of this host's.
func untilRedis(ms int64, redisAhead time.Duration) time.Duration {
	return time.Until(time.UnixMilli(ms).Add(-redisAhead))
}

// retryAfter sleeps d after a failed call, or less: until a wake-up
// arrives or moved is closed (the lane's slot has another master). It
// reports whether moved was.
func (l *lane) retryAfter(ctx context.Context, timer *time.Timer, d time.Duration, moved <-chan struct{}) bool {
	timer.Reset(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
	case <-timer.C:
	case <-l.wake:
	case <-moved:
		return true
	}
	return false
}

// release gives up the lane's lease if this mover holds it.
func (l *lane) release(ctx context.Context) {
	if l.token == "" || !l.owner.Load() {
		return
	}
	err := scripts.Release.Run(ctx, l.m.rdb, []string{l.keys.Lease}, l.token, scripts.Channel(l.keys.Wake, l.keys.Sharded)).Err()
	if err != nil {
		l.m.cfg.logger.WarnContext(ctx, "releasing mover lease failed", slog.String("stream", l.keys.Stream), slog.Any("err", err))
	}
	l.owner.Store(false)
	l.renewed.Store(0)
}
