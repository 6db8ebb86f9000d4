package shards

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream/internal/memory"
	"github.com/delaystream/delaystream/internal/reach"
	"github.com/delaystream/delaystream/internal/scripts"
	"github.com/delaystream/delaystream/internal/stream"
)

// Guard checks, once per part, that the shard count a part was built with
// is the one recorded for its queue, recording it when the queue is first
// used. Its methods are safe for concurrent use.
type Guard struct {
	layout *stream.Layout
	what   string // the part, for errors: "producer", "mover", "consumer"
	ok     atomic.Bool

	mu     sync.Mutex
	epoch  string // the record's epoch at the last check; "" before one
	evicts string // what the record's server said about eviction at the last loss found
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
	_, err := g.run(ctx, rdb)
	return err
}

// Verify checks the record again, like a first Check, and reports whether
// its epoch changed since the previous check (the record was gone and is
// now recreated, or was recreated by another part): Redis lost the queue's
// data meanwhile. The new epoch is remembered, so one loss is reported
// once.
func (g *Guard) Verify(ctx context.Context, rdb redis.UniversalClient) (lost bool, err error) {
	g.mu.Lock()
	before := g.epoch
	g.mu.Unlock()
	epoch, err := g.run(ctx, rdb)
	if err != nil {
		return false, err
	}
	lost = before != "" && epoch != "" && epoch != before
	if lost {
		ev := evictions(ctx, rdb, g.layout.Meta())
		g.mu.Lock()
		g.evicts = ev
		g.mu.Unlock()
	}
	return lost, nil
}

// LostError returns the error a part reports when Verify found the queue's
// data lost; when says when the part noticed (e.g. "within the last 30s").
// When the record's server evicts keys (it had evicted some, or its
// maxmemory-policy may), eviction is named as the first cause.
func (g *Guard) LostError(when string) error {
	g.mu.Lock()
	ev := g.evicts
	g.mu.Unlock()
	causes := "Redis restarted without persistence, FLUSHALL, or a failover to a replica that had none of it"
	if ev != "" {
		causes = ev + "; or " + causes
	}
	return fmt.Errorf("%w: queue %s: its record %s was gone or recreated %s; "+
		"messages waiting or pending before may be lost (%s)", stream.ErrDataLost, g.layout.Queue(), g.layout.Meta(), when, causes)
}

// evictions asks the server of key (INFO stats and memory) whether it
// evicts keys, and returns the cause to name first for a loss of data: ""
// when it evicts nothing; when INFO fails (twice), eviction is named as
// possible with the failure.
func evictions(ctx context.Context, rdb redis.UniversalClient, key string) string {
	var c redis.Cmdable = rdb
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		m, err := cc.MasterForKey(ctx, key)
		if err != nil {
			return ""
		}
		c = m
	}
	info, err := c.Info(ctx, "stats", "memory").Result()
	if err != nil { // once more: a loss is reported once, with what is known then
		info, err = c.Info(ctx, "stats", "memory").Result()
	}
	if err != nil {
		return fmt.Sprintf("eviction, if the server evicts keys (reading INFO failed: %v)", err)
	}
	s := memory.Parse(info)
	var evicted int64
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "evicted_keys:"); ok {
			evicted, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	switch {
	case evicted > 0:
		return fmt.Sprintf("eviction: the server has evicted %d keys since its start (maxmemory-policy %s); set maxmemory-policy noeviction",
			evicted, s.Policy)
	case s.Evicts():
		return fmt.Sprintf("eviction: the server may evict keys (maxmemory %s, maxmemory-policy %s); set maxmemory-policy noeviction",
			memory.Bytes(s.Max), s.Policy)
	}
	return ""
}

// run runs meta.lua and returns the record's epoch.
func (g *Guard) run(ctx context.Context, rdb redis.UniversalClient) (string, error) {
	l := g.layout
	home := l.Shard(0)
	if l.Shards() > 1 {
		home, _ = stream.NewKeys(l.Prefix(), l.Queue(), 0, 1)
	}
	var tok [12]byte
	_, _ = rand.Read(tok[:])
	reply, err := scripts.Meta.Run(ctx, rdb, []string{l.Meta(), home.Main().Delayed, home.Main().Stream},
		l.Shards(), hex.EncodeToString(tok[:])).Slice()
	if err != nil {
		err = stream.ExplainWrongType(ctx, rdb, memory.Explain(ctx, rdb, scripts.Explain(err)), stream.KeyType{Key: l.Meta(), Want: "hash"},
			stream.KeyType{Key: home.Main().Delayed, Want: "zset"}, stream.KeyType{Key: home.Main().Stream, Want: "stream"})
		err = reach.Explain(ctx, rdb, err, l.Meta())
		return "", fmt.Errorf("queue %s: reading its shard count (%s): %w", l.Queue(), l.Meta(), err)
	}
	var n int64
	var epoch string
	if len(reply) == 2 {
		n, _ = reply[0].(int64)
		epoch, _ = reply[1].(string)
	} else {
		n = -1
	}
	switch {
	case n < 0:
		return "", fmt.Errorf("%w: queue %s: %s field shards holds no count; this %s has %d shards",
			stream.ErrShardCount, l.Queue(), l.Meta(), g.what, l.Shards())
	case int(n) != l.Shards():
		return "", fmt.Errorf("%w: queue %s has %d shard(s) (recorded in %s); this %s was built with %d: "+
			"docs/sharding.md (\"The shard count is part of the queue\") says how to change a queue's shard count",
			stream.ErrShardCount, l.Queue(), n, l.Meta(), g.what, l.Shards())
	}
	if epoch != "" {
		g.mu.Lock()
		g.epoch = epoch
		g.mu.Unlock()
	}
	g.ok.Store(true)
	return epoch, nil
}
