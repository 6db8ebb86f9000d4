package recur

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream/internal/wire"
)

// Status is a schedule as [Store.Status] reports it.
type Status struct {
	ID       string
	Def      Def
	Spec     Spec // nil when this process cannot compute the spec's kind
	Revision int64
	Paused   bool
	Next     time.Time // the next occurrence; zero when paused or none
	Last     time.Time // the latest occurrence due so far; zero when none
	// LastFired is when Last was appended to the queue's stream (Redis
	// clock); zero when not found (not yet promoted, or trimmed).
	LastFired time.Time
}

// Count returns how many schedules are defined.
func (s *Store) Count(ctx context.Context) (int64, error) {
	return s.rdb.HLen(ctx, s.layout.Recurring()).Result()
}

// IDs returns the ids of every defined schedule, sorted.
func (s *Store) IDs(ctx context.Context) ([]string, error) {
	var ids []string
	var cursor uint64
	for {
		// HSCAN NOVALUES needs Redis 7.4: the values are read and dropped.
		kv, next, err := s.rdb.HScan(ctx, s.layout.Recurring(), cursor, "*", 100).Result()
		if err != nil {
			return nil, fmt.Errorf("schedules: %w", err)
		}
		for i := 0; i+1 < len(kv); i += 2 {
			ids = append(ids, kv[i])
		}
		if cursor = next; cursor == 0 {
			sort.Strings(ids)
			return ids, nil
		}
	}
}

// ErrNotFound is returned by Status for a schedule that is not defined.
var ErrNotFound = errors.New("schedule not defined")

// Status reports schedule sid: its definition, revision, state, next and
// last occurrence and when the last was appended to the stream.
func (s *Store) Status(ctx context.Context, sid string) (Status, error) {
	body, p, ok, now, err := s.read(ctx, sid)
	if err != nil {
		return Status{}, err
	}
	if body == "" || !ok || p.state == stateDeleted {
		return Status{}, fmt.Errorf("schedule %s: %w", sid, ErrNotFound)
	}
	d, err := parseDef(body)
	if err != nil {
		return Status{}, fmt.Errorf("schedule %s: %w", sid, err)
	}
	st := Status{ID: sid, Def: d, Revision: p.rev, Paused: p.state == statePaused}
	if parse, ok := s.cfg.Parsers[d.Kind]; ok {
		st.Spec, _ = parse(d.Spec)
	}
	recs, err := s.shardRecords(ctx, sid)
	if err != nil {
		return Status{}, err
	}
	last, lastShard, next := lastAndNext(recs, p.rev, now)
	if next == 0 && st.Spec != nil && p.state == stateActive {
		next = st.Spec.Next(time.UnixMilli(max(now, p.through))).UnixMilli()
	}
	if st.Paused {
		next = 0
	}
	st.Next, st.Last = msTime(next), msTime(last)
	if last != 0 {
		st.LastFired = s.fired(ctx, lastShard, sid, last)
	}
	return st, nil
}

func msTime(ms int64) time.Time {
	if ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

func (s *Store) shardRecords(ctx context.Context, sid string) ([]shardRecord, error) {
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.StringCmd, s.layout.Shards())
	for i := range cmds {
		cmds[i] = pipe.HGet(ctx, s.layout.Shard(i).Occurrences(), sid)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("schedule %s: occurrence records: %w", sid, err)
	}
	out := make([]shardRecord, len(cmds)) // index: shard; zero when none
	for i, c := range cmds {
		out[i], _ = parseShardRecord(c.Val())
	}
	return out, nil
}

// fired finds when the occurrence of sid at ms was appended to shard's
// stream, among the first [FiredScan] entries appended from ms; zero when
// not found (not yet promoted, trimmed, or behind other traffic).
func (s *Store) fired(ctx context.Context, shard int, sid string, ms int64) time.Time {
	prefix := sid + "@" + strconv.FormatInt(ms, 10) + "#"
	msgs, err := s.rdb.XRangeN(ctx, s.layout.Shard(shard).Main().Stream, strconv.FormatInt(ms, 10), "+", FiredScan).Result()
	if err != nil {
		return time.Time{}
	}
	for _, m := range msgs {
		if id, _ := m.Values[wire.FieldID].(string); strings.HasPrefix(id, prefix) {
			return wire.EntryTime(m.ID)
		}
	}
	return time.Time{}
}

// FiredScan is how many stream entries [Store.Status] reads to find when
// the last occurrence was appended.
const FiredScan = 20

// lastAndNext returns, from the shards' records, the latest occurrence
// due by now and its shard, and the earliest waiting occurrence of
// revision rev after now (0 when none).
func lastAndNext(recs []shardRecord, rev, now int64) (last int64, lastShard int, next int64) {
	for i, r := range recs {
		if r.fired > last {
			last, lastShard = r.fired, i
		}
		for _, w := range r.waiting {
			switch {
			case w <= now && w > last:
				last, lastShard = w, i
			case w > now && r.rev == rev && (next == 0 || w < next):
				next = w
			}
		}
	}
	return last, lastShard, next
}
