package history

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream/internal/stream"
)

// How long buckets are kept after the last field they gained
// (scripts/history.lua holds the same figures, in seconds).
const (
	MinuteLife = 2 * time.Hour
	HourLife   = 8 * 24 * time.Hour
)

// The queue's counters, and the group counters' names (the field is
// "<counter>:<group>").
const (
	Promoted    = "promoted"    // entries appended to the queue's stream
	Quarantined = "quarantined" // entries promotion appended to the quarantine

	Handled = "handled" // entries acknowledged after their handler succeeded
	Dropped = "dropped" // entries acknowledged after their handler dropped them
	Retried = "retried" // failures scheduled in the group's retry lane
	Dead    = "dead"    // entries appended to the group's dead letters
)

// Keys caches the keys a script of one shard is passed to count in its
// history: some keys of the script's own first, then the shard's totals
// and the buckets of the minute and the hour in progress. The slice is
// built once a minute. Safe for concurrent use.
type Keys struct {
	shard  stream.Keys
	before []string
	cur    atomic.Pointer[minuteKeys]
}

type minuteKeys struct {
	minute int64
	keys   []string
}

// NewKeys returns the history keys of shard, after before.
func NewKeys(shard stream.Keys, before ...string) *Keys {
	return &Keys{shard: shard, before: before}
}

// At returns the script's keys (before, then the totals, the minute's
// bucket and the hour's bucket of t). The caller must not modify them.
func (k *Keys) At(t time.Time) []string {
	m := t.Unix() / 60
	if c := k.cur.Load(); c != nil && c.minute == m {
		return c.keys
	}
	keys := make([]string, 0, len(k.before)+3)
	keys = append(keys, k.before...)
	keys = append(keys, k.shard.HistoryTotals(), k.shard.HistoryBucket("m", m), k.shard.HistoryBucket("h", m/60))
	k.cur.Store(&minuteKeys{minute: m, keys: keys})
	return keys
}

// Append returns dst with the shard's totals, minute bucket and hour
// bucket of t appended: for scripts whose other keys vary by call.
func Append(dst []string, shard stream.Keys, t time.Time) []string {
	m := t.Unix() / 60
	return append(dst, shard.HistoryTotals(), shard.HistoryBucket("m", m), shard.HistoryBucket("h", m/60))
}

// Counts are a queue's counters over some span: its own, and each group's
// by name.
type Counts struct {
	Promoted, Quarantined int64
	Groups                map[string]GroupCounts
}

// GroupCounts are one group's counters over some span.
type GroupCounts struct {
	Handled, Dropped, Retried, Dead int64
}

// add adds field's value v (as read from Redis) to c. Fields it does not
// know (written by a newer version) are ignored.
func (c *Counts) add(field string, v int64) {
	switch field {
	case Promoted:
		c.Promoted += v
		return
	case Quarantined:
		c.Quarantined += v
		return
	}
	counter, group, ok := strings.Cut(field, ":")
	if !ok || stream.ValidateName("group", group) != nil {
		return // not a group's (a name no group can have: written by someone else)
	}
	g := c.Groups[group]
	switch counter {
	case Handled:
		g.Handled += v
	case Dropped:
		g.Dropped += v
	case Retried:
		g.Retried += v
	case Dead:
		g.Dead += v
	default:
		return
	}
	if c.Groups == nil {
		c.Groups = make(map[string]GroupCounts)
	}
	c.Groups[group] = g
}

// A Bucket is the counts of one minute or hour.
type Bucket struct {
	Start  time.Time
	Counts Counts
}

// History is what [Read] returns: the totals, and the buckets of the last
// minutes and hours, oldest first, the one in progress last.
type History struct {
	Totals  Counts
	Minutes []Bucket
	Hours   []Bucket
}

// Read reads layout's history at now, summed over its shards: the totals,
// the last minutes minute buckets and the last hours hour buckets (each
// ending with the one in progress; a bucket that expired or never counted
// anything reads as zero). Read only: HGETALL in one pipeline.
func Read(ctx context.Context, rdb redis.UniversalClient, layout *stream.Layout, minutes, hours int, now time.Time) (History, error) {
	m := now.Unix() / 60
	h := m / 60
	n := layout.Shards()
	per := 1 + minutes + hours
	pipe := rdb.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, 0, n*per)
	for i := range n {
		k := layout.Shard(i)
		cmds = append(cmds, pipe.HGetAll(ctx, k.HistoryTotals()))
		for j := minutes - 1; j >= 0; j-- {
			cmds = append(cmds, pipe.HGetAll(ctx, k.HistoryBucket("m", m-int64(j))))
		}
		for j := hours - 1; j >= 0; j-- {
			cmds = append(cmds, pipe.HGetAll(ctx, k.HistoryBucket("h", h-int64(j))))
		}
	}
	_, _ = pipe.Exec(ctx) // errors are per command (addAll)
	out := History{Minutes: make([]Bucket, minutes), Hours: make([]Bucket, hours)}
	for j := range out.Minutes {
		out.Minutes[j].Start = time.Unix((m-int64(minutes-1-j))*60, 0)
	}
	for j := range out.Hours {
		out.Hours[j].Start = time.Unix((h-int64(hours-1-j))*3600, 0)
	}
	for i := range n {
		row := cmds[i*per : (i+1)*per]
		if err := addAll(&out.Totals, row[0]); err != nil {
			return History{}, err
		}
		for j := range minutes {
			if err := addAll(&out.Minutes[j].Counts, row[1+j]); err != nil {
				return History{}, err
			}
		}
		for j := range hours {
			if err := addAll(&out.Hours[j].Counts, row[1+minutes+j]); err != nil {
				return History{}, err
			}
		}
	}
	return out, nil
}

// addAll adds the fields cmd read to c. A key of another type (written by
// someone else) reads as nothing: history never fails a tool's page.
func addAll(c *Counts, cmd *redis.MapStringStringCmd) error {
	vals, err := cmd.Result()
	if err != nil {
		if isNil(err) || strings.HasPrefix(err.Error(), "WRONGTYPE") {
			return nil
		}
		return fmt.Errorf("history: %v: %w", cmd.Args()[1], err)
	}
	for f, s := range vals {
		if v, err := strconv.ParseInt(s, 10, 64); err == nil && v > 0 {
			c.add(f, v)
		}
	}
	return nil
}

func isNil(err error) bool { return err == redis.Nil }
