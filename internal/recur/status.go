package recur

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
	// clock), as recorded or found in the stream; zero when unknown.
	LastFired time.Time
	// LastWritten is when Last was written to the queue (Redis clock);
	// zero when unknown (written by a version that did not record it).
	LastWritten time.Time
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

// ListedIDs returns, sorted, the ids of the schedules whose progress
// record says active or paused: those [Store.Status] can report (one whose
// definition has gone meanwhile it reports not found). It reads the
// progress records only (HSCAN, a few dozen bytes each), never the
// definitions, which carry the occurrences' payloads: what a listing that
// shows a page of schedules reads to find them.
func (s *Store) ListedIDs(ctx context.Context) ([]string, error) {
	var ids []string
	var cursor uint64
	for {
		kv, next, err := s.rdb.HScan(ctx, s.layout.RecurringProgress(), cursor, "*", 500).Result()
		if err != nil {
			return nil, fmt.Errorf("schedules: %w", err)
		}
		for i := 0; i+1 < len(kv); i += 2 {
			if p, ok := parseProgress(kv[i+1]); ok && (p.state == stateActive || p.state == statePaused) {
				ids = append(ids, kv[i])
			}
		}
		if cursor = next; cursor == 0 {
			sort.Strings(ids)
			return slices.Compact(ids), nil // HSCAN may return a field twice
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
		st.LastWritten, st.LastFired = s.times(ctx, recs[lastShard], lastShard, sid, last)
	}
	return st, nil
}

// The fields of a shard's occurrence records that hold, besides schedule
// sid's record, when its occurrences were written (kept by recur_add.lua)
// and when the latest recorded as appended was (see
// [stream.Keys.Occurrences]).
func writtenField(sid string) string  { return sid + "\x1fw" }
func appendedField(sid string) string { return sid + "\x1fa" }

// times returns when schedule sid's occurrence at ms was written to shard
// (of record r) and appended to its stream, zero when unknown: from the
// record, and the appended time, when the record has none for ms, from
// the stream (see [Store.fired]). A status read writes nothing: a
// read-only Redis user may make it.
func (s *Store) times(ctx context.Context, r shardRecord, shard int, sid string, ms int64) (written, appended time.Time) {
	written = msTime(writtenAt(r.runs, ms))
	if occ, at, ok := parseAppended(r.appended); ok && occ == ms {
		return written, msTime(at)
	}
	return written, s.fired(ctx, shard, sid, ms)
}

// parseAppended reads a shard's record of the latest occurrence known
// appended: "<occurrence ms>|<appended ms>".
func parseAppended(rec string) (occ, at int64, ok bool) {
	a, b, found := strings.Cut(rec, "|")
	if !found {
		return 0, 0, false
	}
	occ, err1 := strconv.ParseInt(a, 10, 64)
	at, err2 := strconv.ParseInt(b, 10, 64)
	return occ, at, err1 == nil && err2 == nil
}

// writtenAt returns, from a shard's written times
// ("<first ms>:<last ms>:<written ms>,..."), when the occurrence at ms was
// written; 0 when they do not cover it.
func writtenAt(runs string, ms int64) int64 {
	for r := range strings.SplitSeq(runs, ",") {
		f := strings.Split(r, ":")
		if len(f) != 3 {
			continue
		}
		a, err1 := strconv.ParseInt(f[0], 10, 64)
		b, err2 := strconv.ParseInt(f[1], 10, 64)
		w, err3 := strconv.ParseInt(f[2], 10, 64)
		if err1 == nil && err2 == nil && err3 == nil && a <= ms && ms <= b {
			return w
		}
	}
	return 0
}

func msTime(ms int64) time.Time {
	if ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

func (s *Store) shardRecords(ctx context.Context, sid string) ([]shardRecord, error) {
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.SliceCmd, s.layout.Shards())
	for i := range cmds {
		cmds[i] = pipe.HMGet(ctx, s.layout.Shard(i).Occurrences(), sid, writtenField(sid), appendedField(sid))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("schedule %s: occurrence records: %w", sid, err)
	}
	out := make([]shardRecord, len(cmds)) // index: shard; zero when none
	for i, c := range cmds {
		v := c.Val()
		if len(v) != 3 {
			continue
		}
		rec, _ := v[0].(string)
		out[i], _ = parseShardRecord(rec)
		out[i].runs, _ = v[1].(string)
		out[i].appended, _ = v[2].(string)
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
