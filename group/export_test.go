package group

import "github.com/redis/go-redis/v9"

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
