package group

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/delaystream/delaystream/internal/flow"
)

// pausePoll is how often a running consumer reads its group's pause state
// without a reason to: the last resort, should a notice be lost while its
// subscription still stood (a notice lost while it was broken is caught by
// the read at the resubscription).
const pausePoll = 5 * time.Minute

// pauseState is the group's pause as this consumer knows it. The reader
// waits while it is paused, the workers hand back what they have not
// started, and the reclaimer claims nothing. Its methods are safe for
// concurrent use.
type pauseState struct {
	on   atomic.Bool
	kick chan struct{} // a token: read the state again (a notice, a resubscription)

	mu      sync.Mutex
	since   time.Time     // when the pause began; guarded by mu
	changed chan struct{} // closed at the next change; guarded by mu
}

func newPauseState() *pauseState {
	return &pauseState{kick: make(chan struct{}, 1), changed: make(chan struct{})}
}

// paused reports whether the group is paused.
func (p *pauseState) paused() bool { return p.on.Load() }

// set records the state read from Redis (zero since: not paused) and
// reports whether it changed.
func (p *pauseState) set(since time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	on := !since.IsZero()
	if on == p.on.Load() && since.Equal(p.since) {
		return false
	}
	was := p.on.Load()
	p.since = since
	p.on.Store(on)
	if on != was {
		close(p.changed)
		p.changed = make(chan struct{})
	}
	return on != was
}

// poke asks the watcher to read the state again.
func (p *pauseState) poke() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// await waits while the group is paused. It reports false once ctx
// ended, and whether it waited.
func (p *pauseState) await(ctx context.Context) (ok, waited bool) {
	for {
		p.mu.Lock()
		on, ch := p.on.Load(), p.changed
		p.mu.Unlock()
		if !on {
			return true, waited
		}
		waited = true
		select {
		case <-ctx.Done():
			return false, waited
		case <-ch:
		}
	}
}

// readPause reads the group's pause state once and records it, logging a
// change (and, with first, a pause in place at start). A failed read is
// logged and leaves the state as it was.
func (r *runState) readPause(ctx context.Context, first bool, fails *failures) {
	c := r.c
	rctx, cancel := context.WithTimeout(ctx, opTimeout)
	since, err := flow.GroupSince(rctx, c.rdb, c.layout, c.group)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			fails.failed(ctx, r.log, "reading the group's pause state failed", err)
		}
		return
	}
	fails.succeeded(ctx, r.log, "reading the group's pause state recovered")
	if !r.pause.set(since) && !(first && !since.IsZero()) {
		return
	}
	if since.IsZero() {
		r.log.InfoContext(ctx, "group resumed: taking new entries again")
		return
	}
	r.log.WarnContext(ctx, "group paused: taking no new entries until resumed", slog.Time("paused_since", since))
}

// watchPause keeps the pause state up to date until ctx ends: at every
// poke (a notice on the queue's arrivals channel, a resubscription) and
// every pausePoll.
func (r *runState) watchPause(ctx context.Context) error {
	t := time.NewTicker(pausePoll)
	defer t.Stop()
	var fails failures
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.pause.kick:
		case <-t.C:
		}
		r.readPause(ctx, false, &fails)
	}
}

// SetPaused pauses (on) or resumes the consumer's group in every process
// (see flow.SetGroup) and returns since when it is paused, or for a
// resume since when the pause it ended was (zero if none).
func (c *Consumer) SetPaused(ctx context.Context, on bool) (time.Time, error) {
	return flow.SetGroup(ctx, c.rdb, c.layout, c.group, on)
}

// PausedSince returns since when the consumer's group is paused, zero
// when it is not.
func (c *Consumer) PausedSince(ctx context.Context) (time.Time, error) {
	return flow.GroupSince(ctx, c.rdb, c.layout, c.group)
}
