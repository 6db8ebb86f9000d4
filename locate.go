package delaystream

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream/codec"
	"github.com/delaystream/delaystream/internal/delay"
	"github.com/delaystream/delaystream/internal/group"
	"github.com/delaystream/delaystream/internal/scripts"
	"github.com/delaystream/delaystream/internal/stream"
	"github.com/delaystream/delaystream/internal/wire"
)

// LocateScanLimit is how many entries [Queue.Locate] reads at most from
// each stream it searches (and members from each retry lane): a message
// beyond it may be missed, and [Location].Partial says so.
const LocateScanLimit = 10000

// LocateBatch is how many stream entries and retry lane members, all
// places together, one call of [Queue.Locate]'s script reads at most: a
// search that reads more goes on in further calls, so that each call
// keeps Redis busy for a short, bounded time whatever the streams' length.
const LocateBatch = 500

// PlaceKind is what a [Place] of a message is.
type PlaceKind string

// The kinds of places of a message ([Place].Kind).
const (
	// PlaceWaiting: waiting in the queue to be due.
	PlaceWaiting PlaceKind = "waiting"
	// PlaceUnread: in the queue's stream while the queue has no consumer
	// group: the first group created gets it.
	PlaceUnread PlaceKind = "unread"
	// PlaceReady: in the stream, not yet delivered to the group.
	PlaceReady PlaceKind = "ready"
	// PlacePending: delivered to a consumer of the group, not yet
	// acknowledged.
	PlacePending PlaceKind = "pending"
	// PlaceRetrying: failed, waiting in the group's retry lane for its
	// next attempt.
	PlaceRetrying PlaceKind = "retrying"
	// PlaceDeadLettered: in the group's dead letters.
	PlaceDeadLettered PlaceKind = "dead-lettered"
	// PlaceHandled: handled by the group (its handler succeeded, or
	// dropped it), as recorded by a group that keeps records
	// ([WithHandledRecords]).
	PlaceHandled PlaceKind = "handled"
	// PlaceQuarantined: set aside in a quarantine, the queue's (Group
	// "") or a group's retry lane's.
	PlaceQuarantined PlaceKind = "quarantined"
)

// Location is every place a message id is found in a queue
// ([Queue.Locate]). A message handled by every group (acknowledged,
// dropped, or trimmed away) is found nowhere ([Location.Found] is false),
// unless a group keeps records of what it handled ([WithHandledRecords]):
// it is then listed as [PlaceHandled] in that group.
type Location struct {
	ID    string `json:"id"`
	Shard int    `json:"shard"` // the shard its id belongs to (searched alone)
	// Places are where it is: waiting first, then unread entries, then its
	// places in the consumer groups, by group, then entry, then its
	// quarantine entries. A group that has handled it is listed only with
	// a record of it ([PlaceHandled]).
	Places []Place `json:"places,omitempty"`
	// Partial is set when a stream or retry lane held more than
	// [LocateScanLimit] entries: places beyond them were not searched.
	Partial bool `json:"partial,omitempty"`
}

// Found reports whether the message was found anywhere.
func (l Location) Found() bool { return len(l.Places) > 0 }

// Place is one place of a message in a queue; which fields are set
// depends on its Kind.
type Place struct {
	Kind PlaceKind `json:"kind"`
	// Group is the consumer group of the place; "" for waiting, unread and
	// the queue's own quarantine.
	Group string `json:"group,omitempty"`
	// EntryID is the stream entry's id (unread, ready, pending), the dead
	// letter's (dead-lettered, "<ms>-<seq>@<shard>" on a sharded queue, as
	// dead-letter listings show it), the failed entry's (retrying) or the
	// quarantine entry's.
	EntryID   string `json:"entry_id,omitempty"`
	RetryLane bool   `json:"retry_lane,omitempty"` // the entry is in the group's retry lane's stream
	Attempt   int    `json:"attempt,omitempty"`    // the attempt waiting, delivered, or failed
	// Due is when it is due: a waiting message, or a retrying one's next
	// attempt.
	Due time.Time `json:"due,omitzero"`
	// Problem is set when a waiting message cannot be delivered as it is:
	// "missing envelope" (its envelope is gone, as after an eviction) or
	// "unknown envelope format". Promotion quarantines it when it is due.
	Problem string `json:"problem,omitempty"`
	// Pending: the consumer holding it, how often it was delivered, and
	// for how long it has been idle.
	Consumer   string        `json:"consumer,omitempty"`
	Deliveries int64         `json:"deliveries,omitempty"`
	Idle       time.Duration `json:"idle,omitempty"`
	// Dead-lettered and quarantined: why; dead-lettered: the last error.
	Reason    string `json:"reason,omitempty"`
	LastError string `json:"last_error,omitempty"`
	// Handled: when (Redis clock), whether it was dropped rather than
	// succeeded, and by which consumer (Consumer), at which attempt.
	HandledAt time.Time `json:"handled_at,omitzero"`
	Dropped   bool      `json:"dropped,omitempty"`
}

// Locate returns every place of message id in the queue: waiting (due,
// attempt), ready or pending in each group (consumer, deliveries, idle),
// waiting in a group's retry lane (next attempt), dead-lettered (reason,
// dead-letter id) or quarantined. It searches the id's shard only, with a
// read-only script that reads at most [LocateBatch] stream entries and
// retry lane members per call and returns where it stopped: one call when
// the shard's streams and retry lanes hold fewer entries than that in
// all, else one call per [LocateBatch] entries read, so that no call holds
// Redis long. Streams are searched by content, up to [LocateScanLimit]
// entries each (see [Location].Partial). Each call is atomic, the search
// as a whole is not: a message that moves while a search of many calls
// runs may be listed in its old place and its new one. The Queue
// remembers the groups the shards record, and the script searches those;
// when a shard records a group the Queue did not know of, the script
// names the groups instead, and Locate searches again with them (one call
// more, once per change of the groups). An invalid id is refused with
// [ErrInvalidMessage]. Safe for concurrent use.
func (q *Queue) Locate(ctx context.Context, id string) (Location, error) {
	return locate(ctx, q.rdb, q.layout, &q.located, id)
}

// groupNames holds the names of the groups a queue's shards record, as
// Locate last found them; safe for concurrent use.
type groupNames struct {
	p atomic.Pointer[[]string]
}

func (g *groupNames) load() []string {
	if p := g.p.Load(); p != nil {
		return *p
	}
	return nil
}

func (g *groupNames) store(names []string) { g.p.Store(&names) }

// locateTries bounds the searches of one Locate whose groups keep changing.
const locateTries = 3

func locate(ctx context.Context, rdb redis.UniversalClient, l *stream.Layout, known *groupNames, id string) (Location, error) {
	if err := delay.ValidateID(id); err != nil {
		return Location{}, fmt.Errorf("locate: %w", err)
	}
	shard := l.ShardOf(id)
	for range locateTries {
		groups := known.load()
		loc, recorded, err := searchShard(ctx, rdb, l, shard, id, groups)
		if err != nil {
			return Location{}, fmt.Errorf("locate %s: %w", id, err)
		}
		if recorded != nil {
			// The names known with those recorded: the shards of a queue
			// may record different groups, and a name the shard does not
			// hold is skipped, so none is dropped.
			known.store(union(groups, recorded))
			continue
		}
		return loc, nil
	}
	return Location{}, fmt.Errorf("locate %s: the groups of shard %d changed during each of %d searches", id, shard, locateTries)
}

// searchShard searches shard for id, naming groups: it calls the locate
// script until it has searched every place. recorded is non-nil when the
// shard records a group not named (the names it records); the search is
// then abandoned.
func searchShard(ctx context.Context, rdb redis.UniversalClient, l *stream.Layout, shard int, id string, groups []string) (loc Location, recorded []string, err error) {
	keys := l.Shard(shard)
	main := keys.Main()
	ks := make([]string, 0, 5+5*len(groups))
	ks = append(ks, keys.Groups(), main.Delayed, main.Envelopes, main.Stream, main.Quarantine)
	for _, g := range groups {
		r := keys.Retry(g)
		ks = append(ks, r.Delayed, r.Envelopes, r.Stream, r.Quarantine, keys.DeadLetters(g))
	}
	for _, g := range groups {
		records, _ := keys.Handled(g)
		ks = append(ks, records)
	}
	b := &locBuilder{Location: Location{ID: id, Shard: shard}}
	for cursor := ""; ; {
		args := make([]any, 0, 4+len(groups))
		args = append(args, id, LocateScanLimit, LocateBatch, cursor)
		for _, g := range groups {
			args = append(args, g)
		}
		reply, err := scripts.Locate.Run(ctx, rdb, ks, args...).Slice()
		if err != nil {
			return Location{}, nil, scripts.Explain(err)
		}
		if names, ok := changedGroups(reply); ok {
			return Location{}, names, nil
		}
		if cursor, err = b.addReply(l, reply); err != nil {
			return Location{}, nil, err
		}
		if cursor == "" {
			return b.location(), nil, nil
		}
	}
}

// handledPlace parses a handled record, "<ms>|<attempt>|<outcome>|<consumer>"
// (scripts/ack.lua), of group g.
func handledPlace(g, v string) (Place, bool) {
	parts := strings.SplitN(v, "|", 4)
	if len(parts) != 4 {
		return Place{}, false
	}
	ms, err1 := strconv.ParseInt(parts[0], 10, 64)
	attempt, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil || (parts[2] != "handled" && parts[2] != "dropped") {
		return Place{}, false
	}
	return Place{Kind: PlaceHandled, Group: g, HandledAt: time.UnixMilli(ms), Attempt: attempt,
		Dropped: parts[2] == "dropped", Consumer: parts[3]}, true
}

// union returns the sorted names of a and b, each once.
func union(a, b []string) []string {
	out := slices.Concat(a, b)
	slices.Sort(out)
	return slices.Compact(out)
}

// changedGroups returns the groups a locate reply names when the shard
// records a group the call did not name.
func changedGroups(reply []any) ([]string, bool) {
	if len(reply) != 2 || reply[0] != "groups" {
		return nil, false
	}
	list, _ := reply[1].([]any)
	names := make([]string, 0, len(list))
	for _, v := range list {
		if s, ok := v.(string); ok {
			names = append(names, s)
		}
	}
	slices.Sort(names)
	return names, true
}

// locBuilder gathers what the calls of one search find, by kind, for
// the Location's order.
type locBuilder struct {
	Location
	waiting     *Place
	unread      []Place
	groups      []Place
	quarantined []Place
}

// location returns the places found, in the Location's order.
func (loc *locBuilder) location() Location {
	l := loc.Location
	if loc.waiting != nil {
		l.Places = append(l.Places, *loc.waiting)
	}
	slices.SortStableFunc(loc.groups, func(a, b Place) int { return strings.Compare(a.Group, b.Group) })
	l.Places = slices.Concat(l.Places, loc.unread, loc.groups, loc.quarantined)
	return l
}

// addReply adds what one locate call found to loc and returns the
// cursor to go on with ("" when the search is done).
func (loc *locBuilder) addReply(l *stream.Layout, reply []any) (string, error) {
	if len(reply) != 4 {
		return "", fmt.Errorf("unexpected reply of %d items", len(reply))
	}
	if w := waitingPlace(reply[0]); w != nil {
		loc.waiting = w
	}
	if partial, _ := reply[1].(int64); partial == 1 {
		loc.Partial = true
	}
	found, _ := reply[2].([]any)
	for _, f := range found {
		loc.add(f, l.Shards() > 1)
	}
	cursor, _ := reply[3].(string)
	return cursor, nil
}

func waitingPlace(v any) *Place {
	w, _ := v.([]any)
	if len(w) != 2 {
		return nil
	}
	due, _ := w[0].(int64)
	p := &Place{Kind: PlaceWaiting, Due: time.UnixMilli(due)}
	raw, ok := w[1].(string)
	if !ok {
		p.Problem = "missing envelope"
		return p
	}
	var env codec.Envelope
	if err := wire.UnmarshalEnvelope([]byte(raw), &env); err != nil {
		p.Problem = "unknown envelope format"
		return p
	}
	p.Attempt = env.Attempt
	return p
}

// add records one place the script found: {where, group, entry id,
// fields, extra}.
func (loc *locBuilder) add(v any, sharded bool) {
	f, _ := v.([]any)
	if len(f) != 5 {
		return
	}
	where, _ := f[0].(string)
	g, _ := f[1].(string)
	eid := fmt.Sprint(f[2])
	fields := fieldMap(f[3])
	extra, _ := f[4].([]any)
	switch where {
	case "stream":
		attempt := entryAttempt(eid, fields)
		if len(extra) == 0 { // no group yet
			loc.unread = append(loc.unread, Place{Kind: PlaceUnread, EntryID: eid, Attempt: attempt})
		}
		for _, e := range extra {
			per, _ := e.([]any)
			if len(per) == 5 {
				name, _ := per[0].(string)
				loc.addEntry(name, eid, false, attempt, per[1:])
			}
		}
	case "retry-stream":
		loc.addEntry(g, eid, true, entryAttempt(eid, fields), extra)
	case "retry":
		loc.addRetry(g, eid, f[3])
	case "dead":
		loc.addDead(g, eid, fields, sharded)
	case "handled":
		if rec, ok := f[3].(string); ok {
			if p, ok := handledPlace(g, rec); ok {
				loc.groups = append(loc.groups, p)
			}
		}
	case "quarantine":
		r, _ := fields[wire.FieldReason].(string)
		loc.quarantined = append(loc.quarantined, Place{Kind: PlaceQuarantined, Group: g, EntryID: eid, Reason: r})
	}
}

// addEntry records stream entry eid of group g in state st: {state,
// consumer, idle ms, deliveries}. Handled entries are left out.
func (loc *locBuilder) addEntry(g, eid string, retry bool, attempt int, st []any) {
	if len(st) != 4 {
		return
	}
	state, _ := st[0].(string)
	p := Place{Group: g, EntryID: eid, RetryLane: retry, Attempt: attempt}
	switch state {
	case "pending":
		p.Kind = PlacePending
		p.Consumer, _ = st[1].(string)
		idle, _ := st[2].(int64)
		p.Idle = time.Duration(idle) * time.Millisecond
		p.Deliveries, _ = st[3].(int64)
	case "ready":
		p.Kind = PlaceReady
	default:
		return
	}
	loc.groups = append(loc.groups, p)
}

// addRetry records a retry lane member of group g due at score: fields
// are {member, envelope or nil}.
func (loc *locBuilder) addRetry(g, score string, v any) {
	mf, _ := v.([]any)
	p := Place{Kind: PlaceRetrying, Group: g}
	if ms, err := strconv.ParseFloat(score, 64); err == nil {
		p.Due = time.UnixMilli(int64(ms))
	}
	if len(mf) == 2 {
		member, _ := mf[0].(string)
		_, p.EntryID, _ = strings.Cut(member, wire.RetrySep)
		if raw, ok := mf[1].(string); ok {
			var env codec.Envelope
			if wire.UnmarshalEnvelope([]byte(raw), &env) == nil {
				p.Attempt = env.Attempt
			}
		}
	}
	loc.groups = append(loc.groups, p)
}

// addDead records dead letter eid of group g.
func (loc *locBuilder) addDead(g, eid string, fields map[string]any, sharded bool) {
	d := group.ParseDeadLetter(redis.XMessage{ID: eid, Values: fields})
	if sharded {
		eid += "@" + strconv.Itoa(loc.Shard)
	}
	loc.groups = append(loc.groups, Place{Kind: PlaceDeadLettered, Group: g, EntryID: eid,
		Attempt: d.Attempt, Deliveries: d.Deliveries, Reason: d.Reason, LastError: d.LastError})
}

// fieldMap turns a flat field list into the map go-redis gives entries.
func fieldMap(v any) map[string]any {
	flat, _ := v.([]any)
	m := make(map[string]any, len(flat)/2)
	for i := 0; i+1 < len(flat); i += 2 {
		if k, ok := flat[i].(string); ok {
			m[k] = flat[i+1]
		}
	}
	return m
}

// entryAttempt returns the attempt of a stream entry's envelope; 0 when
// it cannot be read.
func entryAttempt(eid string, fields map[string]any) int {
	e, err := wire.Decode("", eid, fields)
	if err != nil {
		return 0
	}
	return e.Envelope.Attempt
}
