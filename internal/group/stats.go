package group

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream/internal/scripts"
	"github.com/delaystream/delaystream/internal/stream"
)

// Stats are figures about one group of a queue and about the queue, read
// from Redis.
type Stats struct {
	Group         string
	Consumers     int64         // consumers known to the group on the queue stream
	Pending       int64         // delivered, not yet acknowledged (queue stream + retry lane)
	OldestPending time.Duration // time (Redis clock) since the oldest pending entry was appended to its stream, 0 when none
	Lag           int64         // queue stream entries not yet delivered to the group (-1 unknown)
	RetryWaiting  int64         // messages waiting in the retry lane for their backoff
	DeadLetters   int64         // entries in the dead-letter stream
	Queue         QueueStats
}

// QueueStats are queue-level figures shared by every group.
type QueueStats struct {
	Waiting      int64     // scheduled, not yet due or not yet promoted
	Overdue      int64     // waiting past their due time (a mover is late or absent)
	NextDue      time.Time // earliest waiting due time; zero when none
	StreamLength int64     // entries in the queue stream
}

// ReadStats reads the figures of group on queue without a Consumer. Only
// WithPrefix and WithShards among the options matter.
func ReadStats(ctx context.Context, rdb redis.UniversalClient, queue, group string, opts ...Option) (Stats, error) {
	layout, err := resolve(rdb, queue, group, opts)
	if err != nil {
		return Stats{}, err
	}
	return readStats(ctx, rdb, layout, group)
}

// ReadShardStats reads the figures of group on queue shard by shard,
// without a Consumer. Only WithPrefix and WithShards among the options
// matter.
func ReadShardStats(ctx context.Context, rdb redis.UniversalClient, queue, group string, opts ...Option) ([]Stats, error) {
	layout, err := resolve(rdb, queue, group, opts)
	if err != nil {
		return nil, err
	}
	return readShardStats(ctx, rdb, layout, group)
}

// readStats reads the figures of group on every shard of layout and adds
// them up: counts are summed, the oldest pending age is the largest, the
// next due time the earliest, Consumers the most any shard knows; Lag is
// -1 when any shard's is unknown.
func readStats(ctx context.Context, rdb redis.UniversalClient, layout *stream.Layout, group string) (Stats, error) {
	per, err := readShardStats(ctx, rdb, layout, group)
	if err != nil {
		return Stats{Group: group, Lag: -1}, err
	}
	if len(per) == 1 {
		return per[0], nil
	}
	st := Stats{Group: group}
	for _, p := range per {
		st.Consumers = max(st.Consumers, p.Consumers)
		st.Pending += p.Pending
		st.OldestPending = max(st.OldestPending, p.OldestPending)
		if st.Lag >= 0 && p.Lag >= 0 {
			st.Lag += p.Lag
		} else {
			st.Lag = -1
		}
		st.RetryWaiting += p.RetryWaiting
		st.DeadLetters += p.DeadLetters
		st.Queue.Waiting += p.Queue.Waiting
		st.Queue.Overdue += p.Queue.Overdue
		st.Queue.StreamLength += p.Queue.StreamLength
		if !p.Queue.NextDue.IsZero() && (st.Queue.NextDue.IsZero() || p.Queue.NextDue.Before(st.Queue.NextDue)) {
			st.Queue.NextDue = p.Queue.NextDue
		}
	}
	return st, nil
}

// readShardStats reads the figures of group on each shard of layout.
func readShardStats(ctx context.Context, rdb redis.UniversalClient, layout *stream.Layout, group string) ([]Stats, error) {
	out := make([]Stats, layout.Shards())
	for i := range out {
		st, err := readShard(ctx, rdb, layout.Shard(i), group)
		if err != nil {
			if e := explainShard(ctx, rdb, err, layout.Shard(i), group); e != err {
				err = fmt.Errorf("stats %s: %w", group, e) // a key of the wrong type, named
			}
			if layout.Shards() > 1 {
				err = fmt.Errorf("shard %d: %w", i, err)
			}
			return nil, err
		}
		out[i] = st
	}
	return out, nil
}

// readShard reads the figures of group under keys (one shard).
func readShard(ctx context.Context, rdb redis.UniversalClient, keys stream.Keys, group string) (Stats, error) {
	st := Stats{Group: group, Lag: -1}
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		return st, fmt.Errorf("stats %s: %w", group, err)
	}
	main, retry := keys.Main(), keys.Retry(group)
	for _, s := range []string{main.Stream, retry.Stream} {
		if err := streamFigures(ctx, rdb, s, s == main.Stream, group, now, &st); err != nil {
			return st, fmt.Errorf("stats %s: %w", group, err)
		}
	}
	if st.RetryWaiting, err = rdb.ZCard(ctx, retry.Delayed).Result(); err != nil {
		return st, fmt.Errorf("stats %s: %w", group, err)
	}
	if st.DeadLetters, err = rdb.XLen(ctx, keys.DeadLetters(group)).Result(); err != nil {
		return st, fmt.Errorf("stats %s: %w", group, err)
	}
	if st.Queue, err = queueFigures(ctx, rdb, main.Delayed, st.Queue.StreamLength); err != nil {
		return st, fmt.Errorf("stats %s: queue figures: %w", group, err)
	}
	return st, nil
}

// streamFigures adds the group's figures on stream key s (the queue's
// stream when main, else the group's retry lane) to st: pending entries and
// the oldest one's age by the Redis clock now; consumers, lag and the
// stream's length from the queue's stream.
func streamFigures(ctx context.Context, rdb redis.UniversalClient, s string, main bool, group string, now time.Time, st *Stats) error {
	info, err := stream.ReadInfo(ctx, rdb, s)
	if err != nil {
		return err
	}
	if main {
		st.Queue.StreamLength = info.Length
	}
	for _, g := range info.Groups {
		if g.Name != group {
			continue
		}
		st.Pending += g.Pending
		if main {
			st.Consumers, st.Lag = g.Consumers, g.Lag
		}
		if g.Pending == 0 {
			continue
		}
		p, err := rdb.XPending(ctx, s, group).Result()
		if err != nil {
			return fmt.Errorf("xpending %s: %w", s, err)
		}
		if t := stream.EntryTime(p.Lower); !t.IsZero() {
			st.OldestPending = max(st.OldestPending, now.Sub(t))
		}
	}
	return nil
}

// queueFigures reads the waiting messages' figures of the delayed set key
// (stats.lua), keeping the stream length already read.
func queueFigures(ctx context.Context, rdb redis.UniversalClient, key string, streamLen int64) (QueueStats, error) {
	qs := QueueStats{StreamLength: streamLen}
	reply, err := scripts.Stats.Run(ctx, rdb, []string{key}).Result()
	var q []int64
	if err == nil {
		q, err = scripts.Ints(reply)
	}
	if err == nil && len(q) != 4 {
		err = fmt.Errorf("delaystream: stats script returned %d values", len(q))
	}
	if err != nil {
		return qs, err
	}
	qs.Waiting, qs.Overdue = q[0], q[1]
	if q[2] >= 0 {
		qs.NextDue = time.UnixMilli(q[2])
	}
	return qs, nil
}
