package dstest

import (
	"context"
	"sync"
	"time"

	"github.com/delaystream/delaystream"
)

// recorder collects what one Work did, from the group's outermost
// middleware (the handler's errors) and its hooks (the outcomes). Hooks
// and middleware of one delivery meet by its stream entry id.
type recorder struct {
	now time.Time // the server's clock during Work: retries are due from it

	mu      sync.Mutex
	runs    map[string]int           // handler runs by message id
	ran     map[string]bool          // by entry id: the handler ran
	errs    map[string]error         // by entry id: what the handler returned
	retryIn map[string]time.Duration // by entry id: the retry's delay
	reasons map[string]string        // by entry id: the dead letter's reason
	out     []Handled

	runaway chan struct{} // closed when a message ran maxRuns times
	id      string        // that message
}

func newRecorder(now time.Time) *recorder {
	return &recorder{now: now, runs: map[string]int{}, ran: map[string]bool{}, errs: map[string]error{},
		retryIn: map[string]time.Duration{}, reasons: map[string]string{}, runaway: make(chan struct{})}
}

// middleware records each run of the handler and what it returned.
func (r *recorder) middleware(next delaystream.Handler) delaystream.Handler {
	return func(ctx context.Context, d *delaystream.Delivery) error {
		r.mu.Lock()
		r.ran[d.EntryID] = true
		if r.runs[d.ID]++; r.runs[d.ID] == maxRuns {
			r.id = d.ID
			close(r.runaway)
		}
		r.mu.Unlock()
		err := next(ctx, d)
		r.mu.Lock()
		r.errs[d.EntryID] = err
		r.mu.Unlock()
		return err
	}
}

// hooks returns the group hooks that record outcomes.
func (r *recorder) hooks() delaystream.Hooks {
	return delaystream.Hooks{
		OnFailed: func(d *delaystream.Delivery, err error, retryIn time.Duration) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.errs[d.EntryID], r.retryIn[d.EntryID] = err, retryIn // err includes a timeout
		},
		OnDropped: func(d *delaystream.Delivery, err error) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.errs[d.EntryID] = err
		},
		OnDeadLettered: func(d *delaystream.Delivery, reason string) {
			r.mu.Lock()
			defer r.mu.Unlock()
			if d != nil && r.ran[d.EntryID] {
				r.reasons[d.EntryID] = reason // OnHandled follows
				return
			}
			h := Handled{Outcome: delaystream.HandlerDeadLettered, Reason: reason}
			if d != nil {
				h.ID, h.Attempt = d.ID, d.Attempt
			}
			r.out = append(r.out, h)
		},
		OnHandled: func(d *delaystream.Delivery, o delaystream.HandlerOutcome, _ time.Duration) {
			r.mu.Lock()
			defer r.mu.Unlock()
			e := d.EntryID
			h := Handled{ID: d.ID, Attempt: d.Attempt, Outcome: o, Err: r.errs[e], Reason: r.reasons[e]}
			if in, ok := r.retryIn[e]; ok && o == delaystream.HandlerRetried {
				h.RetryAt = retryDue(r.now, in)
			}
			r.out = append(r.out, h)
			delete(r.ran, e)
			delete(r.errs, e)
			delete(r.retryIn, e)
			delete(r.reasons, e)
		},
	}
}

// retryDue returns when a retry with delay in is due, as the retry script
// computes it: now rounded up to the ms, plus in's whole ms.
func retryDue(now time.Time, in time.Duration) time.Time {
	us := now.UnixMicro()
	return time.UnixMilli((us+999)/1000 + in.Milliseconds())
}

func (r *recorder) results() []Handled {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.out
}

func (r *recorder) runawayID() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.id
}
