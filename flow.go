package delaystream

import (
	"context"
	"fmt"
	"time"

	"github.com/delaystream/delaystream/internal/group"
	"github.com/delaystream/delaystream/internal/optcheck"
	"github.com/delaystream/delaystream/internal/scripts"
)

// WithConcurrencyLimit caps how many of the group's messages are handled
// at once by all its consumers together, in every process (1 to
// 1000000): for a downstream that takes at most m calls in parallel.
// Default: no cap. Each consumer reads only for the slots it gets, so
// entries over the cap stay unread in the stream, not held by a consumer
// that cannot start them. Slots are counted in Redis per consumer with a
// deadline of one visibility timeout, renewed while it runs: a consumer
// that dies gives its slots back within the visibility timeout, as its
// entries become reclaimable. Its entries then take the next slots that
// free, ahead of fresh reads, so they are handled again within the
// visibility timeout + the reclaim interval + about one handler time
// however long the backlog. A consumer waiting for a slot is woken when
// another frees one. Give every consumer of a group the same limits; the
// operator tools show those of the consumer started last.
func WithConcurrencyLimit(m int) GroupOption { return groupOption(group.WithConcurrencyLimit(m)) }

// WithRateLimit limits the group to n messages started per interval per
// by all its consumers together, in every process, with at most burst
// started at once after a quiet spell: in any window of length w at most
// burst + n·w/per start (n and burst 1 to 1000000, per 1 ms to 24 h, at
// most one per µs). Default: no limit. For a downstream that takes 100
// requests/s, WithRateLimit(100, time.Second, 10).
//
// The limit is enforced in Redis by one script call per read, only for
// limited groups, with GCRA (the generic cell rate algorithm: a token
// bucket kept as one number, the time at which the next permit is due).
// Against a token bucket of count and refill time, or a sliding window of
// timestamps, it keeps one number whatever the burst, needs no refill
// timer, and tells a refused consumer the exact time the next permits are
// free, so waiting consumers sleep until then rather than poll; they
// wait for a quarter of the burst at a time, so a busy limit costs a few
// calls per second, not one per message. A consumer reads only what it
// was granted, and gives back what a read did not use. Time waited shows
// in [Counters].LimitWait and [Hooks].OnLimitWait. Retries and reclaimed
// entries count like first deliveries; entries reclaimed from a dead
// consumer take the next permits, ahead of fresh reads. Give every
// consumer of a group the same limits.
func WithRateLimit(n int, per time.Duration, burst int) GroupOption {
	return groupOption(group.WithRateLimit(n, per, burst))
}

// keyLimit is a group's per-key rate limit (WithKeyRateLimit).
type keyLimit struct {
	key      func(d *Delivery) string
	interval time.Duration
	burst    int
}

// WithKeyRateLimit limits the group to n messages started per interval
// per for each key that key returns (a customer, a tenant, a host), in
// every process, with up to burst of one key at once: "at most 5/s per
// customer". A message whose key is "" is not limited. Default: none.
// It costs nothing to a group without it. With it, each delivery makes
// one script call before the handler (and middleware) runs; a message
// whose key has no permit free reserves the next one and is snoozed
// until then (see [Snooze]: not an attempt), so it is not held meanwhile
// and takes one permit however long it waits. A key's state expires once
// the key is idle. n and burst 1 to 1000000, per 1 ms to 24 h, at most
// one per µs.
func WithKeyRateLimit(key func(d *Delivery) string, n int, per time.Duration, burst int) GroupOption {
	return func(c *groupConfig) error {
		switch {
		case key == nil:
			return optcheck.NotNil(ErrInvalidOption, "key rate limit's key function", true)
		case n < 1 || n > 1000000 || burst < 1 || burst > 1000000:
			return fmt.Errorf("%w: key rate limit: n and burst must be 1 to 1000000, got %d and %d", ErrInvalidOption, n, burst)
		case per < time.Millisecond || per > 24*time.Hour || per/time.Duration(n) < time.Microsecond:
			return fmt.Errorf("%w: key rate limit: %d per %s (per 1ms to 24h, at most 1 per µs)", ErrInvalidOption, n, per)
		}
		c.keyLimit = &keyLimit{key: key, interval: per / time.Duration(n), burst: burst}
		return nil
	}
}

// keyLimited returns the middleware of group's per-key rate limit on q.
func (q *Queue) keyLimited(group string, kl *keyLimit) Middleware {
	return func(next Handler) Handler {
		return func(ctx context.Context, d *Delivery) error {
			k := kl.key(d)
			if k == "" {
				return next(ctx, d)
			}
			state, res := q.layout.Shard(q.layout.ShardOf(k)).KeyRate(group, k, d.ID)
			wait, err := scripts.KeyRate.Run(ctx, q.rdb, []string{state, res},
				kl.interval.Microseconds(), kl.burst, time.Hour.Milliseconds()).Int64()
			if err != nil {
				return fmt.Errorf("key rate limit of %q: %w", k, scripts.Explain(err))
			}
			if wait > 0 {
				return Snooze(time.Duration(wait) * time.Microsecond)
			}
			return next(ctx, d)
		}
	}
}
