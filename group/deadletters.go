package group

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream/codec"
	"github.com/delaystream/delaystream/internal/scripts"
	"github.com/delaystream/delaystream/internal/wire"
	"github.com/delaystream/delaystream/stream"
)

// ErrNotFound is returned when a dead letter does not exist.
var ErrNotFound = errors.New("group: dead letter not found")

// DeadLetters inspects, redrives and purges one group's dead letters. It is
// safe for concurrent use and starts nothing.
type DeadLetters struct {
	rdb   redis.UniversalClient
	group string
	key   string
	retry stream.Lane
}

// DeadEntry is one entry of a group's dead-letter stream.
type DeadEntry struct {
	EntryID    string         // dead-letter entry id; its time is when it was dead-lettered
	Envelope   codec.Envelope // the message (ID, Due, Payload, Headers, Attempt); zero if undecodable
	Decoded    bool           // whether Envelope could be decoded
	Reason     string         // one of the Reason* constants
	LastError  string         // the handler's (or decoder's) error text
	Attempt    int            // the attempt that failed
	Deliveries int64          // deliveries of the failed entry
	Source     string         // the stream it was read from
	SourceID   string         // its entry id there
	Raw        []byte         // the stored envelope bytes, if any
}

// At returns when the entry was dead-lettered (Redis clock).
func (d DeadEntry) At() time.Time { return stream.EntryTime(d.EntryID) }

// NewDeadLetters returns the dead-letter handle of group on queue, for
// tools that run no Consumer. Only WithPrefix among the options matters.
func NewDeadLetters(rdb redis.UniversalClient, queue, group string, opts ...Option) (*DeadLetters, error) {
	keys, err := resolve(rdb, queue, group, opts)
	if err != nil {
		return nil, err
	}
	return &DeadLetters{rdb: rdb, group: group, key: keys.DeadLetters(group), retry: keys.Retry(group)}, nil
}

// Key returns the dead-letter stream's key.
func (d *DeadLetters) Key() string { return d.key }

// Len returns how many dead letters there are.
func (d *DeadLetters) Len(ctx context.Context) (int64, error) {
	n, err := d.rdb.XLen(ctx, d.key).Result()
	if err != nil {
		return 0, fmt.Errorf("dead letters %s: %w", d.group, err)
	}
	return n, nil
}

// List returns up to count dead letters, oldest first, after entry id after
// ("" for the start). Pass the last EntryID returned to get the next page.
func (d *DeadLetters) List(ctx context.Context, after string, count int64) ([]DeadEntry, error) {
	if count < 1 {
		return nil, fmt.Errorf("%w: count must be >= 1, got %d", ErrInvalidOption, count)
	}
	start := "-"
	if after != "" {
		start = "(" + after
	}
	msgs, err := d.rdb.XRangeN(ctx, d.key, start, "+", count).Result()
	if err != nil {
		return nil, fmt.Errorf("dead letters %s: %w", d.group, err)
	}
	out := make([]DeadEntry, len(msgs))
	for i, m := range msgs {
		out[i] = parseDeadLetter(m)
	}
	return out, nil
}

// Get returns one dead letter, or [ErrNotFound].
func (d *DeadLetters) Get(ctx context.Context, entryID string) (DeadEntry, error) {
	msgs, err := d.rdb.XRangeN(ctx, d.key, entryID, entryID, 1).Result()
	if err != nil {
		return DeadEntry{}, fmt.Errorf("dead letter %s: %w", entryID, err)
	}
	if len(msgs) == 0 {
		return DeadEntry{}, fmt.Errorf("dead letter %s: %w", entryID, ErrNotFound)
	}
	return parseDeadLetter(msgs[0]), nil
}

// Dead-letter entry fields beyond stream.Field*.
const (
	fieldError      = "x" // last error
	fieldAttempt    = "a" // attempt that failed
	fieldDeliveries = "n" // deliveries of the failed entry
	fieldSource     = "s" // stream the entry was read from
	fieldEntry      = "o" // original stream entry id
)

func parseDeadLetter(m redis.XMessage) DeadEntry {
	str := func(k string) string { s, _ := m.Values[k].(string); return s }
	dl := DeadEntry{
		EntryID: m.ID, Reason: str(wire.FieldReason), LastError: str(fieldError),
		Source: str(fieldSource), SourceID: str(fieldEntry),
	}
	dl.Attempt, _ = strconv.Atoi(str(fieldAttempt))
	dl.Deliveries, _ = strconv.ParseInt(str(fieldDeliveries), 10, 64)
	raw, ok := m.Values[wire.FieldEnvelope].(string)
	if !ok { // a packed entry that could not be split: keep its bytes
		raw, ok = m.Values[wire.FieldPacked].(string)
	}
	if ok {
		dl.Raw = []byte(raw)
		if e, err := wire.Decode(m.ID, m.ID, m.Values); err == nil {
			dl.Envelope, dl.Decoded = e.Envelope, true
		}
	}
	if !dl.Decoded {
		dl.Envelope.ID = str(wire.FieldID)
		if i := strings.Index(dl.Envelope.ID, wire.RetrySep); i >= 0 {
			dl.Envelope.ID = dl.Envelope.ID[:i]
		}
	}
	return dl
}

// RedriveError lists dead letters Redrive could not move back.
type RedriveError struct {
	NotFound      []string // no such dead letter (already redriven or purged)
	Unrecoverable []string // no valid envelope (undecodable or deleted entries); left in place
}

// Error implements error.
func (e *RedriveError) Error() string {
	return fmt.Sprintf("group: redrive: %d not found, %d unrecoverable", len(e.NotFound), len(e.Unrecoverable))
}

// Redrive moves the given dead letters back to this group only: each is
// scheduled in the group's retry lane to be delivered after delay (by the
// Redis clock), with its attempt count reset to 1, and removed from the dead
// letters, atomically per entry. It returns how many were redriven and a
// [*RedriveError] naming those it could not move.
func (d *DeadLetters) Redrive(ctx context.Context, delay time.Duration, entryIDs ...string) (int, error) {
	if delay < 0 {
		return 0, fmt.Errorf("%w: negative redrive delay %s", ErrInvalidOption, delay)
	}
	if len(entryIDs) == 0 {
		return 0, nil
	}
	if err := validEntryIDs(entryIDs); err != nil {
		return 0, fmt.Errorf("redrive %s: %w", d.group, err)
	}
	// Read the entries in one round trip: the new attempt's envelope is
	// encoded here (Lua cannot), the script re-checks each atomically.
	pipe := d.rdb.Pipeline()
	reads := make([]*redis.XMessageSliceCmd, len(entryIDs))
	for i, id := range entryIDs {
		reads[i] = pipe.XRangeN(ctx, d.key, id, id, 1)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, fmt.Errorf("redrive %s: %w", d.group, err)
	}
	dls := make(map[string]DeadEntry, len(entryIDs))
	for i, id := range entryIDs {
		if msgs := reads[i].Val(); len(msgs) == 1 {
			dls[id] = parseDeadLetter(msgs[0])
		}
	}
	return d.redrive(ctx, delay, entryIDs, dls)
}

// redrive runs the redrive script for entryIDs, whose entries (those that
// exist) are in dls.
func (d *DeadLetters) redrive(ctx context.Context, delay time.Duration, entryIDs []string, dls map[string]DeadEntry) (int, error) {
	args := []any{delay.Milliseconds(), d.retry.Wake, string([]byte{wire.Magic, wire.Version})}
	for _, id := range entryIDs {
		env := ""
		if dl, ok := dls[id]; ok && dl.Decoded {
			e := dl.Envelope
			e.Attempt = 1
			env = string(wire.MarshalEnvelope(&e))
		}
		args = append(args, id, env)
	}
	v, err := scripts.Redrive.Run(ctx, d.rdb, []string{d.key, d.retry.Delayed, d.retry.Envelopes}, args...).Int64Slice()
	if err != nil {
		return 0, fmt.Errorf("redrive %s: %w", d.group, err)
	}
	n := 0
	var rerr RedriveError
	for i, s := range v {
		switch s {
		case 1:
			n++
		case 0:
			rerr.NotFound = append(rerr.NotFound, entryIDs[i])
		default:
			rerr.Unrecoverable = append(rerr.Unrecoverable, entryIDs[i])
		}
	}
	if len(rerr.NotFound)+len(rerr.Unrecoverable) > 0 {
		return n, &rerr
	}
	return n, nil
}

// RedriveAll redrives every dead letter present when it starts, in pages of
// 100, and returns how many were redriven. Unrecoverable entries stay and
// are reported in a [*RedriveError].
func (d *DeadLetters) RedriveAll(ctx context.Context, delay time.Duration) (int, error) {
	total := 0
	var all RedriveError
	last, err := d.rdb.XRevRangeN(ctx, d.key, "+", "-", 1).Result()
	if err != nil || len(last) == 0 {
		if err != nil {
			err = fmt.Errorf("redrive all %s: %w", d.group, err)
		}
		return 0, err
	}
	end := last[0].ID
	after := ""
	for {
		page, err := d.List(ctx, after, 100)
		if err != nil {
			return total, err
		}
		ids := make([]string, 0, len(page))
		dls := make(map[string]DeadEntry, len(page))
		for _, p := range page {
			if compareIDs(p.EntryID, end) > 0 {
				break
			}
			ids = append(ids, p.EntryID)
			dls[p.EntryID] = p
		}
		if len(ids) == 0 {
			break
		}
		n, err := d.redrive(ctx, delay, ids, dls) // the page is already read
		total += n
		var re *RedriveError
		if errors.As(err, &re) {
			all.Unrecoverable = append(all.Unrecoverable, re.Unrecoverable...)
		} else if err != nil {
			return total, err
		}
		after = ids[len(ids)-1]
		if len(ids) < len(page) || len(page) < 100 {
			break
		}
	}
	if len(all.Unrecoverable) > 0 {
		return total, &all
	}
	return total, nil
}

// Purge deletes the given dead letters and returns how many existed.
func (d *DeadLetters) Purge(ctx context.Context, entryIDs ...string) (int64, error) {
	if len(entryIDs) == 0 {
		return 0, nil
	}
	if err := validEntryIDs(entryIDs); err != nil {
		return 0, fmt.Errorf("purge %s: %w", d.group, err)
	}
	n, err := d.rdb.XDel(ctx, d.key, entryIDs...).Result()
	if err != nil {
		return 0, fmt.Errorf("purge %s: %w", d.group, err)
	}
	return n, nil
}

// PurgeAll deletes every dead letter of the group.
func (d *DeadLetters) PurgeAll(ctx context.Context) error {
	if err := d.rdb.Del(ctx, d.key).Err(); err != nil {
		return fmt.Errorf("purge all %s: %w", d.group, err)
	}
	return nil
}

// validEntryIDs checks that every id is a stream entry id, "<ms>-<seq>":
// anything else would fail the whole call in Redis.
func validEntryIDs(ids []string) error {
	for _, id := range ids {
		ms, seq, ok := strings.Cut(id, "-")
		if _, err := strconv.ParseUint(ms, 10, 64); err != nil || !ok {
			return fmt.Errorf("%w: %q is not a stream entry id (<ms>-<seq>)", ErrInvalidOption, id)
		}
		if _, err := strconv.ParseUint(seq, 10, 64); err != nil {
			return fmt.Errorf("%w: %q is not a stream entry id (<ms>-<seq>)", ErrInvalidOption, id)
		}
	}
	return nil
}

// compareIDs orders stream entry ids "ms-seq".
func compareIDs(a, b string) int {
	am, as := splitID(a)
	bm, bs := splitID(b)
	switch {
	case am != bm:
		if am < bm {
			return -1
		}
		return 1
	case as < bs:
		return -1
	case as > bs:
		return 1
	}
	return 0
}

func splitID(id string) (uint64, uint64) {
	i := strings.IndexByte(id, '-')
	if i < 0 {
		ms, _ := strconv.ParseUint(id, 10, 64)
		return ms, 0
	}
	ms, _ := strconv.ParseUint(id[:i], 10, 64)
	seq, _ := strconv.ParseUint(id[i+1:], 10, 64)
	return ms, seq
}
