package stream

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/delaystream/delaystream/codec"
)

// Field names of a stream entry.
const (
	FieldID       = "i" // message id
	FieldDue      = "d" // due time, Unix ms (Redis clock)
	FieldEnvelope = "e" // encoded envelope
	FieldReason   = "r" // quarantine and dead-letter entries: why
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
var ErrMalformed = errors.New("stream: malformed entry")

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
	mid, ok := values[FieldID].(string)
	if !ok || mid == "" {
		return fail(fmt.Errorf("%w: field %q missing", ErrMalformed, FieldID))
	}
	dueS, ok := values[FieldDue].(string)
	if !ok {
		return fail(fmt.Errorf("%w: field %q missing", ErrMalformed, FieldDue))
	}
	due, err := strconv.ParseInt(dueS, 10, 64)
	if err != nil {
		return fail(fmt.Errorf("%w: field %q = %q is not an integer", ErrMalformed, FieldDue, dueS))
	}
	raw, ok := values[FieldEnvelope].(string)
	if !ok {
		return fail(fmt.Errorf("%w: field %q missing", ErrMalformed, FieldEnvelope))
	}
	e := Entry{ID: id}
	// UnmarshalEnvelope only reads its argument and copies what it keeps
	// (payload, headers), so it may read the string's bytes in place: no
	// copy of the whole envelope just to hand it over.
	if err := codec.UnmarshalEnvelope(bytesOf(raw), &e.Envelope); err != nil {
		return fail(err)
	}
	if i := strings.Index(mid, RetrySep); i >= 0 {
		mid = mid[:i]
	}
	e.Envelope.ID = mid
	e.Envelope.Due = time.UnixMilli(due)
	return e, nil
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
		FieldEnvelope, codec.MarshalEnvelope(env),
	}
}
