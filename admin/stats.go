package admin

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/internal/delay"
	"github.com/delaystream/delaystream/internal/flow"
	"github.com/delaystream/delaystream/internal/group"
	"github.com/delaystream/delaystream/internal/stream"
)

// QueueReport are the figures of one queue, of each of its consumer
// groups and of each of its shards.
type QueueReport struct {
	Queue        string    `json:"queue"`
	Shards       int       `json:"shards"`
	Now          time.Time `json:"now"`               // the Redis clock when read (the latest of the shards')
	Waiting      int64     `json:"waiting"`           // scheduled, not yet promoted
	Overdue      int64     `json:"overdue"`           // waiting past their due time: a mover is late or absent
	NextDue      time.Time `json:"next_due,omitzero"` // earliest waiting due time; absent when none
	StreamLength int64     `json:"stream_length"`     // entries in the queue stream(s)
	Quarantined  int64     `json:"quarantined"`       // entries in the quarantine stream(s) of the main lanes
	// PausedSince is when the queue's promotion was paused (Redis clock);
	// absent when it is not. A pause of some shards only (one under way,
	// or one that failed part way) counts.
	PausedSince time.Time     `json:"paused_since,omitzero"`
	Groups      []GroupReport `json:"groups"`    // every consumer group, by name, summed over the shards
	Recurring   int64         `json:"recurring"` // recurring schedules defined
	// Evicting are the Redis servers whose maxmemory-policy can evict the
	// queue's keys (the same for every queue of the Operator's client);
	// absent when none, or when their settings cannot be read.
	Evicting []delaystream.RedisMemory `json:"evicting,omitempty"`
	// PerShard are the same figures shard by shard, in shard order.
	PerShard []ShardReport `json:"per_shard,omitempty"`
}

// OverdueBy returns how long the earliest waiting message has been due
// when it is overdue, else 0.
func (r QueueReport) OverdueBy() time.Duration {
	if r.Overdue == 0 || r.NextDue.IsZero() || !r.NextDue.Before(r.Now) {
		return 0
	}
	return r.Now.Sub(r.NextDue)
}

// ShardReport are the figures of one shard of a queue.
type ShardReport struct {
	Shard        int           `json:"shard"`
	Tag          string        `json:"tag"` // the shard's hash tag
	Now          time.Time     `json:"now"`
	Waiting      int64         `json:"waiting"`
	Overdue      int64         `json:"overdue"`
	NextDue      time.Time     `json:"next_due,omitzero"`
	StreamLength int64         `json:"stream_length"`
	Quarantined  int64         `json:"quarantined"`
	Groups       []GroupReport `json:"groups"`
}

// GroupReport are the figures of one consumer group, of a queue or of one
// shard of it.
type GroupReport struct {
	Group     string `json:"group"`
	Consumers int64  `json:"consumers"` // consumers known to the group (the most of any shard)
	Pending   int64  `json:"pending"`   // delivered, not acknowledged (queue stream + retry lane)
	// OldestPendingEntryAgeMs is the age in ms (Redis clock) of the
	// oldest pending entry (delivered, not acknowledged), 0 when none:
	// the time since it was appended to its stream, so the time it
	// waited to be read plus the time it has been held since. It is not
	// the time since it was delivered: Redis keeps none that lasts (an
	// entry's idle time restarts at every delivery and every extension of
	// its hold). A value that keeps growing is an entry stuck in flight (a
	// handler that does not return, a consumer that crashed).
	OldestPendingEntryAgeMs int64 `json:"oldest_pending_entry_age_ms"`
	Lag                     int64 `json:"lag"`           // stream entries not yet delivered to the group; -1 when Redis cannot tell
	RetryWaiting            int64 `json:"retry_waiting"` // failed messages waiting in the group's retry lane
	DeadLetters             int64 `json:"dead_letters"`  // entries in the group's dead letters
	// PausedSince is when the group was paused (Redis clock); absent when
	// it is not. Per-shard reports leave it out.
	PausedSince time.Time `json:"paused_since,omitzero"`
	// The group's flow limits, as its consumer started last recorded them
	// (absent when none; per-shard reports leave them out): the
	// concurrency cap, the rate in messages per second and its burst, and
	// the concurrency slots its live consumers hold now, and how long its
	// consumers waited for them in all (ms, summed over consumers).
	ConcurrencyLimit int     `json:"concurrency_limit,omitempty"`
	RatePerSecond    float64 `json:"rate_per_second,omitempty"`
	RateBurst        int     `json:"rate_burst,omitempty"`
	SlotsHeld        int64   `json:"slots_held,omitempty"`
	LimitWaitMs      int64   `json:"limit_wait_ms,omitempty"`
	// ConsumerList is filled in by [Operator.Groups] only.
	ConsumerList []ConsumerInfo `json:"consumer_list,omitempty"`
	// Foreign marks a consumer group whose name delaystream cannot use
	// (one made on the queue's stream by other means, with a space or a
	// brace in its name, say): it is reported with the figures Redis
	// keeps of it (consumers, pending, lag) and no others, and no action
	// of this package takes it (they refuse its name with an error
	// wrapping delaystream.ErrInvalidName).
	Foreign bool `json:"foreign,omitempty"`
}

// ConsumerInfo describes one consumer of a group (XINFO CONSUMERS, summed
// over the shards and the retry lane).
type ConsumerInfo struct {
	Name    string `json:"name"`
	Pending int64  `json:"pending"` // entries it holds unacknowledged
	IdleMs  int64  `json:"idle_ms"` // since its last attempted interaction (the least of any stream)
	// Live is whether its process runs: a running consumer stays
	// subscribed to a presence channel of its own, which its process's
	// exit closes. One that is gone keeps its name until stale consumers
	// are deleted; its pending entries are taken over after the
	// visibility timeout. Where the channels cannot be listed (an ACL
	// without PUBSUB), a consumer is live when it interacted within
	// [LiveWithin].
	Live bool `json:"live"`
}

// LiveWithin is how recently a consumer must have interacted with its
// group to count as live when presence channels cannot be listed
// ([ConsumerInfo].Live).
const LiveWithin = time.Minute

// Stats reads the figures of the named queues, in the order given, or of
// every queue under the prefix (see [Operator.Queues]) when none is
// named, by name, with the servers that can evict its keys (see
// [Operator.Memory]). A queue whose figures cannot be read fails the call;
// see [Operator.Queues] for the errors of a name. Figures read from
// several keys or shards are not one atomic snapshot.
func (in *Operator) Stats(ctx context.Context, queues ...string) ([]QueueReport, error) {
	if len(queues) == 0 {
		qs, err := in.Queues(ctx)
		if err != nil {
			return nil, err
		}
		for _, q := range qs {
			queues = append(queues, q.Name)
		}
	}
	out := make([]QueueReport, 0, len(queues))
	evicting := in.evicting(ctx)
	for _, q := range queues {
		h, err := in.open(ctx, q)
		if err != nil {
			return nil, err
		}
		r, err := in.stats(ctx, h)
		if err != nil {
			return nil, err
		}
		r.Evicting = evicting
		out = append(out, r)
	}
	return out, nil
}

// Groups returns the figures of every consumer group of queue, by name,
// each with its consumers (ConsumerList).
func (in *Operator) Groups(ctx context.Context, queue string) ([]GroupReport, error) {
	h, err := in.open(ctx, queue)
	if err != nil {
		return nil, err
	}
	r, err := in.stats(ctx, h)
	if err != nil {
		return nil, err
	}
	for i := range r.Groups {
		if r.Groups[i].ConsumerList, err = in.consumers(ctx, h, r.Groups[i].Group); err != nil {
			return nil, err
		}
	}
	return r.Groups, nil
}

// stats reads the figures of h: the waiting set's per shard, the streams'
// lengths, then every group's.
func (in *Operator) stats(ctx context.Context, h *handle) (QueueReport, error) {
	per, err := h.producer.ShardStats(ctx)
	if err != nil {
		return QueueReport{}, err
	}
	shards, err := in.shardReports(ctx, h, per)
	if err != nil {
		return QueueReport{}, err
	}
	r := QueueReport{Queue: h.info.Name, Shards: len(shards), Groups: []GroupReport{}, PerShard: shards}
	for _, s := range shards {
		r.Waiting += s.Waiting
		r.Overdue += s.Overdue
		r.StreamLength += s.StreamLength
		r.Quarantined += s.Quarantined
		if s.Now.After(r.Now) {
			r.Now = s.Now
		}
		if !s.NextDue.IsZero() && (r.NextDue.IsZero() || s.NextDue.Before(r.NextDue)) {
			r.NextDue = s.NextDue
		}
	}
	if r.Recurring, err = in.rdb.HLen(ctx, h.layout.Recurring()).Result(); err != nil {
		return QueueReport{}, fmt.Errorf("stats %s: recurring schedules: %w", h.info.Name, err)
	}
	if r.PausedSince, _, err = flow.QueueSince(ctx, in.rdb, h.layout); err != nil {
		return QueueReport{}, err
	}
	infos, err := in.groupInfos(ctx, h)
	if err != nil {
		return QueueReport{}, err
	}
	for _, g := range namesOf(infos) {
		if stream.ValidateName("group", g) != nil {
			r.Groups = append(r.Groups, foreignGroup(g, infos, shards))
			continue
		}
		gs, err := group.ReadShardStats(ctx, in.rdb, h.info.Name, g, in.groupOpts(h)...)
		if err != nil {
			return QueueReport{}, fmt.Errorf("stats %s group %s: %w", h.info.Name, g, err)
		}
		sum := sumGroup(g, gs, shards)
		if err := in.flowState(ctx, h, &sum); err != nil {
			return QueueReport{}, err
		}
		r.Groups = append(r.Groups, sum)
	}
	return r, nil
}

// shardReports returns the figures of every shard of h but its groups':
// per, the waiting set's, and the lengths of the queue and quarantine
// streams, read in one pipeline.
func (in *Operator) shardReports(ctx context.Context, h *handle, per []delay.Stats) ([]ShardReport, error) {
	n := h.layout.Shards()
	pipe := in.rdb.Pipeline()
	lens := make([]*redis.IntCmd, n)
	quar := make([]*redis.IntCmd, n)
	for i := range n {
		main := h.layout.Shard(i).Main()
		lens[i] = pipe.XLen(ctx, main.Stream)
		quar[i] = pipe.XLen(ctx, main.Quarantine)
	}
	if _, err := pipe.Exec(ctx); err != nil && !isNil(err) {
		return nil, fmt.Errorf("stats %s: %w", h.info.Name, err)
	}
	shards := make([]ShardReport, n)
	for i, p := range per {
		shards[i] = ShardReport{Shard: i, Tag: h.layout.Shard(i).Tag(), Now: p.Now, Waiting: p.Waiting,
			Overdue: p.Overdue, NextDue: p.NextDue, StreamLength: lens[i].Val(), Quarantined: quar[i].Val(),
			Groups: []GroupReport{}}
	}
	return shards, nil
}

// sumGroup adds the figures gs of group g, one per shard, to those shards'
// reports and returns their sum: counts are summed, Consumers and the
// oldest pending age are the most of any shard, Lag is -1 when any
// shard's is unknown.
func sumGroup(g string, gs []group.Stats, shards []ShardReport) GroupReport {
	sum := GroupReport{Group: g}
	for i, s := range gs {
		one := GroupReport{Group: s.Group, Consumers: s.Consumers, Pending: s.Pending,
			OldestPendingEntryAgeMs: s.OldestPending.Milliseconds(), Lag: s.Lag, RetryWaiting: s.RetryWaiting,
			DeadLetters: s.DeadLetters}
		shards[i].Groups = append(shards[i].Groups, one)
		sum.Consumers = max(sum.Consumers, one.Consumers)
		sum.Pending += one.Pending
		sum.OldestPendingEntryAgeMs = max(sum.OldestPendingEntryAgeMs, one.OldestPendingEntryAgeMs)
		if i == 0 || (sum.Lag >= 0 && one.Lag >= 0) {
			sum.Lag += one.Lag
		} else {
			sum.Lag = -1
		}
		sum.RetryWaiting += one.RetryWaiting
		sum.DeadLetters += one.DeadLetters
	}
	return sum
}

// foreignGroup returns the figures of group g, whose name delaystream
// cannot use (created outside it, say with a space): those XINFO GROUPS
// gave in infos, one per shard, added to the shards' reports as sumGroup
// does; it has no retry lane, dead letters or flow state of delaystream's.
func foreignGroup(g string, infos [][]stream.GroupInfo, shards []ShardReport) GroupReport {
	sum := GroupReport{Group: g, Foreign: true}
	for i, gs := range infos {
		for _, gi := range gs {
			if gi.Name != g {
				continue
			}
			shards[i].Groups = append(shards[i].Groups, GroupReport{Group: g, Foreign: true, Consumers: gi.Consumers,
				Pending: gi.Pending, Lag: gi.Lag})
			sum.Consumers = max(sum.Consumers, gi.Consumers)
			sum.Pending += gi.Pending
			if sum.Lag >= 0 && gi.Lag >= 0 {
				sum.Lag += gi.Lag
			} else {
				sum.Lag = -1
			}
		}
	}
	return sum
}

// consumers lists the consumers of group g over every shard's queue
// stream and retry lane, by name. A group whose name delaystream cannot
// use (see [GroupReport.Foreign]) has no retry lane nor presence channels:
// only the queue streams are read, and its consumers are live by their
// idle time.
func (in *Operator) consumers(ctx context.Context, h *handle, g string) ([]ConsumerInfo, error) {
	foreign := stream.ValidateName("group", g) != nil
	byName := map[string]*ConsumerInfo{}
	for i := range h.layout.Shards() {
		k := h.layout.Shard(i)
		streams := []string{k.Main().Stream}
		if !foreign {
			streams = append(streams, k.Retry(g).Stream)
		}
		for _, s := range streams {
			cs, err := in.rdb.XInfoConsumers(ctx, s, g).Result()
			if err != nil {
				// A lane not made yet: "ERR no such key" (HasErrorPrefix
				// drops the "ERR ").
				if isNil(err) || redis.HasErrorPrefix(err, "NOGROUP") || redis.HasErrorPrefix(err, "no such key") {
					continue
				}
				return nil, fmt.Errorf("consumers of %s/%s: %w", h.info.Name, g, err)
			}
			for _, c := range cs {
				ci := byName[c.Name]
				if ci == nil {
					ci = &ConsumerInfo{Name: c.Name, IdleMs: c.Idle.Milliseconds()}
					byName[c.Name] = ci
				}
				ci.Pending += c.Pending
				ci.IdleMs = min(ci.IdleMs, c.Idle.Milliseconds())
			}
		}
	}
	var live map[string]bool
	known := false
	if !foreign {
		live, known = in.present(ctx, h, g)
	}
	out := make([]ConsumerInfo, 0, len(byName))
	for _, c := range byName {
		c.Live = live[c.Name]
		if !known {
			c.Live = time.Duration(c.IdleMs)*time.Millisecond < in.liveWithin
		}
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b ConsumerInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// present returns the consumers of group g subscribed to their presence
// channel (PUBSUB SHARDCHANNELS on the node of shard 0's slot), and
// whether they could be listed.
func (in *Operator) present(ctx context.Context, h *handle, g string) (map[string]bool, bool) {
	k := h.layout.Shard(0)
	pattern, prefix := k.PresencePattern(g), k.PresencePrefix(g)
	var chans []string
	var err error
	if c, ok := in.rdb.(*redis.ClusterClient); ok {
		var node *redis.Client
		if node, err = c.MasterForKey(ctx, k.Main().Stream); err == nil {
			chans, err = node.PubSubShardChannels(ctx, pattern).Result()
		}
	} else {
		chans, err = in.rdb.PubSubShardChannels(ctx, pattern).Result()
	}
	if err != nil {
		return nil, false
	}
	live := make(map[string]bool, len(chans))
	for _, ch := range chans {
		if name, ok := strings.CutPrefix(ch, prefix); ok {
			live[strings.TrimSuffix(name, "}")] = true
		}
	}
	return live, true
}
