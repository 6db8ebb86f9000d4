package group

import (
	"context"
	"log/slog"
	"time"

	"github.com/delaystream/delaystream/internal/heal"
	"github.com/delaystream/delaystream/internal/scripts"
)

// extender extends the hold of the entries this consumer holds (queued or
// running), so that they are not reclaimed while it still works on them.
type extender struct {
	r *runState
}

// loop keeps entries held by running handlers from being reclaimed:
// every third of the visibility timeout it resets the idle time of entries
// held longer than that, after checking this consumer still owns them. A
// handler whose entry was taken over has its ctx cancelled.
func (x *extender) loop(ctx context.Context) error {
	c := x.r.c
	every := c.cfg.visibility / 3
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			// Handlers may still drain: keep extending until they finish.
			return x.whileDraining(every)
		case <-t.C:
			x.once(context.WithoutCancel(ctx), every)
		}
	}
}

// whileDraining extends every interval until every worker has returned.
func (x *extender) whileDraining(every time.Duration) error {
	r := x.r
	done := make(chan struct{})
	go func() { r.handlers.Wait(); close(done) }()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-done:
			return nil
		case <-t.C:
			x.once(context.WithoutCancel(r.workCtx), every)
		}
	}
}

// once extends, in one pipeline, every held entry not extended for half
// the interval, and cancels the handlers of entries this consumer no
// longer owns.
func (x *extender) once(ctx context.Context, every time.Duration) {
	r, c := x.r, x.r.c
	now := time.Now()
	var due []*flight
	c.held.mu.Lock()
	for b := range c.held.batches {
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
	c.held.mu.Unlock()
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
		heal.After(c.rdb, err)
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
			c.held.mu.Lock()
			f.since = now
			c.held.mu.Unlock()
			continue
		}
		f.mu.Lock()
		if f.cancel != nil {
			f.cancel(errOwnershipLost)
		}
		f.mu.Unlock()
	}
}
