package group

import (
	"time"

	"github.com/redis/go-redis/v9"
)

// PromoterUsers returns how many running consumers share the process's
// mover of the queue on rdb, and 0 when none runs (for tests).
func PromoterUsers(rdb redis.UniversalClient, prefix, queue string, shards int) int {
	promoters.Lock()
	defer promoters.Unlock()
	if p := promoters.m[promoterKey{rdb: rdb, prefix: prefix, queue: queue, shards: shards}]; p != nil {
		return p.refs
	}
	return 0
}

// WithMembersEvery sets how often a consumer of a sharded queue reads the
// group's live consumers for its read affinity (for tests).
func WithMembersEvery(d time.Duration) Option {
	return func(c *config) error { c.membersEvery = d; return nil }
}

// WithLoopTick sets a function the reclaim and trim loops call at the end
// of each iteration, with "reclaim" or "trim" (for tests). It runs on the
// loop's goroutine and must not block.
func WithLoopTick(f func(loop string)) Option {
	return func(c *config) error { c.loopTick = f; return nil }
}

// WithAckDelay sets the longest an acknowledgement waits for a read to
// ride with, at most a quarter of the visibility timeout (for tests).
func WithAckDelay(d time.Duration) Option {
	return func(c *config) error { c.ackDelay = d; return nil }
}

// StrayDelay and ArrivalsPoll are the read affinity's stray delay and a
// sharded queue's poll of every shard (for tests).
const (
	StrayDelay   = strayDelay
	ArrivalsPoll = arrivalsPoll
)
