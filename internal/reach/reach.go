// Package reach explains a call to Redis that ran out of time.
//
// When Redis is down, go-redis retries the dial with backoff and, once
// the caller's context ends, returns the context's error: the cause
// ("connection refused", "no such host") reaches only go-redis's own log
// on stderr, and the caller reads "context deadline exceeded". [Explain]
// puts it back into the error the caller gets.
package reach

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Probe timing.
const (
	// probeTimeout bounds a probe's dial: a refused connection answers at
	// once, a host that drops packets is reported after this.
	probeTimeout = 250 * time.Millisecond
	// probeReuse is how long a probe's result answers for its address, so
	// that calls timing out together (a batch, a burst of requests to an
	// overloaded server) dial once.
	probeReuse = time.Second
)

// Explain returns err, a call's error, with the reason Redis could not be
// reached when the call ended because ctx did ("context deadline
// exceeded" while go-redis was still dialing): it dials, once, the
// server that serves key (the client's own for a single server, the
// key's master for a Cluster), and if that fails, the returned error
// also wraps the dial's error ("...: context deadline exceeded (Redis
// unreachable: dial tcp 10.0.0.1:6379: connect: connection refused)").
// Any other error, a server that accepts the connection, and a client
// that is neither a *redis.Client nor a *redis.ClusterClient leave err
// as it is. The probe adds at most 250 ms to a call whose ctx already
// ended, and its result is reused for a second.
func Explain(ctx context.Context, rdb redis.UniversalClient, err error, key string) error {
	if err == nil || ctx.Err() == nil || !(errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) {
		return err
	}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), probeTimeout)
	defer cancel()
	if why := probe(pctx, rdb, key); why != nil {
		return fmt.Errorf("%w (Redis unreachable: %w)", err, why)
	}
	return err
}

// probe returns why the server of key cannot be reached, or nil.
func probe(ctx context.Context, rdb redis.UniversalClient, key string) error {
	var c *redis.Client
	switch r := rdb.(type) {
	case *redis.Client:
		c = r
	case *redis.ClusterClient:
		m, err := r.MasterForKey(ctx, key)
		if err != nil {
			if ctx.Err() != nil {
				return nil // no more known than before
			}
			return err // the cluster's layout could not be read
		}
		c = m
	default:
		return nil
	}
	o := c.Options()
	if o.Dialer == nil {
		return nil
	}
	return dial(ctx, o)
}

// recent holds the probes' results by address.
var recent = struct {
	sync.Mutex
	m map[string]result
}{m: map[string]result{}}

type result struct {
	at  time.Time
	err error
}

// dial dials the server of o (or reuses a result of the last second).
func dial(ctx context.Context, o *redis.Options) error {
	key := o.Network + " " + o.Addr
	recent.Lock()
	r, ok := recent.m[key]
	recent.Unlock()
	if ok && time.Since(r.at) < probeReuse {
		return r.err
	}
	conn, err := o.Dialer(ctx, o.Network, o.Addr)
	if err == nil {
		_ = conn.Close()
	}
	recent.Lock()
	defer recent.Unlock()
	for k, r := range recent.m { // a few addresses: keep only the fresh ones
		if time.Since(r.at) >= probeReuse {
			delete(recent.m, k)
		}
	}
	recent.m[key] = result{at: time.Now(), err: err}
	return err
}
