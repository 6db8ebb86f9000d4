// Package heal makes a Redis Cluster client notice a failover quickly.
//
// go-redis's ClusterClient reloads its slot map on MOVED and ASK replies and
// on a periodic interval, but not when a call fails because the master it
// routes to is dead: by default it then keeps dialing the dead address for
// up to a minute after a replica was promoted. Every loop of the library
// that retries failed calls reports the failure here first, so that the
// next attempt goes to the new master.
package heal

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// After asks rdb, when it is a *redis.ClusterClient and err suggests the
// cluster's layout changed or a node is unreachable, to reload its view of
// the cluster in the background. go-redis coalesces the requests (one
// reload at a time, at most one per 200 ms), so calling it on every failure
// is cheap. It ignores nil, redis.Nil, and error replies that a reload
// cannot fix (a script error, a key of the wrong type).
func After(rdb redis.UniversalClient, err error) {
	c, ok := rdb.(*redis.ClusterClient)
	if !ok || err == nil || errors.Is(err, redis.Nil) || errors.Is(err, context.Canceled) {
		return
	}
	if !Suggests(err) {
		return
	}
	c.ReloadState(context.Background())
}

// Suggests reports whether err may come from a node that is down or from a
// changed slot map: a network error or timeout (anything that is not an
// error reply), or one of the replies of a cluster in transition.
func Suggests(err error) bool {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return true
	}
	for _, p := range []string{"CLUSTERDOWN", "MASTERDOWN", "READONLY", "TRYAGAIN", "LOADING", "MOVED", "ASK"} {
		if redis.HasErrorPrefix(err, p) {
			return true
		}
	}
	return false
}

// transientReplies are error replies that pass without anyone fixing a
// key, a script or a permission: the server is loading, busy, failing over
// or out of memory, or a script is not cached yet.
var transientReplies = []string{"LOADING", "BUSY", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN",
	"READONLY", "MOVED", "ASK", "NOREPLICAS", "NOSCRIPT", "OOM"}

// Transient reports whether err passes by itself, so that the call is worth
// repeating after a pause: a network error or timeout (anything that is not
// an error reply from Redis), or one of the transientReplies. A script
// error, a key of the wrong type or a refused permission repeats until
// someone fixes it.
func Transient(err error) bool {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return true
	}
	for _, p := range transientReplies {
		if redis.HasErrorPrefix(err, p) {
			return true
		}
	}
	return false
}

// While a call keeps failing, the slot map is reloaded every reloadEvery
// and checked every movedCheck (see [Moved]): a failed master's replica is
// promoted within the cluster's node timeout, and the retry should go to it
// then rather than after a backoff grown while the master was down (the
// client reloads its map by itself only after a failed call, or every 10 s).
const (
	reloadEvery = 250 * time.Millisecond
	movedCheck  = 100 * time.Millisecond
)

// MasterOf returns the address of the master that serves key in rdb's slot
// map, or "" if rdb is not a *redis.ClusterClient or the map has none.
func MasterOf(ctx context.Context, rdb redis.UniversalClient, key string) string {
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		return ""
	}
	c, err := cc.MasterForKey(ctx, key)
	if err != nil {
		return ""
	}
	return c.Options().Addr
}

// Moved returns a channel that is closed once key's slot is served by
// another master than addr (a replica was promoted, the slot resharded),
// for a loop that backs off after calls failed on addr and should retry at
// once when the slot moves. Until then, or until ctx ends, it reloads rdb's
// slot map every 250 ms and looks every 100 ms; a reload is one CLUSTER
// SLOTS call, and go-redis coalesces concurrent ones. It returns nil (a
// channel that never fires) when rdb is not a *redis.ClusterClient or addr
// is "".
func Moved(ctx context.Context, rdb redis.UniversalClient, key, addr string) <-chan struct{} {
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok || addr == "" {
		return nil
	}
	moved := make(chan struct{})
	go func() {
		check := time.NewTicker(movedCheck)
		defer check.Stop()
		reloaded := time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case <-check.C:
			}
			if m := MasterOf(ctx, cc, key); m != "" && m != addr {
				close(moved)
				return
			}
			if time.Since(reloaded) >= reloadEvery {
				reloaded = time.Now()
				cc.ReloadState(ctx)
			}
		}
	}()
	return moved
}

// Watch follows, for a loop whose calls on a Cluster keep failing, whether
// the slot they go to moves to another master (see [Moved]). The zero
// Watch watches nothing; its Moved channel is nil. It is not safe for
// concurrent use.
type Watch struct {
	moved <-chan struct{}
	stop  context.CancelFunc
}

// Start watches key's slot from master from (the address of the node the
// calls failed on), or if from is "", from the master that serves it in
// rdb's slot map now (then call it before asking for a reload: see
// [After]), unless a watch runs. It watches nothing unless rdb is a
// *redis.ClusterClient.
func (w *Watch) Start(ctx context.Context, rdb redis.UniversalClient, key, from string) {
	if w.stop != nil {
		return
	}
	if from == "" {
		from = MasterOf(ctx, rdb, key)
	}
	wctx, stop := context.WithCancel(ctx)
	w.moved, w.stop = Moved(wctx, rdb, key, from), stop
}

// Moved returns a channel closed once the watched slot moved; nil (never
// ready) when no watch runs.
func (w *Watch) Moved() <-chan struct{} { return w.moved }

// End stops the watch, if one runs. A watch whose slot moved should be
// ended, so that the next Start watches the new master.
func (w *Watch) End() {
	if w.stop != nil {
		w.stop()
		*w = Watch{}
	}
}

// Bound returns a context that is also cancelled once the watched slot
// moves, for a call made while earlier ones fail: go-redis may go on
// dialing the failed master for seconds (dial retries, then retries of the
// command), and the call is better made again to the new one. Without a
// watch it returns ctx. The caller must call cancel.
func (w *Watch) Bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if w.moved == nil {
		return ctx, func() {}
	}
	cctx, cancel := context.WithCancel(ctx)
	moved := w.moved
	go func() {
		select {
		case <-moved:
			cancel()
		case <-cctx.Done():
		}
	}()
	return cctx, cancel
}

// CutIfMoved arranges for cancel (the cancel function of a call's context
// ctx) to be called if the call is still running after slow and, from
// then on, key's slot is found served by another master than addr (the
// one that serves it now, by MasterOf; see [Moved]): a call that began just before its master
// died goes on dialing it, through go-redis's dial retries and command
// retries, for seconds after a replica took over. It returns the function
// that disarms it, to call when the call returns. On a client that is not
// a *redis.ClusterClient it does nothing.
func CutIfMoved(ctx context.Context, cancel context.CancelFunc, rdb redis.UniversalClient, key, addr string, slow time.Duration) (stop func() bool) {
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok || addr == "" {
		return func() bool { return false }
	}
	t := time.AfterFunc(slow, func() {
		moved := Moved(ctx, cc, key, addr)
		go func() {
			select {
			case <-moved:
				cancel()
			case <-ctx.Done():
			}
		}()
	})
	return t.Stop
}
