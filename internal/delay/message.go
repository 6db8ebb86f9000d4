package delay

import (
	"crypto/rand"
	"fmt"

	"github.com/delaystream/delaystream/internal/errs"

	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/delaystream/delaystream/internal/wire"
)

// Errors returned by Queue methods. Test with errors.Is.
var (
	// ErrInvalidMessage is wrapped when a message or a When is refused at the
	// call; nothing is written.
	ErrInvalidMessage = errs.ErrInvalidMessage
	// ErrDuplicate is returned by Schedule when a message with the same id is
	// already waiting and the policy is [Reject].
	ErrDuplicate = errs.ErrDuplicate
	// ErrNotFound means no message with that id is waiting: it never
	// existed, was cancelled, or has already been promoted to the stream.
	ErrNotFound = errs.ErrNotFound
)

// Message is what a producer schedules.
type Message struct {
	// ID identifies the message while it waits; Cancel, Reschedule and Get
	// use it, and scheduling an id that is already waiting applies the
	// duplicate policy. Empty: a unique id is generated (26 characters,
	// ULID layout, with the due time by the Redis clock as its time part
	// and 80 random bits; see [NewID]), known once Redis has answered, and
	// the message, stored as one delayed-set member, takes less Redis
	// memory. Generated ids sort by due time, not by creation time. Choose
	// a deterministic id ("order:5001:cancel") to make scheduling
	// idempotent.
	ID string
	// Payload is delivered as is; at most the queue's max payload (1 MiB by default).
	Payload []byte
	// Headers are optional metadata delivered with the payload. Keys must be
	// non-empty and must not start with [ReservedHeaderPrefix].
	Headers map[string]string
	// OnDuplicate overrides the queue's duplicate policy for this message.
	// The zero value uses the queue's policy.
	OnDuplicate Policy
	// Deadline, if set, is when the message expires: a consumer that gets
	// it later (by its own clock) does not run its handler but moves it to
	// the group's dead letters with the reason "expired", where it is
	// counted, listed and can be redriven. It must be after the due time
	// (for After, as the producer's clock estimates it when the call
	// starts). Zero: the queue's [WithExpireAfter] default, or never. A
	// retry keeps the deadline; Reschedule keeps it too. Consumers and
	// movers must be of a release that reads deadlines before producers set
	// them: earlier movers quarantine such messages as "unknown envelope
	// format".
	Deadline time.Time
}

// Policy says what happens when a message is scheduled with the id of a
// message that is still waiting. It does not look at messages already
// promoted to the stream: once due, an id may be scheduled again.
type Policy int

const (
	// QueueDefault (the zero value) uses the queue's policy, set with
	// WithDuplicatePolicy.
	QueueDefault Policy = iota
	// Keep leaves the waiting message as it is and reports [Kept]. It is the
	// default, because it makes scheduling idempotent: a producer that
	// retries after a timeout cannot push a deadline back or create a twin.
	Keep
	// Replace overwrites the waiting message's payload, headers and due time
	// ([Replaced]): use it to debounce or to move a deadline.
	Replace
	// Reject refuses the new message: Schedule returns [ErrDuplicate] and
	// ScheduleBatch reports [Rejected].
	Reject
)

// String returns the policy's name.
func (p Policy) String() string {
	switch p {
	case QueueDefault:
		return "queue-default"
	case Keep:
		return "keep"
	case Replace:
		return "replace"
	case Reject:
		return "reject"
	}
	return "Policy(" + strconv.Itoa(int(p)) + ")"
}

func (p Policy) arg() string {
	switch p {
	case Replace:
		return "r"
	case Reject:
		return "e"
	default:
		return "k"
	}
}

// Outcome is what scheduling did with one message.
type Outcome int

const (
	// Unknown: the call failed before Redis answered for this message; it
	// may or may not have been written. Scheduling it again with the same
	// id and [Keep] is safe.
	Unknown Outcome = iota
	// Created: the message is new and now waits.
	Created
	// Replaced: a waiting message with this id was overwritten.
	Replaced
	// Kept: a waiting message with this id was left unchanged.
	Kept
	// Rejected: a waiting message with this id exists and the policy is Reject.
	Rejected
)

// String returns the outcome's name.
func (o Outcome) String() string {
	switch o {
	case Unknown:
		return "unknown"
	case Created:
		return "created"
	case Replaced:
		return "replaced"
	case Kept:
		return "kept"
	case Rejected:
		return "rejected"
	}
	return "Outcome(" + strconv.Itoa(int(o)) + ")"
}

// Result reports what happened to one scheduled message.
type Result struct {
	ID      string    // the message id: generated if the message had none (then empty while Outcome is Unknown)
	Due     time.Time // the due time now stored (the existing one for Kept and Rejected)
	Outcome Outcome   // what scheduling did: Created, Replaced, Kept or Rejected
}

// When is a due time: [After] a delay measured by the Redis clock, or [At] an
// absolute time. The zero When is invalid.
type When struct {
	delay time.Duration
	at    time.Time
	kind  uint8 // 0 invalid, 1 after, 2 at
}

// After returns a due time d after the moment the Redis server runs the
// schedule script (its TIME, not this host's clock), rounded up to the next
// millisecond. d must be >= 0; After(0) is due at once.
func After(d time.Duration) When { return When{delay: d, kind: 1} }

// At returns the absolute due time t, rounded up to the next millisecond so
// the message is never early. A time in the past is due at once. The zero
// time is invalid.
func At(t time.Time) When { return When{at: t, kind: 2} }

// String describes w, for logs.
func (w When) String() string {
	switch w.kind {
	case 1:
		return "after " + w.delay.String()
	case 2:
		return "at " + w.at.Format(time.RFC3339Nano)
	}
	return "invalid When"
}

// maxDueMs keeps due times exact in a float64 sorted-set score and inside
// year 9999.
const maxDueMs = 253402300799999

func ceilMs(d time.Duration) int64 {
	ms := d / time.Millisecond
	if d%time.Millisecond != 0 {
		ms++
	}
	return int64(ms)
}

// arg encodes w for the scripts: "r<ms>" relative to Redis TIME or "a<ms>".
func (w When) arg() (string, error) {
	ms, relative, err := w.millis()
	if err != nil {
		return "", err
	}
	if relative {
		return "r" + strconv.FormatInt(ms, 10), nil
	}
	return "a" + strconv.FormatInt(ms, 10), nil
}

// millis validates w and returns its delay (relative) or its absolute due
// time, in milliseconds, both rounded up.
func (w When) millis() (ms int64, relative bool, err error) {
	switch w.kind {
	case 1:
		if w.delay < 0 {
			return 0, false, fmt.Errorf("%w: negative delay %s", ErrInvalidMessage, w.delay)
		}
		return ceilMs(w.delay), true, nil
	case 2:
		if w.at.IsZero() {
			return 0, false, fmt.Errorf("%w: zero time in At", ErrInvalidMessage)
		}
		// UnixMilli floors; round a sub-millisecond rest up. (UnixNano
		// would overflow after year 2262.)
		ms := w.at.UnixMilli()
		if w.at.Nanosecond()%int(time.Millisecond) != 0 {
			ms++
		}
		if ms > maxDueMs {
			return 0, false, fmt.Errorf("%w: due time %s is after year 9999", ErrInvalidMessage, w.at)
		}
		return max(ms, 0), false, nil
	}
	return 0, false, fmt.Errorf("%w: zero When (use delaystream.After or delaystream.At)", ErrInvalidMessage)
}

// estimate returns the due time w gives a message scheduled at now: exact
// for At, the producer's estimate for After (Redis resolves it by its own
// clock).
func (w When) estimate(now time.Time) time.Time {
	if w.kind == 1 {
		return now.Add(w.delay)
	}
	return w.at
}

// checkDeadline refuses a deadline that is not after the due time.
func checkDeadline(m *Message, w When, now time.Time) error {
	if m.Deadline.IsZero() {
		return nil
	}
	if due := w.estimate(now); !m.Deadline.After(due) {
		return fmt.Errorf("%w: deadline %s is not after the due time %s", ErrInvalidMessage,
			m.Deadline.Format(time.RFC3339Nano), due.Format(time.RFC3339Nano))
	}
	return nil
}

// validate checks m against the queue's limits.
func validate(m *Message, maxPayload int) error {
	if m.ID != "" {
		if err := ValidateID(m.ID); err != nil {
			return err
		}
	}
	if len(m.Payload) > maxPayload {
		return fmt.Errorf("%w: payload is %d bytes, max %d", ErrInvalidMessage, len(m.Payload), maxPayload)
	}
	if len(m.Headers) > MaxHeaders {
		return fmt.Errorf("%w: %d headers, max %d", ErrInvalidMessage, len(m.Headers), MaxHeaders)
	}
	for k, v := range m.Headers {
		switch {
		case k == "":
			return fmt.Errorf("%w: empty header key", ErrInvalidMessage)
		case strings.HasPrefix(k, ReservedHeaderPrefix):
			return fmt.Errorf("%w: header %q uses the reserved prefix %q", ErrInvalidMessage, k, ReservedHeaderPrefix)
		case len(k) > MaxHeaderLen || len(v) > MaxHeaderLen:
			return fmt.Errorf("%w: header %q: key or value longer than %d bytes", ErrInvalidMessage, k, MaxHeaderLen)
		}
	}
	if m.OnDuplicate < QueueDefault || m.OnDuplicate > Reject {
		return fmt.Errorf("%w: unknown duplicate policy %d", ErrInvalidMessage, m.OnDuplicate)
	}
	return nil
}

// ValidateID reports whether id is acceptable as a message id: 1 to
// [MaxIDLen] bytes of valid UTF-8 without control characters.
func ValidateID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: empty id", ErrInvalidMessage)
	case len(id) > MaxIDLen:
		return fmt.Errorf("%w: id is %d bytes, max %d", ErrInvalidMessage, len(id), MaxIDLen)
	case !utf8.ValidString(id):
		return fmt.Errorf("%w: id is not valid UTF-8", ErrInvalidMessage)
	}
	for _, r := range id {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: id %q contains control character %U", ErrInvalidMessage, id, r)
		}
	}
	return nil
}

// NewID returns a new message id: 26 characters in the ULID layout, a 48-bit
// millisecond timestamp (this host's clock, used only for ordering) followed
// by 80 random bits. Ids from one host sort by creation time to the
// millisecond; collisions need 2^40 ids in one millisecond.
//
// The ids a Queue generates for messages scheduled without one have the
// same layout with the due time as the timestamp; see [Message.ID]. An id
// from NewID given as [Message.ID] is a caller-chosen id like any other.
func NewID() string {
	var rnd [10]byte
	_, _ = rand.Read(rnd[:]) // crypto/rand.Read never fails (Go 1.24+)
	return wire.GeneratedID(time.Now().UnixMilli(), string(wire.AppendRandomPart(nil, rnd)))
}

// idGen makes the random parts of the ids generated by one ScheduleBatch
// call, with random bytes read for many ids at once: one random read per
// call instead of one per id.
type idGen struct {
	rnd []byte // unused random bytes, 10 per id
}

// next returns the 16-character random part of a new generated id. more
// is how many ids the call may still need, so that a single Schedule does
// not read randomness for a full block.
func (g *idGen) next(more int) string {
	if len(g.rnd) < 10 {
		g.rnd = make([]byte, 10*min(max(more, 1), 256))
		_, _ = rand.Read(g.rnd) // crypto/rand.Read never fails (Go 1.24+)
	}
	rnd := [10]byte(g.rnd[:10])
	g.rnd = g.rnd[10:]
	var b [16]byte
	return string(wire.AppendRandomPart(b[:0], rnd))
}
