package delaystream

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/delaystream/delaystream/internal/delay"
	"github.com/delaystream/delaystream/internal/optcheck"
	"github.com/delaystream/delaystream/internal/recur"
)

// Spec says when a recurring schedule fires. [Every] is built in; a cron
// spec comes from the contrib/cron module. A Spec must be pure: every
// process computes the same occurrences from it.
type Spec interface {
	// Next returns the first occurrence strictly after t, or the zero
	// time when there is none.
	Next(t time.Time) time.Time
	// Kind names the spec's parser ("every", "cron"): a process computes
	// the occurrences of the kinds it knows (see [WithSpecParser]).
	Kind() string
	// String is the spec's text, which its kind's parser reads back.
	String() string
}

// Every returns the spec firing at every multiple of d since the Unix
// epoch (UTC): Every(time.Minute) fires at each minute's start, Every(30 *
// time.Second) at :00 and :30, whatever process computes it, with no
// anchor to agree on. d must be a whole number of milliseconds and at
// least 1 s; [Queue.DefineRecurring] refuses another (wrapping
// [ErrInvalidMessage]). An interval that does not divide a day drifts
// against the wall clock's days; use a cron spec for calendar times.
func Every(d time.Duration) Spec { return recur.Every{D: d} }

// MissedPolicy says what happens to the occurrences of a schedule that
// fell while no process topped it up (every process was down): those
// found more than about 5 s late.
type MissedPolicy int

// The missed policies.
const (
	// SkipMissed (the default) skips them: the schedule goes on with its
	// next occurrence.
	SkipMissed MissedPolicy = iota
	// FireMissedOnce fires the latest of them once, at once, then goes on.
	FireMissedOnce
)

// String returns the policy's name: "skip" or "fire-once".
func (p MissedPolicy) String() string {
	switch p {
	case SkipMissed:
		return "skip"
	case FireMissedOnce:
		return "fire-once"
	}
	return fmt.Sprintf("MissedPolicy(%d)", int(p))
}

// ParseMissedPolicy returns the policy named s ("skip" or "fire-once").
func ParseMissedPolicy(s string) (MissedPolicy, error) {
	for _, p := range []MissedPolicy{SkipMissed, FireMissedOnce} {
		if p.String() == s {
			return p, nil
		}
	}
	return 0, fmt.Errorf("%w: missed policy %q: want skip or fire-once", ErrInvalidOption, s)
}

// The headers every occurrence of a recurring schedule carries.
const (
	// HeaderSchedule holds the schedule's id.
	HeaderSchedule = recur.HeaderSchedule
	// HeaderOccurrence holds the occurrence's time, RFC 3339 in UTC with
	// milliseconds ("2026-11-28T09:00:00.000Z"): when it was meant to
	// fire, whenever it was delivered.
	HeaderOccurrence = recur.HeaderOccurrence
)

// Recurring is a recurring schedule: a message delivered at every
// occurrence of Spec. Each occurrence is a message of the queue with the
// id "<ID>@<unix ms>#<revision>", the schedule's payload and headers, and
// the headers [HeaderSchedule] and [HeaderOccurrence]; every group gets it
// once, as any message.
type Recurring struct {
	// ID names the schedule in its queue: 1 to 200 bytes of UTF-8 without
	// control characters.
	ID string
	// Spec says when it fires: [Every], or a spec of a kind registered
	// with [WithSpecParser] (contrib/cron).
	Spec Spec
	// Payload and Headers are each occurrence's (with the queue's limits
	// of [Message]).
	Payload []byte
	Headers map[string]string
	// Missed is the missed-occurrence policy. Default [SkipMissed].
	Missed MissedPolicy
	// Version orders the schedule's definitions, e.g. the build number of
	// the program defining it: [Queue.DefineRecurring] with a lower
	// Version than the stored definition's writes nothing and returns
	// [OutcomeKept], so a process of an older build that (re)starts during or
	// after a rollout cannot bring its definition back. With the same
	// Version, definitions compare by content as they do without one. 0,
	// the default, is the lowest: once a schedule is stored with a
	// Version, a definition without one is kept out too. Deleting the
	// schedule forgets its Version.
	Version uint64
}

// RecurringStatus is a recurring schedule as [Queue.GetRecurring] and
// [Queue.ListRecurring] report it.
type RecurringStatus struct {
	// Recurring is the definition. Its Spec is nil when this process has
	// no parser of its kind; SpecKind and SpecText describe it anyway.
	Recurring
	SpecKind, SpecText string
	// Revision counts the schedule's changes (definitions, pauses,
	// resumes); occurrence ids carry it.
	Revision int64
	Paused   bool
	// Next is the next occurrence; zero when paused.
	Next time.Time
	// Last is the latest occurrence due so far; zero when none.
	Last time.Time
	// LastFired is when Last was appended to the queue's stream (the
	// Redis clock): when it was promoted. The promoting script keeps it
	// with the schedule, so it is known whatever the trimming. Zero when
	// not known: not promoted yet, or promoted by a version that did not
	// keep it and its entry trimmed (such an entry is read from the
	// stream while it is there).
	LastFired time.Time
	// LastWritten is when Last was written to the queue (the Redis
	// clock), kept with the schedule whatever the trimming: before Last
	// when it was written ahead (the usual case: top-ups write
	// occurrences up to the horizon ahead), at or after it when it was
	// written late (fired by [FireMissedOnce] after every process was
	// down, or top-ups running late). Zero when not known (written by a
	// version that did not record it).
	LastWritten time.Time
}

// Lateness returns how late the last occurrence was appended to the
// queue's stream after its time (Last), by the Redis clock, and whether
// that is known: LastFired - Last when LastFired is known; otherwise,
// for an occurrence written late, LastWritten - Last, which it was late
// by at least (it was appended right after it was written); otherwise
// (written ahead, appended when not known) false.
func (s RecurringStatus) Lateness() (time.Duration, bool) {
	switch {
	case s.Last.IsZero():
		return 0, false
	case !s.LastFired.IsZero():
		return s.LastFired.Sub(s.Last), true
	case !s.LastWritten.IsZero() && !s.LastWritten.Before(s.Last):
		return s.LastWritten.Sub(s.Last), true
	}
	return 0, false
}

// WithSpecParser registers a spec kind: parse reads a spec of that kind
// from its text (Spec.String), so that this process computes the
// occurrences of the schedules defined with it, whoever defined them.
// contrib/cron's Option registers "cron". A process that meets a kind it
// has no parser of warns once and leaves those schedules to the processes
// that have one. "every" is built in and cannot be replaced.
func WithSpecParser(kind string, parse func(text string) (Spec, error)) Option {
	return func(c *config) error {
		switch {
		case kind == "" || parse == nil:
			return fmt.Errorf("%w: spec parser: empty kind or nil parser", ErrInvalidOption)
		case kind == recur.KindEvery:
			return fmt.Errorf("%w: spec parser: kind %q is built in", ErrInvalidOption, kind)
		}
		if c.parsers == nil {
			c.parsers = map[string]recur.Parser{}
		}
		c.parsers[kind] = func(text string) (recur.Spec, error) { return parse(text) }
		return nil
	}
}

// WithRecurringHorizon sets how far ahead the occurrences of recurring
// schedules are written to the queue (1 s to 24 h; default 1 min; always
// at least the next occurrence). Every running Queue that promotes (not
// built [WithoutPromotion]) checks the schedules every quarter of it (at
// most 15 s apart) and tops up those whose next unwritten occurrence has
// come within it, so a schedule keeps firing while at least one such
// process runs, and up to a horizon after the last one stopped. A change of a schedule removes its waiting occurrences due
// after the change.
func WithRecurringHorizon(d time.Duration) Option {
	return func(c *config) error {
		c.horizon = d
		return optcheck.Range(ErrInvalidOption, "recurring horizon", d, time.Second, 24*time.Hour)
	}
}

// maxScheduleID bounds a schedule id, so that its occurrence ids fit the
// message id limit.
const maxScheduleID = 200

// DefineRecurring creates or updates the recurring schedule r.ID and
// writes its first occurrences. It returns [OutcomeCreated] for a new schedule,
// [OutcomeKept] when the same definition (spec, payload, headers, missed policy,
// version) is already stored, or one with a higher [Recurring].Version
// (nothing changes, whoever defined it), and
// [OutcomeReplaced] for an update: it takes effect at once, as a new revision
// (its occurrences come after the call; waiting occurrences of the old
// definition due after it are removed). A paused schedule stays paused
// when updated. Any number of processes may define the same schedule
// at once: each occurrence is still created once. An invalid definition
// is refused with [ErrInvalidMessage] and nothing is written.
func (q *Queue) DefineRecurring(ctx context.Context, r Recurring) (Outcome, error) {
	d, err := q.recurringDef(r)
	if err != nil {
		return OutcomeUnknown, err
	}
	code, err := q.recur.Define(ctx, r.ID, d)
	if err != nil {
		return OutcomeUnknown, fmt.Errorf("define recurring %s: %w", r.ID, err)
	}
	switch code {
	case recur.Created:
		return OutcomeCreated, nil
	case recur.Unchanged, recur.Older:
		return OutcomeKept, nil
	}
	return OutcomeReplaced, nil
}

func (q *Queue) recurringDef(r Recurring) (recur.Def, error) {
	if err := delay.ValidateID(r.ID); err != nil || len(r.ID) > maxScheduleID {
		return recur.Def{}, fmt.Errorf("%w: schedule id %q: 1 to %d bytes of UTF-8 without control characters", ErrInvalidMessage, r.ID, maxScheduleID)
	}
	if r.Spec == nil {
		return recur.Def{}, fmt.Errorf("%w: schedule %s: nil spec", ErrInvalidMessage, r.ID)
	}
	if r.Missed < SkipMissed || r.Missed > FireMissedOnce {
		return recur.Def{}, fmt.Errorf("%w: schedule %s: unknown missed policy %d", ErrInvalidMessage, r.ID, r.Missed)
	}
	kind, text := r.Spec.Kind(), r.Spec.String()
	parse, ok := q.recur.Parser(kind)
	if !ok {
		return recur.Def{}, fmt.Errorf("%w: schedule %s: spec kind %q has no parser in this queue (WithSpecParser)", ErrInvalidMessage, r.ID, kind)
	}
	if _, err := parse(text); err != nil {
		return recur.Def{}, fmt.Errorf("%w: schedule %s: spec %q: %w", ErrInvalidMessage, r.ID, text, err)
	}
	if err := q.producer.Validate(delay.Message{ID: recur.OccurrenceID(r.ID, 0, 0), Payload: r.Payload, Headers: r.Headers}); err != nil {
		return recur.Def{}, fmt.Errorf("schedule %s: %w", r.ID, err)
	}
	return recur.Def{Version: r.Version, Kind: kind, Spec: text, Payload: r.Payload, Headers: r.Headers, Missed: recur.Missed(r.Missed)}, nil
}

// PauseRecurring pauses schedule id: it fires no more until
// [Queue.ResumeRecurring], and its waiting occurrences not yet due are
// removed. Pausing a paused schedule does nothing; an unknown one gives an
// error wrapping [ErrNotFound].
func (q *Queue) PauseRecurring(ctx context.Context, id string) error {
	return q.changeRecurring(ctx, id, "p", "pause")
}

// ResumeRecurring resumes the paused schedule id from its next
// occurrence after the call (those that fell while it was paused are not
// fired). Resuming an active schedule does nothing; an unknown one gives
// an error wrapping [ErrNotFound].
func (q *Queue) ResumeRecurring(ctx context.Context, id string) error {
	return q.changeRecurring(ctx, id, "r", "resume")
}

// DeleteRecurring deletes schedule id and removes its waiting occurrences
// not yet due. An unknown one gives an error wrapping [ErrNotFound]. A
// schedule defined again later with the same id starts anew.
func (q *Queue) DeleteRecurring(ctx context.Context, id string) error {
	return q.changeRecurring(ctx, id, "x", "delete")
}

func (q *Queue) changeRecurring(ctx context.Context, id, op, verb string) error {
	code, err := q.recur.Change(ctx, id, op)
	switch {
	case err != nil:
		return fmt.Errorf("%s recurring %s: %w", verb, id, err)
	case code == recur.NotFound:
		return fmt.Errorf("%s recurring %s: %w", verb, id, ErrNotFound)
	}
	return nil
}

// GetRecurring returns schedule id with its next and last occurrence. An
// unknown one gives an error wrapping [ErrNotFound].
func (q *Queue) GetRecurring(ctx context.Context, id string) (RecurringStatus, error) {
	st, err := q.recur.Status(ctx, id)
	if errors.Is(err, recur.ErrNotFound) {
		return RecurringStatus{}, fmt.Errorf("get recurring %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return RecurringStatus{}, fmt.Errorf("get recurring %s: %w", id, err)
	}
	return recurringStatus(st), nil
}

// ListRecurring returns every schedule of the queue, by id.
func (q *Queue) ListRecurring(ctx context.Context) ([]RecurringStatus, error) {
	ids, err := q.recur.IDs(ctx)
	if err != nil {
		return nil, fmt.Errorf("list recurring: %w", err)
	}
	out := make([]RecurringStatus, 0, len(ids))
	for _, id := range ids {
		st, err := q.recur.Status(ctx, id)
		if errors.Is(err, recur.ErrNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return out, fmt.Errorf("list recurring: %w", err)
		}
		out = append(out, recurringStatus(st))
	}
	return out, nil
}

func recurringStatus(st recur.Status) RecurringStatus {
	r := RecurringStatus{
		Recurring: Recurring{ID: st.ID, Payload: st.Def.Payload, Headers: st.Def.Headers, Missed: MissedPolicy(st.Def.Missed),
			Version: st.Def.Version},
		SpecKind: st.Def.Kind, SpecText: st.Def.Spec, Revision: st.Revision, Paused: st.Paused,
		Next: st.Next, Last: st.Last, LastFired: st.LastFired, LastWritten: st.LastWritten,
	}
	if st.Spec != nil {
		r.Spec = st.Spec
	}
	return r
}
