package stream

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Info is a snapshot of one stream, read with XINFO STREAM and XINFO GROUPS.
type Info struct {
	Length       int64       // entries currently in the stream
	FirstID      string      // oldest entry id, "" when empty
	LastID       string      // newest entry id ever added ("0-0" when none)
	Groups       []GroupInfo // consumer groups, in server order
	EntriesAdded int64       // entries ever added to the stream
}

// GroupInfo describes one consumer group of a stream (XINFO GROUPS).
type GroupInfo struct {
	Name            string // group name
	Consumers       int64  // consumers known to the group
	Pending         int64  // entries delivered but not acknowledged
	LastDeliveredID string // last entry id delivered to the group
	EntriesRead     int64  // logical read counter
	Lag             int64  // entries not yet delivered to the group; -1 when Redis cannot tell
}

// ReadInfo returns figures about the stream at key. A stream that does not
// exist yet yields a zero Info and no error.
func ReadInfo(ctx context.Context, rdb redis.UniversalClient, key string) (Info, error) {
	s, err := rdb.XInfoStream(ctx, key).Result()
	if err != nil {
		if isNoSuchKey(err) {
			return Info{}, nil
		}
		return Info{}, fmt.Errorf("xinfo stream %s: %w", key, err)
	}
	info := Info{Length: s.Length, FirstID: s.FirstEntry.ID, LastID: s.LastGeneratedID, EntriesAdded: s.EntriesAdded}
	gs, err := rdb.XInfoGroups(ctx, key).Result()
	if err != nil {
		return Info{}, fmt.Errorf("xinfo groups %s: %w", key, err)
	}
	for _, g := range gs {
		info.Groups = append(info.Groups, GroupInfo{
			Name: g.Name, Consumers: g.Consumers, Pending: g.Pending,
			LastDeliveredID: g.LastDeliveredID, EntriesRead: g.EntriesRead, Lag: g.Lag,
		})
	}
	return info, nil
}

// isNoSuchKey reports Redis's "ERR no such key" reply. HasErrorPrefix strips
// the "ERR " part before comparing.
func isNoSuchKey(err error) bool {
	return err != nil && !errors.Is(err, redis.Nil) && redis.HasErrorPrefix(err, "no such key")
}

// Quarantined is an entry the mover could not promote: its envelope was
// missing or not in a known format.
type Quarantined struct {
	EntryID   string    // quarantine stream entry id (its time is when it was quarantined)
	MessageID string    // the message id
	Due       time.Time // when it was due
	Reason    string    // e.g. "missing envelope"
	Raw       []byte    // the bytes found, if any
}

// ReadQuarantine returns up to count quarantined entries of the lane whose
// quarantine stream is key, oldest first, starting after entry id after
// ("" or "0" for the beginning).
func ReadQuarantine(ctx context.Context, rdb redis.UniversalClient, key, after string, count int64) ([]Quarantined, error) {
	start := "-"
	if after != "" && after != "0" {
		start = "(" + after
	}
	msgs, err := rdb.XRangeN(ctx, key, start, "+", count).Result()
	if err != nil {
		return nil, fmt.Errorf("read quarantine %s: %w", key, err)
	}
	out := make([]Quarantined, 0, len(msgs))
	for _, m := range msgs {
		q := Quarantined{EntryID: m.ID}
		q.MessageID, _ = m.Values[FieldID].(string)
		q.Reason, _ = m.Values[FieldReason].(string)
		if d, ok := m.Values[FieldDue].(string); ok {
			if ms, err := strconv.ParseInt(d, 10, 64); err == nil {
				q.Due = time.UnixMilli(ms)
			}
		}
		if e, ok := m.Values[FieldEnvelope].(string); ok {
			q.Raw = []byte(e)
		}
		out = append(out, q)
	}
	return out, nil
}
