package stream

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/delaystream/delaystream/codec"
	"github.com/delaystream/delaystream/internal/errs"
	"github.com/delaystream/delaystream/internal/scripts"

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

// ReadGroups returns the consumer groups of the stream at key (XINFO
// GROUPS alone): what [ReadInfo] reads of them, without XINFO STREAM,
// whose reply carries the stream's first and last entries whole. A stream
// that does not exist yet has none.
func ReadGroups(ctx context.Context, rdb redis.UniversalClient, key string) ([]GroupInfo, error) {
	gs, err := rdb.XInfoGroups(ctx, key).Result()
	if err != nil {
		if isNoSuchKey(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("xinfo groups %s: %w", key, err)
	}
	out := make([]GroupInfo, len(gs))
	for i, g := range gs {
		out[i] = GroupInfo{Name: g.Name, Consumers: g.Consumers, Pending: g.Pending,
			LastDeliveredID: g.LastDeliveredID, EntriesRead: g.EntriesRead, Lag: g.Lag}
	}
	return out, nil
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

// CutQuarantined is a quarantined entry as [ReadQuarantineCut] returns it:
// Raw and Member hold at most a prefix of what is stored.
type CutQuarantined struct {
	Quarantined
	RawSize    int // the length of the envelope bytes found, whole
	MemberSize int // the length of the raw delayed-set member, whole
}

// QuarantineEntry is a quarantined entry as the public API shows it.
// delaystream.Quarantined has the same fields, so that one converts into
// the other.
type QuarantineEntry struct {
	EntryID string    `json:"entry_id"`
	Shard   int       `json:"shard"`
	Lane    string    `json:"lane"`
	At      time.Time `json:"at"`
	ID      string    `json:"id"`
	Due     time.Time `json:"due,omitzero"`
	Reason  string    `json:"reason"`
	Raw     []byte    `json:"raw"`
	Payload []byte    `json:"payload,omitempty"`
	Member  []byte    `json:"member,omitempty"`
	Size    int       `json:"size"`
}

// Entry returns q, of shard's lane (named "main" or "retry:<group>"), as
// the public API shows it: its entry id followed by "@<shard>" when
// sharded, its payload when Raw decodes as an envelope.
func (q CutQuarantined) Entry(shard int, lane string, sharded bool) QuarantineEntry {
	e := QuarantineEntry{EntryID: q.EntryID, Shard: shard, Lane: lane, At: EntryTime(q.EntryID),
		ID: q.MessageID, Due: q.Due, Reason: q.Reason, Raw: q.Raw, Member: q.Member, Size: q.MemberSize}
	if len(q.Raw) > 0 {
		e.Size = q.RawSize
		var env codec.Envelope
		if wire.UnmarshalEnvelope(q.Raw, &env) == nil {
			e.Payload = env.Payload
		}
	}
	if sharded {
		e.EntryID += "@" + strconv.Itoa(shard)
	}
	return e
}

// Whole returns q as read whole.
func (q Quarantined) Whole() CutQuarantined {
	return CutQuarantined{Quarantined: q, RawSize: len(q.Raw), MemberSize: len(q.Member)}
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

// ReadQuarantineCut is [ReadQuarantine] for listings that show a preview
// of each entry: Raw holds at most its envelope's headers and the first
// maxPayload bytes of its payload (at most maxPayload bytes when it is no
// envelope), Member likewise; RawSize and MemberSize say how long they
// are. The cut is made in Redis by a read-only script (xrange_cut.lua:
// XRANGE), so neither the network nor this process ever carries a whole
// envelope. maxPayload must be at least 1.
func ReadQuarantineCut(ctx context.Context, rdb redis.UniversalClient, key, after string, count int64, maxPayload int) ([]CutQuarantined, error) {
	start := "-"
	if after != "" && after != "0" {
		start = "(" + after
	}
	v, err := scripts.XRangeCut.Run(ctx, rdb, []string{key}, start, "+", count, maxPayload).Result()
	if err != nil {
		err = ExplainWrongType(ctx, rdb, scripts.Explain(err), KeyType{Key: key, Want: "stream"})
		return nil, fmt.Errorf("read quarantine %s: %w", key, err)
	}
	entries, err := ParseCutEntries(v)
	if err != nil {
		return nil, fmt.Errorf("read quarantine %s: %w", key, err)
	}
	out := make([]CutQuarantined, 0, len(entries))
	for _, e := range entries {
		out = append(out, parseCutQuarantined(e.Message, e.Sizes))
	}
	return out, nil
}

// CutEntry is a stream entry as xrange_cut.lua replies it: its fields, the
// envelopes and members among them cut to a prefix, and the length of each
// of those before the cut, by field name.
type CutEntry struct {
	Message redis.XMessage // the entry, its values cut as xrange_cut.lua cuts them
	Sizes   map[string]int // by field ("e", "p", "m"): the value's length before the cut
}

// ParseCutEntries reads the reply of xrange_cut.lua: a list of {entry id,
// flat field list, flat list of field name and length}.
func ParseCutEntries(v any) ([]CutEntry, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("xrange_cut.lua replied %T, want a list", v)
	}
	out := make([]CutEntry, 0, len(list))
	for _, item := range list {
		parts, ok := item.([]any)
		if !ok || len(parts) != 3 {
			return nil, fmt.Errorf("xrange_cut.lua replied an entry of %T, want {id, fields, lengths}", item)
		}
		id, _ := parts[0].(string)
		fields, _ := parts[1].([]any)
		lens, _ := parts[2].([]any)
		e := CutEntry{Message: redis.XMessage{ID: id, Values: make(map[string]any, len(fields)/2)},
			Sizes: make(map[string]int, len(lens)/2)}
		for k := 0; k+1 < len(fields); k += 2 {
			if name, ok := fields[k].(string); ok {
				e.Message.Values[name] = fields[k+1]
			}
		}
		for k := 0; k+1 < len(lens); k += 2 {
			name, _ := lens[k].(string)
			n, _ := lens[k+1].(int64)
			e.Sizes[name] = int(n)
		}
		out = append(out, e)
	}
	return out, nil
}

// parseQuarantined reads a quarantine entry. Fields that are missing or
// malformed read as zero values: the entry is shown as found.
func parseQuarantined(m redis.XMessage) Quarantined {
	return parseCutQuarantined(m, nil).Quarantined
}

// parseCutQuarantined reads a quarantine entry whose values cut by
// xrange_cut.lua had the lengths sizes (by field; nil when none was cut),
// as parseQuarantined does.
func parseCutQuarantined(m redis.XMessage, sizes map[string]int) CutQuarantined {
	size := func(field, v string) int {
		if n, ok := sizes[field]; ok {
			return n
		}
		return len(v)
	}
	var q CutQuarantined
	q.EntryID = m.ID
	q.MessageID, _ = m.Values[wire.FieldID].(string)
	q.Reason, _ = m.Values[wire.FieldReason].(string)
	due := int64(-1)
	if d, ok := m.Values[wire.FieldDue].(string); ok {
		if ms, err := strconv.ParseInt(d, 10, 64); err == nil {
			q.Due, due = time.UnixMilli(ms), ms
		}
	}
	if e, ok := m.Values[wire.FieldEnvelope].(string); ok {
		q.Raw, q.RawSize = []byte(e), size(wire.FieldEnvelope, e)
	}
	if mem, ok := m.Values[wire.FieldMember].(string); ok {
		q.Member, q.MemberSize = []byte(mem), size(wire.FieldMember, mem)
		// A packed member with a readable id: say whose it was, and
		// which bytes were its envelope.
		if len(mem) >= 17 && mem[0] == wire.PackedKind && due >= 0 && due < 1<<48 {
			if id := wire.GeneratedID(due, mem[1:17]); wire.GeneratedLayout(id) {
				q.MessageID, q.Raw, q.RawSize = id, []byte(mem[17:]), q.MemberSize-17
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
