package delaystream

import (
	"time"

	"github.com/delaystream/delaystream/internal/group"
)

// WithConcurrencyLimit caps how many of the group's messages are handled
// at once by all its consumers together, in every process (1 to
// 1000000): for a downstream that takes at most m calls in parallel.
// Default: no cap. Each consumer reads only for the slots it gets, so
// entries over the cap stay unread in the stream, not held by a consumer
// that cannot start them. Slots are counted in Redis per consumer with a
// deadline of one visibility timeout, renewed while it runs: a consumer
// that dies gives its slots back within the visibility timeout, as its
// entries become reclaimable. A consumer waiting for a slot is woken when
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
// entries count like first deliveries. Give every consumer of a group the
// same limits.
func WithRateLimit(n int, per time.Duration, burst int) GroupOption {
	return groupOption(group.WithRateLimit(n, per, burst))
}
