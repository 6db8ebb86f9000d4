package stream

import (
	"fmt"
	"strconv"
	"unicode"
	"unicode/utf8"

	"github.com/delaystream/delaystream/internal/errs"

	"github.com/delaystream/delaystream/internal/wire"
)

// DefaultPrefix is the key prefix used when none is configured.
const DefaultPrefix = "ds"

// LayoutVersion is the key-layout version written into every key name.
const LayoutVersion = "1"

// MaxNameLen bounds queue, group and prefix names, in bytes.
const MaxNameLen = 128

// ErrInvalidName is wrapped by the errors of [ValidateName].
var ErrInvalidName = errs.ErrInvalidName

// ValidateName reports whether s is usable as a prefix, queue or group name:
// 1 to [MaxNameLen] bytes of printable UTF-8 with no spaces and no braces
// (braces would break the Cluster hash tag). what names the thing checked in
// the error, e.g. "queue".
func ValidateName(what, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%w: %s name is empty", ErrInvalidName, what)
	case len(s) > MaxNameLen:
		return fmt.Errorf("%w: %s name is %d bytes, max %d", ErrInvalidName, what, len(s), MaxNameLen)
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: %s name %q is not valid UTF-8", ErrInvalidName, what, s)
	}
	for _, r := range s {
		if r == '{' || r == '}' || unicode.IsSpace(r) || unicode.IsControl(r) {
			return fmt.Errorf("%w: %s name %q contains %q (no braces, spaces or control characters)", ErrInvalidName, what, s, r)
		}
	}
	return nil
}

// Keys names the Redis keys of one shard of a queue. Build it with [NewKeys];
// the zero value is not usable.
type Keys struct {
	base    string // "<prefix>:1:{<tag>}"
	tag     string
	sharded bool // a shard of a queue with more than one
}

// NewKeys returns the keys of shard i of a queue split into n shards
// (n = 1 for an unsharded queue). It validates prefix and queue with
// [ValidateName] and requires 0 <= i < n.
func NewKeys(prefix, queue string, i, n int) (Keys, error) {
	if err := ValidateName("prefix", prefix); err != nil {
		return Keys{}, err
	}
	if err := ValidateName("queue", queue); err != nil {
		return Keys{}, err
	}
	if n < 1 || n > MaxShards || i < 0 || i >= n {
		return Keys{}, fmt.Errorf("%w: shard %d of %d (1 to %d shards)", ErrInvalidName, i, n, MaxShards)
	}
	return newKeys(prefix, shardTag(queue, i, n), n > 1), nil
}

func newKeys(prefix, tag string, sharded bool) Keys {
	return Keys{base: prefix + ":" + LayoutVersion + ":{" + tag + "}", tag: tag, sharded: sharded}
}

// MaxShards is the most shards a queue may have.
const MaxShards = 1024

// shardTag returns the hash tag of shard i of n: the queue's name when
// n = 1 (the unsharded layout), otherwise "<queue>:<i>" or, when that
// hashes outside the shard's target, the first of "<queue>:<i>.0",
// "<queue>:<i>.1", ... that hashes inside it. Shard i's target is a window
// of slots around the centre of the i-th of n equal ranges of the 16384
// slots (1/16 of the range, at least 17 slots), so that each shard lands
// on the master that holds its range's centre, whatever the queue's name:
// on a cluster whose masters hold equal slot ranges (what redis-cli
// --cluster create makes) every master then holds n/masters shards,
// rounded down or up. Naive tags "<queue>:0" … "<queue>:<n-1>" hash
// anywhere: 8 of them often put 4 shards on one of 3 masters.
func shardTag(queue string, i, n int) string {
	if n == 1 {
		return queue
	}
	lo, hi := i*wire.Slots/n, (i+1)*wire.Slots/n
	centre, half := (lo+hi)/2, max((hi-lo)/32, 8)
	lo, hi = max(lo, centre-half), min(hi, centre+half+1)
	base := queue + ":" + strconv.Itoa(i)
	if s := wire.Slot(base); s >= lo && s < hi {
		return base
	}
	buf := make([]byte, 0, len(base)+8)
	buf = append(buf, base...)
	buf = append(buf, '.')
	for k := 0; ; k++ {
		tag := strconv.AppendInt(buf, int64(k), 10)
		if s := int(wire.Slot(string(tag))); s >= lo && s < hi {
			return string(tag)
		}
	}
}

// Tag returns the hash tag shared by all keys of the shard, without braces.
func (k Keys) Tag() string { return k.tag }

// Main returns the lane scheduled by producers: the queue's own delayed set,
// envelopes, stream and quarantine, with the shard's pause record (whose
// queue field holds its promotion).
func (k Keys) Main() Lane {
	l := k.lane(k.base)
	l.Pause = k.Pause()
	l.Occurrences = k.Occurrences()
	return l
}

// Pause returns the key of the shard's pause record: a HASH whose field
// [PauseQueueField] (on every shard) holds the queue's promotion and whose
// field [PauseGroupField] of a group (on shard 0) holds that group's
// consumers, each valued with the Unix ms (Redis clock) the pause began.
func (k Keys) Pause() string { return k.base + ":p" }

// PauseQueueField is the field of a shard's pause record that pauses the
// queue's promotion on that shard.
const PauseQueueField = "queue"

// PauseGroupField returns the field of shard 0's pause record that
// pauses group's consumers.
func PauseGroupField(group string) string { return "group:" + group }

// KeyRate returns the key of the rate state of key under group's per-key
// rate limit, and the key of message id's reservation of a permit of it,
// on the shard whose keys hold them (the shard of key). The key's length
// leads it, so that no key and message id make another pair's names.
func (k Keys) KeyRate(group, key, id string) (state, reservation string) {
	state = k.base + ":f:" + group + ":k:" + strconv.Itoa(len(key)) + ":" + key
	return state, state + ":" + id
}

// Flow returns the key of group's flow-control state (on shard 0): a
// HASH of the limits its consumers run with, the rate limiter's state,
// the concurrency slots each consumer holds and the reclaimed entries each
// waits for permits for (see scripts/flow.lua).
func (k Keys) Flow(group string) string { return k.base + ":f:" + group }

// Retry returns group's retry lane: failed messages wait there for their
// backoff and are then appended to the lane's stream, which only that group
// reads. group must satisfy [ValidateName].
func (k Keys) Retry(group string) Lane { return k.lane(k.base + ":r:" + group) }

// DeadLetters returns the key of group's dead-letter stream.
func (k Keys) DeadLetters(group string) string { return k.base + ":d:" + group }

// HistoryTotals returns the key of the shard's history totals: a HASH of
// counters (package history names the fields) kept as long as the queue.
func (k Keys) HistoryTotals() string { return k.base + ":h" }

// HistoryBucket returns the key of the shard's history bucket of
// resolution res ("m": Unix minute i; "h": Unix hour i): a HASH of the
// same counters as [Keys.HistoryTotals], for that minute or hour, which
// expires by itself.
func (k Keys) HistoryBucket(res string, i int64) string {
	return k.base + ":h:" + res + ":" + strconv.FormatInt(i, 10)
}

// Handled returns the keys of group's records of the messages it handled
// (kept when the group is configured to keep them): a HASH, message id ->
// "<ms>|<attempt>|<outcome>|<consumer>", and a ZSET of the same ids
// scored by that ms, by which old records are removed (scripts/ack.lua).
func (k Keys) Handled(group string) (records, times string) {
	records = k.base + ":a:" + group
	return records, records + ":t"
}

// Groups returns the key of the shard's record of the consumer groups that
// read its main stream: a SET of group names, to which every consumer adds
// its group when it starts. Trimming keeps every entry while a recorded
// group is missing from the stream (the stream was deleted and recreated,
// and that group's consumers have not recreated it yet), so that a group
// that comes back finds what was appended meanwhile. group.Forget removes
// a group from it.
func (k Keys) Groups() string { return k.base + ":g" }

// Presence returns the shard channel that a running consumer of group
// stays subscribed to (on shard 0's keys, so in its slot): PUBSUB
// SHARDCHANNELS on [Keys.PresencePattern] lists the group's live
// consumers, which operators tell from gone ones by it, and between which
// the consumers of a sharded queue split the shards' announcements. Nothing is
// published on it. The consumer's name is in braces, which names cannot
// contain, so that no group's pattern matches another group's channels.
func (k Keys) Presence(group, consumer string) string {
	return k.PresencePrefix(group) + consumer + "}"
}

// PresencePrefix returns what every [Keys.Presence] channel of group
// starts with; the consumer's name and a closing brace follow.
func (k Keys) PresencePrefix(group string) string { return k.base + ":c:" + group + ":{" }

// PresencePattern returns the glob pattern (for PUBSUB SHARDCHANNELS) that
// matches every [Keys.Presence] channel of group and no other channel.
func (k Keys) PresencePattern(group string) string {
	return EscapeGlob(k.PresencePrefix(group)) + "*}"
}

// CallPrefix returns the prefix of the shard's call-token keys: a
// producer's call that may be sent twice (go-redis re-sends a command whose
// reply was lost) carries a token, and its script stores its reply under
// CallPrefix()+token for a short time, so that a second run of the call
// returns the first run's reply instead of acting again. The keys are
// STRINGs that expire by themselves.
func (k Keys) CallPrefix() string { return k.base + ":k:" }

func (k Keys) lane(p string) Lane {
	l := Lane{
		Delayed:    p + ":z",
		Envelopes:  p + ":m",
		Stream:     p + ":s",
		Quarantine: p + ":x",
		Lease:      p + ":l",
		Wake:       p + ":w",
		Arrivals:   p + ":n",
		Sharded:    k.sharded,
	}
	return l
}

// Lane is one delayed set and the stream it is promoted into. A queue shard
// has a main lane and one retry lane per consumer group; the mover promotes
// all of them with the same script.
type Lane struct {
	Delayed    string // ZSET: message id -> due time in Unix ms
	Envelopes  string // HASH: message id -> encoded envelope
	Stream     string // STREAM: promoted entries
	Quarantine string // STREAM: entries that could not be promoted, with a reason
	Lease      string // STRING: token of the mover that promotes this lane
	Wake       string // pub/sub channel: due time of a newly scheduled earlier entry
	// Arrivals is the channel on which the movers announce entries
	// appended to the lane's stream (payload: the shard number), from the
	// promote script that appends them. Consumers of a sharded queue read
	// the streams that have work instead of polling them all; consumers of
	// any queue run reclaim passes only on streams that may have entries
	// pending (a stream's pending list gains entries only when announced
	// entries are read).
	Arrivals string
	// Pause is the shard's pause record (see [Keys.Pause]), which the
	// promote script checks: set for a queue's main lane, "" for a retry
	// lane (a group's retries are held by pausing the group).
	Pause string
	// Occurrences is the shard's record of recurring occurrences (see
	// [Keys.Occurrences]), in which the promote script records when each
	// was appended: set for a queue's main lane, "" for a retry lane.
	Occurrences string
	// Sharded reports that the lane belongs to a shard of a queue with more
	// than one. Its channels (Wake, Arrivals) are then shard channels
	// (SPUBLISH / SSUBSCRIBE, Redis 7.0), which a Cluster delivers from the
	// node that holds the shard instead of relaying to every node; an
	// unsharded lane's Wake is a classic channel (PUBLISH / SUBSCRIBE).
	Sharded bool
}
