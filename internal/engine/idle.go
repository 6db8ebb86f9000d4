package engine

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/delaystream/delaystream/internal/heal"
)

// maxProbePeriod caps how long an idle lane goes without a probe of its
// head when many lanes share an engine's probe budget (or the max idle,
// when that is longer).
const maxProbePeriod = 30 * time.Second

// maxInterval is the longest max idle and idle probe interval the options
// accept.
const maxInterval = time.Minute

// maxLookGap is the longest a lane this engine owns goes without a look at
// its head (a promote call or a probe), whatever the options: a sleep lasts
// at most the max idle, and an idle lane's probe period is at most the
// longer of maxProbePeriod and its interval. The schedule and retry
// scripts rely on it: a message due beyond scripts.WakeHorizon is found by
// a look, with no wake-up (see wake.lua).
const maxLookGap = max(maxProbePeriod, maxInterval)

// probeTiming returns, for n > 0 idle lanes, how often each is probed and
// the shortest gap between two probes of the engine: n lanes share one
// probe per interval maxIdle (the max idle, or the idle probe interval
// when one is set), so each is probed every n × maxIdle, but at least
// every maxProbePeriod (or every maxIdle, when that is longer), in which
// case the engine probes more often than once per interval.
func probeTiming(maxIdle time.Duration, n int) (period, gap time.Duration) {
	period = min(maxIdle*time.Duration(n), max(maxProbePeriod, maxIdle))
	return period, period / time.Duration(n)
}

// idleProbes is an engine's budget of idle probes. An idle lane (nothing
// due within the max idle) probes the head of its delayed set only to
// catch a wake-up that was lost; its probes are what an idle engine costs.
// The lanes share the budget: turns come one gap apart (see probeTiming),
// and each goes to the idle lane looked at longest ago, once a gap has
// passed since it was. So an engine with one lane probes it once per max
// idle, as an unshared probe would, and n idle lanes are probed in turn,
// each about every n gaps, the engine about once per max idle in all. Its
// methods are safe for concurrent use.
type idleProbes struct {
	maxIdle time.Duration
	kick    chan struct{} // the idle set changed

	mu    sync.Mutex
	idle  map[*lane]time.Time // idle lanes -> when each was last looked at
	given time.Time           // the last turn given
}

func newIdleProbes(maxIdle time.Duration) *idleProbes {
	return &idleProbes{maxIdle: maxIdle, kick: make(chan struct{}, 1), idle: map[*lane]time.Time{}}
}

// enter counts l as idle from now, as just looked at (it has just called
// the promote script).
func (p *idleProbes) enter(l *lane) {
	p.mu.Lock()
	p.idle[l] = time.Now()
	select { // a turn given before it left last time
	case <-l.turn:
	default:
	}
	p.mu.Unlock()
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// leave stops counting l as idle. It is idempotent.
func (p *idleProbes) leave(l *lane) {
	p.mu.Lock()
	delete(p.idle, l)
	p.mu.Unlock()
}

// next returns the idle lane looked at longest ago, when it was, and how
// many lanes are idle; nil if none is.
func (p *idleProbes) next() (*lane, time.Time, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var (
		pick  *lane
		since time.Time
	)
	for l, t := range p.idle {
		if pick == nil || t.Before(since) || t.Equal(since) && l.shard < pick.shard {
			pick, since = l, t
		}
	}
	return pick, since, len(p.idle)
}

// give gives l its turn if it is still idle and was last looked at at
// since, and reports whether it did.
func (p *idleProbes) give(l *lane, since time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if t, ok := p.idle[l]; !ok || !t.Equal(since) {
		return false
	}
	now := time.Now()
	p.idle[l], p.given = now, now
	select {
	case l.turn <- struct{}{}:
	default:
	}
	return true
}

// run gives the turns until ctx ends.
func (p *idleProbes) run(ctx context.Context) error {
	timer := time.NewTimer(0)
	<-timer.C
	defer timer.Stop()
	for {
		l, since, n := p.next()
		var tc <-chan time.Time
		if l != nil {
			_, gap := probeTiming(p.maxIdle, n)
			p.mu.Lock()
			at := since.Add(gap)
			if g := p.given.Add(gap); g.After(at) {
				at = g
			}
			p.mu.Unlock()
			timer.Reset(time.Until(at))
			tc = timer.C
		}
		select {
		case <-ctx.Done():
			return nil
		case <-p.kick:
			timer.Stop()
		case <-tc:
			p.give(l, since)
		}
	}
}

// sleepIdle waits, with nothing due within the max idle, until the lane's
// head entry (due ms; -1 = none) is about to be due (the end of its
// precision bucket), a wake-up announces an earlier entry, or a probe
// finds one. A probe is one ZRANGE of the delayed set's head instead of a
// promote call, taken when the engine's idle probe budget gives the lane
// its turn (see idleProbes): about once per max idle
// for an engine with one idle lane. It only catches a lost wake-up, and
// decides nothing about due-ness (the promote script that follows does).
// The lease is not renewed meanwhile: it lapses, and whichever mover calls
// first when work arrives takes it.
func (l *lane) sleepIdle(ctx context.Context, timer *time.Timer, head int64, redisAhead time.Duration, log *slog.Logger) {
	maxIdle := l.m.cfg.maxIdle
	defer l.until.Store(noDue)
	l.m.probes.enter(l)
	defer l.m.probes.leave(l)
	for ctx.Err() == nil {
		wait := time.Duration(-1) // until a turn or a wake-up
		if head < 0 {
			l.until.Store(noDue)
		} else {
			head = l.bucket(head)
			l.until.Store(head)
			// Until the head's bucket ends on the Redis clock.
			left := untilRedis(head, redisAhead)
			if left <= maxIdle {
				l.m.probes.leave(l) // not idle any more
				l.sleep(ctx, timer, max(0, left), false, redisAhead)
				return
			}
			wait = left - maxIdle // then sleep to the head exactly
		}
		switch ended, due := l.awaitTurn(ctx, timer, wait); ended {
		case woken:
			if _, _, ok := l.rearm(due, redisAhead); !ok || ctx.Err() != nil {
				return
			}
			head = due // sleep toward it, with no call (see rearm)
			continue
		case elapsed:
			continue
		}
		if !l.owned() {
			return // the run loop waits until the lane is owned again
		}
		h, err := l.probe(ctx)
		if err != nil {
			heal.After(l.m.rdb, err)
			if ctx.Err() == nil {
				log.DebugContext(ctx, "idle probe failed", slog.Any("err", err))
			}
			return // the promote call reports and backs off
		}
		head = h
	}
}

// What ended an idle lane's wait.
const (
	woken   = iota // a wake-up (or ctx ended)
	elapsed        // the wait's duration
	turned         // the lane's turn to probe
)

// awaitTurn waits for the lane's probe turn, d (d < 0: no limit), a
// wake-up or ctx, and returns what ended the wait and, for a wake-up, the
// due time it announced (0 when ctx ended).
func (l *lane) awaitTurn(ctx context.Context, timer *time.Timer, d time.Duration) (int, int64) {
	var tc <-chan time.Time
	if d >= 0 {
		timer.Reset(d)
		defer timer.Stop()
		tc = timer.C
	}
	select {
	case <-ctx.Done():
		return woken, 0
	case due := <-l.wake:
		return woken, due
	case <-tc:
		return elapsed, 0
	case <-l.turn:
		return turned, 0
	}
}

// probe returns the due ms of the lane's earliest entry, -1 if none.
func (l *lane) probe(ctx context.Context) (int64, error) {
	if !l.failing.Load() {
		release, err := l.m.acquireCall(ctx, heal.MasterOf(ctx, l.m.rdb, l.keys.Delayed))
		if err != nil {
			return -1, err
		}
		defer release()
	}
	ctx, cancel := context.WithTimeout(ctx, l.m.cfg.callLimit)
	defer cancel()
	zs, err := l.m.rdb.ZRangeWithScores(ctx, l.keys.Delayed, 0, 0).Result()
	if err != nil || len(zs) == 0 {
		return -1, err
	}
	return int64(zs[0].Score), nil
}
