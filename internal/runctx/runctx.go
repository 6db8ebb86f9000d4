// Package runctx gives long-running loops a context that ends when the
// caller's does but carries no deadline.
//
// go-redis takes a socket's deadline from the context of a call. Under a
// context with a deadline (context.WithTimeout, what tests and "run for N
// seconds" jobs use), a call in flight when the deadline comes fails with
// an i/o timeout, and it may do so a moment before the context reports
// its end (ctx.Err() is set by a timer of its own): a loop that checks
// ctx.Err() to tell a shutdown from a Redis failure then logs a failure
// that never was. Under a context without a deadline that ends when the
// caller's ends, every end is a cancellation, which go-redis does not
// turn into a socket error: ctx.Err() is set before any call fails
// because of it, and a loop's check is exact.
package runctx

import "context"

// WithoutDeadline returns a context with ctx's values and no deadline,
// cancelled (with ctx's cause, see [context.Cause]) as soon as ctx ends,
// and a function that releases it, to be called when the run ends. When
// ctx has no deadline it is returned as it is.
//
// Calls under the returned context are no longer cut short at ctx's
// deadline: they end on their own timeouts (go-redis's read and write
// timeouts, the loops' per-call timeouts), as they do after a
// cancellation.
func WithoutDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); !ok {
		return ctx, func() {}
	}
	detached, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	return detached, func() {
		stop()
		cancel(context.Canceled)
	}
}
