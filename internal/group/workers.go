package group

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/delaystream/delaystream/internal/wire"
)

// workers is the pool that takes queued entries from the reader, decodes
// them, runs the handler and passes the outcome to the settler.
type workers struct {
	r      *runState
	rd     *reader
	settle *settler
	intake context.Context // done when intake stops: queued jobs are then handed back, not handled
}

// work handles queued entries until the queue is closed. After intake
// stopped it hands queued entries back instead of starting them. Run one
// per worker, counted in runState.handlers.
func (w *workers) work() {
	r, rd := w.r, w.rd
	defer r.handlers.Done()
	// The handlers' contexts derive from one per worker, so that creating
	// and cancelling them takes no lock shared with the other workers.
	wctx, cancel := context.WithCancel(r.workCtx)
	defer cancel()
	for f := range rd.jobs {
		switch {
		case w.intake.Err() != nil, r.pause.paused():
			w.handBackQueued(f) // not started: the group takes it after the restart or the resume
		default:
			start := time.Now()
			w.handle(wctx, f)
			rd.busy.Add(int64(time.Since(start)))
			rd.handled.Add(1)
			rd.release(f)
		}
	}
}

// handBackQueued hands back f and whatever else is queued at that moment,
// in one call per stream, rather than one call per entry, their delivery
// counts kept (see reader.giveBack).
func (w *workers) handBackQueued(f *flight) {
	fs := []*flight{f}
	for {
		select {
		case f, ok := <-w.rd.jobs: // closed once intake has stopped
			if ok {
				fs = append(fs, f)
				continue
			}
		default:
		}
		break
	}
	w.rd.giveBack(fs)
}

// handle decodes, runs the handler and settles the entry.
func (w *workers) handle(wctx context.Context, f *flight) {
	c := w.r.c
	c.ctr.delivered.Add(1)
	e, err := wire.Decode(f.b.stream, f.x.ID, f.x.Values)
	if err != nil {
		w.settle.deadLetterRaw(wctx, f, err)
		return
	}
	m := &Message{
		ID: e.Envelope.ID, Payload: e.Envelope.Payload, Headers: e.Envelope.Headers,
		Attempt: max(e.Envelope.Attempt, 1), Deliveries: f.deliveries,
		Due: e.Envelope.Due, Created: e.Envelope.Created, Deadline: e.Envelope.Deadline,
		Group: c.group, Stream: f.b.stream, EntryID: f.x.ID,
	}
	// hctx ends when the entry is taken over or at the drain timeout.
	hctx, cancel := context.WithCancelCause(wctx)
	defer cancel(nil)
	f.mu.Lock()
	f.cancel = cancel
	f.mu.Unlock()
	if !m.Deadline.IsZero() && c.cfg.clock().After(m.Deadline) {
		c.ctr.expired.Add(1)
		w.settle.deadLetter(hctx, m, &e.Envelope, ReasonExpired, fmt.Errorf("deadline %s passed", m.Deadline.Format(time.RFC3339Nano)))
		return
	}
	if f.deliveries > c.cfg.maxDeliveries {
		w.settle.deadLetter(hctx, m, &e.Envelope, ReasonDeliveries, fmt.Errorf("delivered %d times, max %d", f.deliveries, c.cfg.maxDeliveries))
		return
	}
	if h := c.cfg.hooks.OnDelivered; h != nil {
		h(m)
	}
	var start time.Time
	onHandled := c.cfg.hooks.OnHandled
	if c.cfg.hooks.OnAcked != nil || onHandled != nil {
		start = time.Now()
	}
	herr := w.call(hctx, m)
	var took time.Duration
	if onHandled != nil {
		took = time.Since(start)
	}
	var o Outcome
	switch {
	case f.handedBack.Load() && herr != nil:
		o = OutcomeHandedBack // drain timeout: the entry was handed back to the group
	case herr == nil:
		w.settle.acked(f, m, start)
		o = OutcomeAcked
	default:
		o = w.settle.failed(hctx, f, m, &e.Envelope, herr)
	}
	if onHandled != nil {
		onHandled(m, o, took)
	}
}

// call runs the handler, turning a panic into an error.
func (w *workers) call(ctx context.Context, m *Message) (err error) {
	r := w.r
	defer func() {
		if p := recover(); p != nil {
			r.c.ctr.panics.Add(1)
			r.log.ErrorContext(ctx, "handler panicked", slog.String("id", m.ID),
				slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
			err = fmt.Errorf("handler panic: %v", p)
		}
	}()
	return r.c.h(ctx, m)
}
