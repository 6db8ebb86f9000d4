package group

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/delaystream/delaystream/internal/heal"
	"github.com/delaystream/delaystream/internal/shardsub"
	"github.com/redis/go-redis/v9"
)

// Read affinity, for sharded queues.
//
// Every consumer of a group hears every shard's announcements. If each read
// an announced shard at once, one would find the new entries and the
// others nothing: with C consumers a trickle would cost C reads per
// message. So each shard has an owner among the group's live consumers
// (they split the shards evenly, by name). The owner reads an
// announced shard at once; the others read it strayDelay later, in one
// round for every shard announced meanwhile. If the owner is alive and has
// room, it took the entries and that round finds nothing; if it died, is
// stuck or is full, the others take them then (and go on reading a stream
// while its reads come back full).
//
// The live consumers are those subscribed to their presence channel
// (stream.Keys.Presence, in shard 0's slot), which each keeps on a
// connection of its own (so that a user whose ACL lacks the channel loses
// only the split, not shard 0's announcements): no registry, no beats, and
// a consumer whose process dies leaves at once, with its connection.
// Each consumer lists them with one PUBSUB SHARDCHANNELS per membersEvery;
// until its first list (or while listing fails, e.g. on a server without
// shard channels), it owns every shard: it reads every announcement at
// once, as an unsharded queue's consumers do.
const (
	strayDelay   = 100 * time.Millisecond
	membersEvery = arrivalsPoll
)

// affinity is the shards this consumer owns. Its methods are safe for
// concurrent use.
type affinity struct {
	owned atomic.Pointer[[]bool] // by shard; nil: every shard (not known yet)
}

// owns reports whether this consumer reads announcements of shard at once.
func (f *affinity) owns(shard int) bool {
	p := f.owned.Load()
	return p == nil || (*p)[shard]
}

// set stores the shards owned and returns those this consumer owns now
// and did not before.
func (f *affinity) set(owned []bool) (gained []int) {
	prev := f.owned.Swap(&owned)
	if prev == nil {
		return nil // it owned every shard
	}
	for i, o := range owned {
		if o && !(*prev)[i] {
			gained = append(gained, i)
		}
	}
	return gained
}

// ownedBy returns, for each of n shards, whether self owns it among self
// and others: with the names sorted, shard i goes to the i-th name modulo
// their number, so that each owns n/len or one more. (A split that moved
// fewer shards when a consumer joins or leaves would be uneven; moving is
// cheap here, since ownership only decides who reads first.)
func ownedBy(self string, others []string, n int) []bool {
	names := append([]string{self}, others...)
	slices.Sort(names)
	names = slices.Compact(names)
	me := slices.Index(names, self)
	owned := make([]bool, n)
	for i := range owned {
		owned[i] = i%len(names) == me
	}
	return owned
}

// follow keeps f to the group's live consumers, listing them every
// membersEvery until ctx ends. A shard this consumer gains is marked in a,
// in case an announcement went to its previous owner only. A failed list
// keeps the last split: a stray consumer's shards are still read, later.
func (rd *reader) follow(ctx context.Context, f *affinity, a *arrivals) {
	c := rd.r.c
	every := membersEvery
	if c.cfg.membersEvery > 0 {
		every = c.cfg.membersEvery
	}
	prefix := c.layout.Shard(0).PresencePrefix(c.group)
	pattern := c.layout.Shard(0).PresencePattern(c.group)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, opTimeout)
		chans, err := shardChannels(rctx, c.rdb, prefix, pattern)
		cancel()
		if err != nil {
			heal.After(c.rdb, err)
			continue
		}
		names := make([]string, 0, len(chans))
		for _, ch := range chans {
			if name, ok := strings.CutPrefix(ch, prefix); ok {
				names = append(names, strings.TrimSuffix(name, "}"))
			}
		}
		for _, sh := range f.set(ownedBy(c.cfg.consumer, names, len(c.shards))) {
			a.mark(2 * sh)
			a.mark(2*sh + 1)
		}
	}
}

// present keeps this consumer subscribed to its presence channel until ctx
// ends (on a queue of any shard count: operators list the live consumers
// by it).
func (rd *reader) present(ctx context.Context) error {
	c := rd.r.c
	return shardsub.Run(ctx, c.rdb, shardsub.Config{
		Groups: [][]string{{c.layout.Shard(0).Presence(c.group, c.cfg.consumer)}}, // nothing is published on it
		Health: unshardedPoll,
		Logger: rd.r.log,
	})
}

// shardChannels runs PUBSUB SHARDCHANNELS pattern on the node that holds
// key's slot (a Cluster client would send it to any node).
func shardChannels(ctx context.Context, rdb redis.UniversalClient, key, pattern string) ([]string, error) {
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		node, err := cc.MasterForKey(ctx, key)
		if err != nil {
			return nil, err
		}
		return node.PubSubShardChannels(ctx, pattern).Result()
	}
	return rdb.PubSubShardChannels(ctx, pattern).Result()
}
