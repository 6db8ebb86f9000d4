package wire

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/delaystream/delaystream/internal/errs"

	"github.com/delaystream/delaystream/codec"
)

// Field names of a stream entry.
const (
	FieldID       = "i" // message id
	FieldDue      = "d" // due time, Unix ms (Redis clock)
	FieldEnvelope = "e" // encoded envelope
	FieldPacked   = "p" // instead of "i" and "e": a packed delayed-set member as is (see [Unpack])
	FieldReason   = "r" // quarantine and dead-letter entries: why
	FieldMember   = "m" // quarantine entries: the raw delayed-set member, when it was not a plain one
)

// RetrySep separates the message id from the failed entry id in retry-lane
// members ("<message id>\x1f<entry id>"), so two messages that share an id
// never overwrite each other while waiting to be retried. Message ids cannot
// contain it (control characters are refused). [Decode] strips it.
const RetrySep = "\x1f"

// RetryMember returns the retry-lane member for message id failed as entry.
func RetryMember(id, entry string) string { return id + RetrySep + entry }

// ErrMalformed is wrapped by [*EntryError] when a field is missing or has the
// wrong type or syntax. Envelope decoding failures wrap the codec's errors
// (codec.ErrUnknownFormat, codec.ErrCorrupt) instead.
var ErrMalformed = errs.ErrMalformed

// EntryError reports a stream entry that could not be decoded.
type EntryError struct {
	Stream  string // stream key
	EntryID string // stream entry id, e.g. "1700000000000-0"
	Err     error  // ErrMalformed or an *codec.EnvelopeError
}

// Error implements error.
func (e *EntryError) Error() string {
	return fmt.Sprintf("decode %s/%s: %v", e.Stream, e.EntryID, e.Err)
}

// Unwrap returns the cause.
func (e *EntryError) Unwrap() error { return e.Err }

// Entry is a decoded stream entry.
type Entry struct {
	ID       string         // stream entry id; its time part is when the entry was appended (Redis clock)
	Envelope codec.Envelope // the message, with ID and Due filled in
}

// Appended returns the time the entry was appended to the stream, from the
// millisecond part of its id (Redis clock).
func (e Entry) Appended() time.Time { return EntryTime(e.ID) }

// EntryTime returns the time part of a stream entry id, or the zero time if
// id is not of the form "<ms>-<seq>".
func EntryTime(id string) time.Time {
	for i := 0; i < len(id); i++ {
		if id[i] == '-' {
			ms, err := strconv.ParseInt(id[:i], 10, 64)
			if err != nil {
				return time.Time{}
			}
			return time.UnixMilli(ms)
		}
	}
	return time.Time{}
}

// Decode turns the fields of stream entry id of stream key into an [Entry].
// values is what go-redis returns in redis.XMessage.Values.
func Decode(key, id string, values map[string]any) (Entry, error) {
	fail := func(err error) (Entry, error) {
		return Entry{}, &EntryError{Stream: key, EntryID: id, Err: err}
	}
	dueS, ok := values[FieldDue].(string)
	if !ok {
		return fail(fmt.Errorf("%w: field %q missing", ErrMalformed, FieldDue))
	}
	due, err := strconv.ParseInt(dueS, 10, 64)
	if err != nil {
		return fail(fmt.Errorf("%w: field %q = %q is not an integer", ErrMalformed, FieldDue, Clip(dueS)))
	}
	var mid, raw string
	if packed, ok := values[FieldPacked].(string); ok {
		if mid, raw, err = Unpack(due, packed); err != nil {
			return fail(err)
		}
	} else {
		if mid, ok = values[FieldID].(string); !ok || mid == "" {
			return fail(fmt.Errorf("%w: field %q missing", ErrMalformed, FieldID))
		}
		if strings.HasPrefix(mid, RetrySep) { // a retry member with no message id (found by fuzzing)
			return fail(fmt.Errorf("%w: field %q = %q has no message id", ErrMalformed, FieldID, Clip(mid)))
		}
		if raw, ok = values[FieldEnvelope].(string); !ok {
			return fail(fmt.Errorf("%w: field %q missing", ErrMalformed, FieldEnvelope))
		}
	}
	e := Entry{ID: id}
	// UnmarshalEnvelope only reads its argument and copies what it keeps
	// (payload, headers), so it may read the string's bytes in place: no
	// copy of the whole envelope just to hand it over.
	if err := UnmarshalEnvelope(bytesOf(raw), &e.Envelope); err != nil {
		return fail(err)
	}
	if i := strings.Index(mid, RetrySep); i >= 0 {
		mid = mid[:i]
	}
	e.Envelope.ID = mid
	e.Envelope.Due = time.UnixMilli(due)
	return e, nil
}

// ClipLen is how many bytes of a foreign value [Clip] keeps.
const ClipLen = 64

// Clip returns s, or its first [ClipLen] bytes and the count of the rest
// when it is longer: what an error message quotes of a value found in
// Redis, which may be any size (a 16 MiB field written by someone else must
// not become a 16 MiB log line or dead-letter reason).
func Clip(s string) string {
	if len(s) <= ClipLen {
		return s
	}
	return s[:ClipLen] + "… (" + strconv.Itoa(len(s)-ClipLen) + " more bytes)"
}

// PackedKind is the first byte of a packed delayed-set member (see ids.lua).
const PackedKind = 0x01

// Unpack splits a packed delayed-set member of a message due at due (Unix
// ms) into the message's generated id and its encoded envelope. The promote
// script appends packed members to the stream as they are (field
// [FieldPacked]), which saves building both strings in Lua. It returns an
// error wrapping [ErrMalformed] if packed is not a packed member.
func Unpack(due int64, packed string) (id, envelope string, err error) {
	if len(packed) < 17 || packed[0] != PackedKind {
		return "", "", fmt.Errorf("%w: field %q is not a packed member", ErrMalformed, FieldPacked)
	}
	if due < 0 || due >= 1<<48 {
		return "", "", fmt.Errorf("%w: due time %d out of the range of generated ids", ErrMalformed, due)
	}
	id = GeneratedID(due, packed[1:17])
	if !GeneratedLayout(id) {
		return "", "", fmt.Errorf("%w: field %q: random part %q is not base32", ErrMalformed, FieldPacked, packed[1:17])
	}
	return id, packed[17:], nil
}

// crockford is the alphabet of generated ids (Crockford's base32).
const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// GeneratedID returns the generated message id due at due (Unix ms) with the
// 16-character random part random: the due time as 10 characters of
// Crockford base32, then random. Ids of the same random part sort by due time.
func GeneratedID(due int64, random string) string {
	var b [26]byte
	t := uint64(due)
	for i := 9; i >= 0; i-- {
		b[i] = crockford[t&31]
		t >>= 5
	}
	copy(b[10:], random)
	return string(b[:])
}

// AppendRandomPart appends the 16-character random part of a generated id
// made from the 80 bits rnd (Crockford base32, most significant first).
func AppendRandomPart(dst []byte, rnd [10]byte) []byte {
	hi := uint64(rnd[0])<<8 | uint64(rnd[1]) // the top 16 bits
	lo := uint64(rnd[2])<<56 | uint64(rnd[3])<<48 | uint64(rnd[4])<<40 | uint64(rnd[5])<<32 |
		uint64(rnd[6])<<24 | uint64(rnd[7])<<16 | uint64(rnd[8])<<8 | uint64(rnd[9])
	var out [16]byte
	for i := 15; i >= 0; i-- {
		out[i] = crockford[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return append(dst, out[:]...)
}

// bytesOf returns the bytes of s without copying them. They must never be
// written to.
func bytesOf(s string) []byte {
	return unsafe.Slice(unsafe.StringData(s), len(s))
}

// Encode returns the field/value list of a stream entry for env, in the order
// XADD takes them. The promote script writes the same fields; Encode serves
// code that appends entries from Go (tests, redrive tools).
func Encode(env *codec.Envelope) []any {
	return []any{
		FieldID, env.ID,
		FieldDue, strconv.FormatInt(env.Due.UnixMilli(), 10),
		FieldEnvelope, MarshalEnvelope(env),
	}
}

// ShardOf returns the shard (0 <= shard < n) of message id in a queue of n
// shards. It is a stable hash (FNV-1a), the same in every process and release.
// For an id in the layout of generated ids (see "Delayed-set members" in the
// package doc) only the last 16 characters, the random part, are hashed: the
// time part is the due time, which for a delay is known only once the
// shard's script has run.
func ShardOf(id string, n int) int {
	if n <= 1 {
		return 0
	}
	if GeneratedLayout(id) {
		id = id[10:]
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	return int(h.Sum32() % uint32(n))
}

// GeneratedLayout reports whether id has the layout of a generated message
// id: 26 characters of Crockford base32 (upper case) whose first is 0 to 7
// (a 48-bit time part). Caller-chosen ids may have it too.
func GeneratedLayout(id string) bool {
	if len(id) != 26 || id[0] > '7' {
		return false
	}
	for i := range len(id) {
		if strings.IndexByte(crockford, id[i]) < 0 {
			return false
		}
	}
	return true
}
