package group

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/delaystream/delaystream/internal/errs"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream/codec"
	"github.com/delaystream/delaystream/internal/scripts"
	"github.com/delaystream/delaystream/internal/stream"
	"github.com/delaystream/delaystream/internal/wire"
)

// ErrNotFound is returned when a dead letter does not exist.
var ErrNotFound = errs.ErrNotFound

// DeadLetters inspects, redrives and purges one group's dead letters. It is
// safe for concurrent use and starts nothing.
//
// A sharded queue keeps a group's dead letters per shard (each is written
// atomically with the acknowledgement of the shard's entry). The handle
// covers them all: entry ids then carry their shard, "<ms>-<seq>@<shard>"
// (as List returns them), and List merges the shards in entry-id order.
type DeadLetters struct {
	rdb    redis.UniversalClient
	group  string
	shards []deadShard
}

// deadShard is one shard's dead letters and the retry lane they are
// redriven into.
type deadShard struct {
	key   string
	retry stream.Lane
}

func newDeadLetters(rdb redis.UniversalClient, layout *stream.Layout, group string) *DeadLetters {
	d := &DeadLetters{rdb: rdb, group: group, shards: make([]deadShard, layout.Shards())}
	for i := range d.shards {
		k := layout.Shard(i)
		d.shards[i] = deadShard{key: k.DeadLetters(group), retry: k.Retry(group)}
	}
	return d
}

// DeadEntry is one entry of a group's dead-letter stream.
type DeadEntry struct {
	// EntryID identifies the dead letter: the dead-letter stream's entry id
	// "<ms>-<seq>", whose time is when it was dead-lettered; on a sharded
	// queue followed by "@<shard>".
	EntryID    string
	Shard      int            // the queue shard whose dead letters hold it
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

// CutDeadEntry is a dead letter as [DeadLetters.ListCut] returns it: Raw
// and Envelope.Payload hold at most a prefix of what is stored.
type CutDeadEntry struct {
	DeadEntry
	RawSize int // the length of the stored envelope bytes, whole
}

// PayloadSize returns the length in bytes of the dead letter's payload,
// or of its stored bytes when it could not be decoded: whole, though
// ListCut cut them.
func (d CutDeadEntry) PayloadSize() int {
	if !d.Decoded {
		return d.RawSize
	}
	// A cut envelope decodes whole but for its payload (internal/wire:
	// the payload is its last field): the bytes cut are the payload's.
	return d.RawSize - len(d.Raw) + len(d.Envelope.Payload)
}

// At returns when the entry was dead-lettered (Redis clock).
func (d DeadEntry) At() time.Time { return stream.EntryTime(d.EntryID) }

// Letter is a dead letter as the public API shows it: the message's
// fields flat. delaystream.DeadLetter has the same fields, so that one
// converts into the other.
type Letter struct {
	EntryID    string            `json:"entry_id"`
	Shard      int               `json:"shard"`
	At         time.Time         `json:"at"`
	ID         string            `json:"id"`
	Reason     string            `json:"reason"`
	LastError  string            `json:"last_error"`
	Attempt    int               `json:"attempt"`
	Deliveries int64             `json:"deliveries"`
	Source     string            `json:"source"`
	SourceID   string            `json:"source_id"`
	Decoded    bool              `json:"decoded"`
	Due        time.Time         `json:"due,omitzero"`
	Created    time.Time         `json:"created,omitzero"`
	Deadline   time.Time         `json:"deadline,omitzero"`
	Headers    map[string]string `json:"headers,omitempty"`
	Size       int               `json:"size"`
	Payload    []byte            `json:"payload"`
}

// Letter returns d as the public API shows it: Payload is the message's
// payload, or the stored bytes when they could not be decoded.
func (d DeadEntry) Letter() Letter {
	l := Letter{EntryID: d.EntryID, Shard: d.Shard, At: d.At(), ID: d.Envelope.ID, Reason: d.Reason,
		LastError: d.LastError, Attempt: d.Attempt, Deliveries: d.Deliveries, Source: d.Source,
		SourceID: d.SourceID, Decoded: d.Decoded}
	payload := d.Envelope.Payload
	if d.Decoded {
		l.Due, l.Created, l.Deadline, l.Headers = d.Envelope.Due, d.Envelope.Created, d.Envelope.Deadline, d.Envelope.Headers
	} else {
		payload = d.Raw
	}
	l.Size, l.Payload = len(payload), payload
	return l
}

// NewDeadLetters returns the dead-letter handle of group on queue, for
// tools that run no Consumer. Only WithPrefix and WithShards among the
// options matter.
func NewDeadLetters(rdb redis.UniversalClient, queue, group string, opts ...Option) (*DeadLetters, error) {
	layout, err := resolve(rdb, queue, group, opts)
	if err != nil {
		return nil, err
	}
	return newDeadLetters(rdb, layout, group), nil
}

// Key returns the dead-letter stream's key (shard 0's on a sharded queue;
// see Keys).
func (d *DeadLetters) Key() string { return d.shards[0].key }

// Keys returns the dead-letter stream's key of every shard, by shard.
func (d *DeadLetters) Keys() []string {
	out := make([]string, len(d.shards))
	for i, sh := range d.shards {
		out[i] = sh.key
	}
	return out
}

// Len returns how many dead letters there are.
func (d *DeadLetters) Len(ctx context.Context) (int64, error) {
	pipe := d.rdb.Pipeline()
	cmds := make([]*redis.IntCmd, len(d.shards))
	for i, sh := range d.shards {
		cmds[i] = pipe.XLen(ctx, sh.key)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, fmt.Errorf("dead letters %s: %w", d.group, d.explain(ctx, err))
	}
	var n int64
	for _, c := range cmds {
		n += c.Val()
	}
	return n, nil
}

// List returns up to count dead letters, oldest first, after entry id after
// ("" for the start). Pass the last EntryID returned to get the next page.
// On a sharded queue the shards are merged in (entry id, shard) order.
func (d *DeadLetters) List(ctx context.Context, after string, count int64) ([]DeadEntry, error) {
	return d.list(ctx, after, count, false)
}

// ListNewest is [DeadLetters.List] newest first: up to count dead letters
// older than entry id before ("" for the newest). Pass the last EntryID
// returned to get the next (older) page.
func (d *DeadLetters) ListNewest(ctx context.Context, before string, count int64) ([]DeadEntry, error) {
	return d.list(ctx, before, count, true)
}

func (d *DeadLetters) list(ctx context.Context, after string, count int64, newest bool) ([]DeadEntry, error) {
	firsts, last, err := d.bounds(after, count, newest)
	if err != nil {
		return nil, err
	}
	pipe := d.rdb.Pipeline()
	cmds := make([]*redis.XMessageSliceCmd, len(d.shards))
	for i, sh := range d.shards {
		if newest {
			cmds[i] = pipe.XRevRangeN(ctx, sh.key, firsts[i], last, count)
		} else {
			cmds[i] = pipe.XRangeN(ctx, sh.key, firsts[i], last, count)
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("dead letters %s: %w", d.group, d.explain(ctx, err))
	}
	var out []DeadEntry
	for i, cmd := range cmds {
		for _, m := range cmd.Val() {
			out = append(out, d.parse(i, m))
		}
	}
	return mergeShards(out, len(d.shards) > 1, count, newest, func(e *DeadEntry) *DeadEntry { return e }), nil
}

// ListCut is [DeadLetters.List] (with newest, [DeadLetters.ListNewest])
// for listings that show a preview of each
// payload: each entry's Raw holds at most its envelope's headers and the
// first maxPayload bytes of its payload (at most maxPayload bytes when it
// is no envelope), and so does Envelope.Payload; RawSize and
// [CutDeadEntry.PayloadSize] say how long they are. The cut is made in Redis
// by a read-only script (xrange_cut.lua: XRANGE or XREVRANGE, per shard, in one
// pipeline), so neither the network nor this process ever carries a whole
// payload. maxPayload must be at least 1.
func (d *DeadLetters) ListCut(ctx context.Context, after string, count int64, maxPayload int, newest bool) ([]CutDeadEntry, error) {
	if maxPayload < 1 {
		return nil, fmt.Errorf("%w: max payload bytes must be >= 1, got %d", ErrInvalidOption, maxPayload)
	}
	firsts, last, err := d.bounds(after, count, newest)
	if err != nil {
		return nil, err
	}
	calls := make([]scripts.Call, len(d.shards))
	for i, sh := range d.shards {
		calls[i] = scripts.Call{Keys: []string{sh.key}, Args: []any{firsts[i], last, count, maxPayload}}
		if newest {
			calls[i].Args = append(calls[i].Args, "rev")
		}
	}
	cmds, err := scripts.RunPipelined(ctx, d.rdb, scripts.XRangeCut, calls)
	if err != nil {
		return nil, fmt.Errorf("dead letters %s: %w", d.group, err)
	}
	var out []CutDeadEntry
	for i, cmd := range cmds {
		if err := cmd.Err(); err != nil {
			return nil, fmt.Errorf("dead letters %s: %w", d.group, d.explain(ctx, err))
		}
		entries, err := stream.ParseCutEntries(cmd.Val())
		if err != nil {
			return nil, fmt.Errorf("dead letters %s: %w", d.group, err)
		}
		for _, e := range entries {
			dl := CutDeadEntry{DeadEntry: d.parse(i, e.Message)}
			if n, ok := e.Sizes[wire.FieldEnvelope]; ok { // parse keeps "e" as Raw, else "p"
				dl.RawSize = n
			} else if n, ok := e.Sizes[wire.FieldPacked]; ok {
				dl.RawSize = n
			}
			out = append(out, dl)
		}
	}
	return mergeShards(out, len(d.shards) > 1, count, newest, func(e *CutDeadEntry) *DeadEntry { return &e.DeadEntry }), nil
}

// bounds returns where a listing reads each shard's dead letters from,
// after entry id after ("" for the start) in the listing's order ((entry
// id, shard), descending when newest), and where it reads to: the first
// and last bounds of each shard's XRANGE, or XREVRANGE when newest.
func (d *DeadLetters) bounds(after string, count int64, newest bool) ([]string, string, error) {
	if count < 1 {
		return nil, "", fmt.Errorf("%w: count must be >= 1, got %d", ErrInvalidOption, count)
	}
	afterID, afterShard := "", -1
	if after != "" {
		ref, err := d.parseRef(after)
		if err != nil {
			return nil, "", fmt.Errorf("dead letters %s: %w", d.group, err)
		}
		afterID, afterShard = ref.id, ref.shard
	}
	first, last := "-", "+"
	if newest {
		first, last = "+", "-"
	}
	firsts := make([]string, len(d.shards))
	for i := range d.shards {
		firsts[i] = first
		switch {
		case afterID == "":
		case i == afterShard, (i < afterShard) != newest:
			// The entry's own shard, or one whose entry with the same id
			// comes before it in the listing's order: strictly after.
			firsts[i] = "(" + afterID
		default: // a shard whose entry with the same id comes after it
			firsts[i] = afterID
		}
	}
	return firsts, last, nil
}

// mergeShards orders the dead letters read from every shard (of a
// sharded queue) in (entry id, shard) order, descending when newest, and
// keeps the first count; entry returns the dead letter of an item of out.
func mergeShards[T any](out []T, sharded bool, count int64, newest bool, entry func(*T) *DeadEntry) []T {
	if sharded {
		slices.SortStableFunc(out, func(a, b T) int {
			ea, eb := entry(&a), entry(&b)
			c := compareIDs(ea.EntryID, eb.EntryID)
			if c == 0 {
				c = ea.Shard - eb.Shard
			}
			if newest {
				return -c
			}
			return c
		})
	}
	if int64(len(out)) > count {
		out = out[:count]
	}
	return out
}

// Get returns one dead letter, or [ErrNotFound].
func (d *DeadLetters) Get(ctx context.Context, entryID string) (DeadEntry, error) {
	ref, err := d.parseRef(entryID)
	if err != nil {
		return DeadEntry{}, fmt.Errorf("dead letter: %w", err)
	}
	msgs, err := d.rdb.XRangeN(ctx, d.shards[ref.shard].key, ref.id, ref.id, 1).Result()
	if err != nil {
		return DeadEntry{}, fmt.Errorf("dead letter %s: %w", entryID, d.explain(ctx, err))
	}
	if len(msgs) == 0 {
		return DeadEntry{}, fmt.Errorf("dead letter %s: %w", entryID, ErrNotFound)
	}
	return d.parse(ref.shard, msgs[0]), nil
}

// parse reads a dead letter of shard i, naming it as List returns it.
func (d *DeadLetters) parse(i int, m redis.XMessage) DeadEntry {
	e := parseDeadLetter(m)
	e.Shard = i
	if len(d.shards) > 1 {
		e.EntryID += "@" + strconv.Itoa(i)
	}
	return e
}

// deadRef is a dead letter's entry id split into stream id and shard.
type deadRef struct {
	id    string
	shard int
}

// parseRef splits an entry id as List returns it: "<ms>-<seq>", followed
// on a sharded queue (and only there) by "@<shard>".
func (d *DeadLetters) parseRef(s string) (deadRef, error) {
	id, sh, qualified := strings.Cut(s, "@")
	if err := validEntryIDs([]string{id}); err != nil {
		return deadRef{}, err
	}
	if len(d.shards) == 1 {
		if qualified {
			return deadRef{}, fmt.Errorf("%w: %q: the queue is not sharded; dead-letter ids are <ms>-<seq>", ErrInvalidOption, s)
		}
		return deadRef{id: id}, nil
	}
	n, err := strconv.Atoi(sh)
	if !qualified || err != nil || n < 0 || n >= len(d.shards) || strconv.Itoa(n) != sh {
		return deadRef{}, fmt.Errorf("%w: %q: a sharded queue's dead-letter ids are <ms>-<seq>@<shard> (shard 0 to %d), as List returns them",
			ErrInvalidOption, s, len(d.shards)-1)
	}
	return deadRef{id: id, shard: n}, nil
}

// parseRefs splits entry ids, failing on the first that is not valid.
func (d *DeadLetters) parseRefs(entryIDs []string) ([]deadRef, error) {
	refs := make([]deadRef, len(entryIDs))
	for i, s := range entryIDs {
		ref, err := d.parseRef(s)
		if err != nil {
			return nil, err
		}
		refs[i] = ref
	}
	return refs, nil
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

// RedriveError lists dead letters Redrive could not move back. It matches
// [ErrNotFound] (errors.Is) when some were not found.
type RedriveError struct {
	Group         string   // the group whose dead letters they are
	NotFound      []string // no such dead letter (already redriven or purged)
	Unrecoverable []string // no valid envelope (undecodable or deleted entries); left in place
}

// Error implements error: "delaystream: redrive <group>: 1 not found
// (<ids>); 2 unrecoverable, no message to redrive: purge them (<ids>)",
// naming up to 5 ids of each kind.
func (e *RedriveError) Error() string {
	var parts []string
	if len(e.NotFound) > 0 {
		parts = append(parts, fmt.Sprintf("%d not found (%s)", len(e.NotFound), someIDs(e.NotFound)))
	}
	if len(e.Unrecoverable) > 0 {
		parts = append(parts, fmt.Sprintf("%d unrecoverable, no message to redrive: purge them (%s)",
			len(e.Unrecoverable), someIDs(e.Unrecoverable)))
	}
	return "delaystream: redrive " + e.Group + ": " + strings.Join(parts, "; ")
}

// Is makes a RedriveError with dead letters not found match [ErrNotFound].
func (e *RedriveError) Is(target error) bool {
	return target == ErrNotFound && len(e.NotFound) > 0
}

// someIDs joins the first 5 ids, saying how many more there are.
func someIDs(ids []string) string {
	const shown = 5
	if len(ids) <= shown {
		return strings.Join(ids, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(ids[:shown], ", "), len(ids)-shown)
}

// Redrive moves the given dead letters back to this group only: each is
// scheduled in the group's retry lane to be delivered after delay (by the
// Redis clock), with its attempt count reset to 1 and its deadline (if it
// had one) removed, and removed from the dead letters, atomically per
// entry. It returns how many were redriven and a
// [*RedriveError] naming those it could not move. Ids are checked before
// anything is written: one invalid id fails the call.
func (d *DeadLetters) Redrive(ctx context.Context, delay time.Duration, entryIDs ...string) (int, error) {
	if delay < 0 {
		return 0, fmt.Errorf("%w: negative redrive delay %s", ErrInvalidOption, delay)
	}
	if len(entryIDs) == 0 {
		return 0, nil
	}
	refs, err := d.parseRefs(entryIDs)
	if err != nil {
		return 0, fmt.Errorf("redrive %s: %w", d.group, err)
	}
	// Read the entries in one round trip: the new attempt's envelope is
	// encoded here (Lua cannot), the script re-checks each atomically.
	pipe := d.rdb.Pipeline()
	reads := make([]*redis.XMessageSliceCmd, len(refs))
	for i, ref := range refs {
		reads[i] = pipe.XRangeN(ctx, d.shards[ref.shard].key, ref.id, ref.id, 1)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, fmt.Errorf("redrive %s: %w", d.group, d.explain(ctx, err))
	}
	dls := make(map[string]DeadEntry, len(entryIDs))
	for i, id := range entryIDs {
		if msgs := reads[i].Val(); len(msgs) == 1 {
			dls[id] = d.parse(refs[i].shard, msgs[0])
		}
	}
	return d.redrive(ctx, delay, entryIDs, refs, dls)
}

// redrive runs the redrive script for entryIDs (split into refs), one call
// per shard; the entries that exist are in dls.
func (d *DeadLetters) redrive(ctx context.Context, delay time.Duration, entryIDs []string, refs []deadRef, dls map[string]DeadEntry) (int, error) {
	n := 0
	rerr := RedriveError{Group: d.group}
	for shard := range d.shards {
		var names []string
		var args []any
		for i, ref := range refs {
			if ref.shard != shard {
				continue
			}
			if args == nil {
				retry := d.shards[shard].retry
				args = []any{delay.Milliseconds(), scripts.Channel(retry.Wake, retry.Sharded), wire.Header}
			}
			env := ""
			if dl, ok := dls[entryIDs[i]]; ok && dl.Decoded {
				e := dl.Envelope
				e.Attempt = 1
				// Redriving is a decision to deliver: an expired message
				// would expire again at once.
				e.Deadline = time.Time{}
				env = string(wire.MarshalEnvelope(&e))
			}
			names = append(names, entryIDs[i])
			args = append(args, ref.id, env)
		}
		if names == nil {
			continue
		}
		sh := d.shards[shard]
		v, err := scripts.Redrive.Run(ctx, d.rdb, []string{sh.key, sh.retry.Delayed, sh.retry.Envelopes}, args...).Int64Slice()
		if err != nil {
			return n, fmt.Errorf("redrive %s: %w", d.group, d.explain(ctx, scripts.Explain(err)))
		}
		for i, s := range v {
			switch s {
			case 1:
				n++
			case 0:
				rerr.NotFound = append(rerr.NotFound, names[i])
			default:
				rerr.Unrecoverable = append(rerr.Unrecoverable, names[i])
			}
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
	all := RedriveError{Group: d.group}
	for shard, sh := range d.shards {
		n, err := d.redriveShard(ctx, delay, shard, sh.key, &all)
		total += n
		if err != nil {
			return total, err
		}
	}
	if len(all.Unrecoverable) > 0 {
		return total, &all
	}
	return total, nil
}

// redriveShard redrives the dead letters of one shard present when it
// starts, adding the unrecoverable ones to all.
func (d *DeadLetters) redriveShard(ctx context.Context, delay time.Duration, shard int, key string, all *RedriveError) (int, error) {
	last, err := d.rdb.XRevRangeN(ctx, key, "+", "-", 1).Result()
	if err != nil || len(last) == 0 {
		if err != nil {
			err = fmt.Errorf("redrive all %s: %w", d.group, d.explain(ctx, err))
		}
		return 0, err
	}
	end := last[0].ID
	start, total := "-", 0
	for {
		msgs, err := d.rdb.XRangeN(ctx, key, start, end, 100).Result()
		if err != nil {
			return total, fmt.Errorf("redrive all %s: %w", d.group, d.explain(ctx, err))
		}
		if len(msgs) == 0 {
			return total, nil
		}
		ids := make([]string, len(msgs))
		refs := make([]deadRef, len(msgs))
		dls := make(map[string]DeadEntry, len(msgs))
		for i, m := range msgs {
			e := d.parse(shard, m)
			ids[i], refs[i], dls[e.EntryID] = e.EntryID, deadRef{id: m.ID, shard: shard}, e
		}
		n, err := d.redrive(ctx, delay, ids, refs, dls) // the page is already read
		total += n
		var re *RedriveError
		if errors.As(err, &re) {
			all.Unrecoverable = append(all.Unrecoverable, re.Unrecoverable...)
		} else if err != nil {
			return total, err
		}
		if len(msgs) < 100 {
			return total, nil
		}
		start = "(" + msgs[len(msgs)-1].ID
	}
}

// Purge deletes the given dead letters and returns how many existed. Ids
// are checked before anything is deleted: one invalid id fails the call.
func (d *DeadLetters) Purge(ctx context.Context, entryIDs ...string) (int64, error) {
	if len(entryIDs) == 0 {
		return 0, nil
	}
	refs, err := d.parseRefs(entryIDs)
	if err != nil {
		return 0, fmt.Errorf("purge %s: %w", d.group, err)
	}
	byShard := map[int][]string{}
	for _, ref := range refs {
		byShard[ref.shard] = append(byShard[ref.shard], ref.id)
	}
	pipe := d.rdb.Pipeline()
	cmds := make([]*redis.IntCmd, 0, len(byShard))
	for shard, ids := range byShard {
		cmds = append(cmds, pipe.XDel(ctx, d.shards[shard].key, ids...))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, fmt.Errorf("purge %s: %w", d.group, d.explain(ctx, err))
	}
	var n int64
	for _, c := range cmds {
		n += c.Val()
	}
	return n, nil
}

// PurgeAll deletes every dead letter of the group.
func (d *DeadLetters) PurgeAll(ctx context.Context) error {
	pipe := d.rdb.Pipeline()
	for _, sh := range d.shards {
		pipe.Del(ctx, sh.key)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("purge all %s: %w", d.group, d.explain(ctx, err))
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
	id, _, _ = strings.Cut(id, "@") // a sharded queue's "<ms>-<seq>@<shard>"
	i := strings.IndexByte(id, '-')
	if i < 0 {
		ms, _ := strconv.ParseUint(id, 10, 64)
		return ms, 0
	}
	ms, _ := strconv.ParseUint(id[:i], 10, 64)
	seq, _ := strconv.ParseUint(id[i+1:], 10, 64)
	return ms, seq
}

// ParseDeadLetter decodes dead-letter entry m as the dead letters' reads
// do, for callers that read entries themselves.
func ParseDeadLetter(m redis.XMessage) DeadEntry { return parseDeadLetter(m) }
