package shards

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream/internal/scripts"
	"github.com/delaystream/delaystream/stream"
)

// Guard checks, once per part, that the shard count a part was built with
// is the one recorded for its queue, recording it when the queue is first
// used. Its methods are safe for concurrent use.
type Guard struct {
	layout *stream.Layout
	what   string // the part, for errors: "producer", "mover", "consumer"
	ok     atomic.Bool
}

// NewGuard returns the guard of a part (what names it in errors) of the
// queue with layout l.
func NewGuard(l *stream.Layout, what string) *Guard {
	return &Guard{layout: l, what: what}
}

// Check returns nil if the queue's record agrees with the part's shard
// count (recording it if there is none); after one success it returns nil
// without calling Redis. A disagreement returns an error wrapping
// [stream.ErrShardCount] that names both counts and the record's key.
func (g *Guard) Check(ctx context.Context, rdb redis.UniversalClient) error {
	if g.ok.Load() {
		return nil
	}
	l := g.layout
	home := l.Shard(0)
	if l.Shards() > 1 {
		home, _ = stream.NewKeys(l.Prefix(), l.Queue(), 0, 1)
	}
	n, err := scripts.Meta.Run(ctx, rdb, []string{l.Meta(), home.Main().Delayed, home.Main().Stream}, l.Shards()).Int64()
	if err != nil {
		return fmt.Errorf("queue %s: reading its shard count (%s): %w", l.Queue(), l.Meta(), err)
	}
	switch {
	case n < 0:
		return fmt.Errorf("%w: queue %s: %s field shards holds no count; this %s has %d shards",
			stream.ErrShardCount, l.Queue(), l.Meta(), g.what, l.Shards())
	case int(n) != l.Shards():
		return fmt.Errorf("%w: queue %s has %d shard(s) (recorded in %s); this %s was built with %d: "+
			"see \"Sharded queues\" in the README to change a queue's shard count",
			stream.ErrShardCount, l.Queue(), n, l.Meta(), g.what, l.Shards())
	}
	g.ok.Store(true)
	return nil
}
