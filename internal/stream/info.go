package stream

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/delaystream/delaystream/internal/errs"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream/internal/wire"
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

// Quarantined is a delayed-set member the mover could not promote: its
// envelope was missing or not in a known format, its score was not a due
// time, or the member itself was of no kind this version knows.
type Quarantined struct {
	EntryID   string    // quarantine stream entry id (its time is when it was quarantined)
	MessageID string    // the message id; for a packed member, rebuilt from Member when it has a base32 random part; "" when unknown
	Due       time.Time // when it was due (the member's score); zero when the score was not a due time
	Reason    string    // one of the Reason constants, e.g. [ReasonMissingEnvelope]
	Raw       []byte    // the envelope bytes found, if any
	Member    []byte    // the raw delayed-set member, when it was not a plain one (nil for plain members, whose member is MessageID)
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
		err = ExplainWrongType(ctx, rdb, err, KeyType{Key: key, Want: "stream"})
		return nil, fmt.Errorf("read quarantine %s: %w", key, err)
	}
	out := make([]Quarantined, 0, len(msgs))
	for _, m := range msgs {
		out = append(out, parseQuarantined(m))
	}
	return out, nil
}

// parseQuarantined reads a quarantine entry. Fields that are missing or
// malformed read as zero values: the entry is shown as found.
func parseQuarantined(m redis.XMessage) Quarantined {
	q := Quarantined{EntryID: m.ID}
	q.MessageID, _ = m.Values[wire.FieldID].(string)
	q.Reason, _ = m.Values[wire.FieldReason].(string)
	due := int64(-1)
	if d, ok := m.Values[wire.FieldDue].(string); ok {
		if ms, err := strconv.ParseInt(d, 10, 64); err == nil {
			q.Due, due = time.UnixMilli(ms), ms
		}
	}
	if e, ok := m.Values[wire.FieldEnvelope].(string); ok {
		q.Raw = []byte(e)
	}
	if mem, ok := m.Values[wire.FieldMember].(string); ok {
		q.Member = []byte(mem)
		// A packed member with a readable id: say whose it was, and
		// which bytes were its envelope.
		if len(mem) >= 17 && mem[0] == wire.PackedKind && due >= 0 && due < 1<<48 {
			if id := wire.GeneratedID(due, mem[1:17]); wire.GeneratedLayout(id) {
				q.MessageID, q.Raw = id, []byte(mem[17:])
			}
		}
	}
	return q
}

// ErrWrongType is wrapped by [*KeyTypeError].
var ErrWrongType = errs.ErrWrongType

// KeyTypeError reports a key of a queue that holds a value of another type
// than the library keeps there (someone SET the delayed set, say). Every
// call on that key fails the same way until the key is fixed.
type KeyTypeError struct {
	Key  string // the key
	Want string // the type the library keeps there: "zset", "hash", "stream" or "string"
	Got  string // the type found (TYPE)
}

// Error implements error.
func (e *KeyTypeError) Error() string {
	return fmt.Sprintf("key %s holds a %s, want a %s: %v", e.Key, e.Got, e.Want, ErrWrongType)
}

// Unwrap returns [ErrWrongType].
func (e *KeyTypeError) Unwrap() error { return ErrWrongType }

// KeyType is a key and the type the library keeps there, for [CheckTypes].
type KeyType struct {
	Key  string
	Want string // "zset", "hash", "stream" or "string"
}

// CheckTypes returns a [*KeyTypeError] for the first key that exists and
// holds another type than its Want, nil if every key is right or absent. It
// sends one pipeline of TYPE commands (all keys of a queue shard share one
// hash tag, so one Cluster node answers). Callers use it to explain a
// WRONGTYPE reply, which does not name the key.
func CheckTypes(ctx context.Context, rdb redis.UniversalClient, keys ...KeyType) error {
	pipe := rdb.Pipeline()
	cmds := make([]*redis.StatusCmd, len(keys))
	for i, k := range keys {
		cmds[i] = pipe.Type(ctx, k.Key)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("check key types: %w", err)
	}
	for i, k := range keys {
		if got := cmds[i].Val(); got != "none" && got != k.Want {
			return &KeyTypeError{Key: k.Key, Want: k.Want, Got: got}
		}
	}
	return nil
}

// ExplainWrongType returns err as it is unless it is a WRONGTYPE reply of
// Redis (to a command or inside a script), which does not say which key
// holds the wrong type. Then it asks (see [CheckTypes]) and returns the
// [*KeyTypeError] of the first of keys that holds another type than its
// Want, so that callers, logs and hooks name the key; err itself if none
// does or if the check fails (its TYPE refused by an ACL, say). The check
// costs one round trip, made only after a WRONGTYPE reply.
func ExplainWrongType(ctx context.Context, rdb redis.UniversalClient, err error, keys ...KeyType) error {
	var kte *KeyTypeError
	if err == nil || errors.As(err, &kte) || !redis.HasErrorPrefix(err, "WRONGTYPE") {
		return err
	}
	if terr := CheckTypes(ctx, rdb, keys...); errors.As(terr, &kte) {
		return kte
	}
	return err
}
