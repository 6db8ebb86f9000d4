package inspect

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream/internal/group"
	"github.com/delaystream/delaystream/internal/stream"
)

// StatsOptions selects what [Inspector.Stats] reads.
type StatsOptions struct {
	PerShard bool // also report every shard's figures (QueueStats.PerShard)
}

// QueueStats are the figures of one queue and of each of its groups.
type QueueStats struct {
	Queue        string       `json:"queue"`
	Shards       int          `json:"shards"`
	Now          time.Time    `json:"now"`               // the Redis clock when read (the latest of the shards')
	Waiting      int64        `json:"waiting"`           // scheduled, not yet promoted
	Overdue      int64        `json:"overdue"`           // waiting past their due time: a mover is late or absent
	NextDue      time.Time    `json:"next_due,omitzero"` // earliest waiting due time; absent when none
	StreamLength int64        `json:"stream_length"`     // entries in the queue stream(s)
	Quarantined  int64        `json:"quarantined"`       // entries in the quarantine stream(s) of the main lanes
	Groups       []GroupStats `json:"groups"`            // every consumer group, by name
	PerShard     []ShardStats `json:"per_shard,omitempty"`
}

// OverdueBy returns how long the earliest waiting message has been due, 0
// when none is.
func (s QueueStats) OverdueBy() time.Duration {
	if s.Overdue == 0 || s.NextDue.IsZero() || !s.NextDue.Before(s.Now) {
		return 0
	}
	return s.Now.Sub(s.NextDue)
}

// ShardStats are the figures of one shard of a queue.
type ShardStats struct {
	Shard        int          `json:"shard"`
	Tag          string       `json:"tag"` // the shard's hash tag
	Now          time.Time    `json:"now"`
	Waiting      int64        `json:"waiting"`
	Overdue      int64        `json:"overdue"`
	NextDue      time.Time    `json:"next_due,omitzero"`
	StreamLength int64        `json:"stream_length"`
	Quarantined  int64        `json:"quarantined"`
	Groups       []GroupStats `json:"groups"`
}

// GroupStats are the figures of one consumer group (of a queue, or of one
// shard of it).
type GroupStats struct {
	Group     string `json:"group"`
	Consumers int64  `json:"consumers"` // consumers known to the group (the most of any shard)
	Pending   int64  `json:"pending"`   // delivered, not acknowledged (queue stream + retry lane)
	// OldestPendingMs is the age (Redis clock) of the oldest pending entry
	// in ms, 0 when none; see OldestPending.
	OldestPendingMs int64 `json:"oldest_pending_ms"`
	Lag             int64 `json:"lag"`           // stream entries not yet delivered to the group; -1 when Redis cannot tell
	RetryWaiting    int64 `json:"retry_waiting"` // failed messages waiting in the group's retry lane
	DeadLetters     int64 `json:"dead_letters"`  // entries in the group's dead letters
	// ConsumerList is filled in by [Inspector.Groups] only.
	ConsumerList []ConsumerInfo `json:"consumer_list,omitempty"`
}

// OldestPending returns the age of the group's oldest pending entry.
func (g GroupStats) OldestPending() time.Duration {
	return time.Duration(g.OldestPendingMs) * time.Millisecond
}

// ConsumerInfo describes one consumer of a group (XINFO CONSUMERS, summed
// over the shards and the retry lane).
type ConsumerInfo struct {
	Name    string `json:"name"`
	Pending int64  `json:"pending"` // entries it holds unacknowledged
	IdleMs  int64  `json:"idle_ms"` // since its last attempted interaction (the least of any stream)
}

// Stats reads the figures of queue and of every group of it.
func (in *Inspector) Stats(ctx context.Context, queue string, opts StatsOptions) (QueueStats, error) {
	h, err := in.open(ctx, queue)
	if err != nil {
		return QueueStats{}, err
	}
	return in.stats(ctx, h, opts)
}

func (in *Inspector) stats(ctx context.Context, h *handle, opts StatsOptions) (QueueStats, error) {
	per, err := h.producer.ShardStats(ctx)
	if err != nil {
		return QueueStats{}, err
	}
	n := h.layout.Shards()
	shards := make([]ShardStats, n)
	pipe := in.rdb.Pipeline()
	lens := make([]*redis.IntCmd, n)
	quar := make([]*redis.IntCmd, n)
	for i := range n {
		main := h.layout.Shard(i).Main()
		lens[i] = pipe.XLen(ctx, main.Stream)
		quar[i] = pipe.XLen(ctx, main.Quarantine)
	}
	if _, err := pipe.Exec(ctx); err != nil && !isNil(err) {
		return QueueStats{}, fmt.Errorf("stats %s: %w", h.info.Name, err)
	}
	st := QueueStats{Queue: h.info.Name, Shards: n, Groups: []GroupStats{}}
	for i, p := range per {
		shards[i] = ShardStats{Shard: i, Tag: h.layout.Shard(i).Tag(), Now: p.Now, Waiting: p.Waiting,
			Overdue: p.Overdue, NextDue: p.NextDue, StreamLength: lens[i].Val(), Quarantined: quar[i].Val(),
			Groups: []GroupStats{}}
		st.Waiting += p.Waiting
		st.Overdue += p.Overdue
		st.StreamLength += shards[i].StreamLength
		st.Quarantined += shards[i].Quarantined
		if p.Now.After(st.Now) {
			st.Now = p.Now
		}
		if !p.NextDue.IsZero() && (st.NextDue.IsZero() || p.NextDue.Before(st.NextDue)) {
			st.NextDue = p.NextDue
		}
	}
	names, err := in.groupNames(ctx, h)
	if err != nil {
		return QueueStats{}, err
	}
	for _, g := range names {
		gs, err := group.ReadShardStats(ctx, in.rdb, h.info.Name, g, in.groupOpts(h)...)
		if err != nil {
			return QueueStats{}, fmt.Errorf("stats %s group %s: %w", h.info.Name, g, err)
		}
		sum := GroupStats{Group: g}
		for i, s := range gs {
			one := fromGroupStats(s)
			shards[i].Groups = append(shards[i].Groups, one)
			sum.Consumers = max(sum.Consumers, one.Consumers)
			sum.Pending += one.Pending
			sum.OldestPendingMs = max(sum.OldestPendingMs, one.OldestPendingMs)
			if i == 0 || (sum.Lag >= 0 && one.Lag >= 0) {
				sum.Lag += one.Lag
			} else {
				sum.Lag = -1
			}
			sum.RetryWaiting += one.RetryWaiting
			sum.DeadLetters += one.DeadLetters
		}
		st.Groups = append(st.Groups, sum)
	}
	if opts.PerShard {
		st.PerShard = shards
	}
	return st, nil
}

func fromGroupStats(s group.Stats) GroupStats {
	return GroupStats{Group: s.Group, Consumers: s.Consumers, Pending: s.Pending,
		OldestPendingMs: s.OldestPending.Milliseconds(), Lag: s.Lag, RetryWaiting: s.RetryWaiting,
		DeadLetters: s.DeadLetters}
}

// Overview reads the figures of every queue under the prefix (see
// [Inspector.Queues] and [Inspector.Stats]), by queue name. A queue whose
// figures cannot be read fails the call.
func (in *Inspector) Overview(ctx context.Context, opts StatsOptions) ([]QueueStats, error) {
	qs, err := in.Queues(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]QueueStats, 0, len(qs))
	for _, q := range qs {
		st, err := in.Stats(ctx, q.Name, opts)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

// Groups returns the figures of every consumer group of queue, by name,
// each with its consumers (ConsumerList).
func (in *Inspector) Groups(ctx context.Context, queue string) ([]GroupStats, error) {
	h, err := in.open(ctx, queue)
	if err != nil {
		return nil, err
	}
	st, err := in.stats(ctx, h, StatsOptions{})
	if err != nil {
		return nil, err
	}
	for i := range st.Groups {
		if st.Groups[i].ConsumerList, err = in.consumers(ctx, h, st.Groups[i].Group); err != nil {
			return nil, err
		}
	}
	return st.Groups, nil
}

// GroupNames returns the names of the consumer groups of queue, sorted.
func (in *Inspector) GroupNames(ctx context.Context, queue string) ([]string, error) {
	h, err := in.open(ctx, queue)
	if err != nil {
		return nil, err
	}
	return in.groupNames(ctx, h)
}

// groupNames returns the union of the groups of every shard's stream.
func (in *Inspector) groupNames(ctx context.Context, h *handle) ([]string, error) {
	var names []string
	for i := range h.layout.Shards() {
		info, err := stream.ReadInfo(ctx, in.rdb, h.layout.Shard(i).Main().Stream)
		if err != nil {
			return nil, fmt.Errorf("groups of %s: %w", h.info.Name, err)
		}
		for _, g := range info.Groups {
			names = append(names, g.Name)
		}
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// consumers lists the consumers of group over every shard's queue stream
// and retry lane.
func (in *Inspector) consumers(ctx context.Context, h *handle, g string) ([]ConsumerInfo, error) {
	byName := map[string]*ConsumerInfo{}
	for i := range h.layout.Shards() {
		k := h.layout.Shard(i)
		for _, s := range []string{k.Main().Stream, k.Retry(g).Stream} {
			cs, err := in.rdb.XInfoConsumers(ctx, s, g).Result()
			if err != nil {
				if isNil(err) || redis.HasErrorPrefix(err, "NOGROUP") || redis.HasErrorPrefix(err, "ERR no such key") {
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
	out := make([]ConsumerInfo, 0, len(byName))
	for _, c := range byName {
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b ConsumerInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func isNil(err error) bool { return errors.Is(err, redis.Nil) }
