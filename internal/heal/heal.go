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
