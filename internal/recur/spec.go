package recur

import (
	"fmt"
	"time"
)

// Spec computes the occurrences of a schedule.
type Spec interface {
	// Next returns the first occurrence strictly after t, or the zero
	// time when there is none.
	Next(t time.Time) time.Time
	// Kind names the parser that reads String back ("every", "cron").
	Kind() string
	// String is the spec's text, as its kind's parser reads it.
	String() string
}

// Parser reads a spec of one kind from its text.
type Parser func(text string) (Spec, error)

// KindEvery is the kind of [Every] specs.
const KindEvery = "every"

// MinEvery is the shortest interval of an [Every] spec.
const MinEvery = time.Second

// Every fires at every multiple of D since the Unix epoch (UTC), so every
// process computes the same occurrences without an anchor.
type Every struct{ D time.Duration }

// NewEvery returns the spec firing every d (a whole number of
// milliseconds, at least [MinEvery]).
func NewEvery(d time.Duration) (Every, error) {
	if d < MinEvery || d%time.Millisecond != 0 {
		return Every{}, fmt.Errorf("interval %s: want a whole number of milliseconds, at least %s", d, MinEvery)
	}
	return Every{D: d}, nil
}

// Next returns the first multiple of D since the epoch after t.
func (e Every) Next(t time.Time) time.Time {
	d := e.D.Milliseconds()
	if d <= 0 {
		return time.Time{}
	}
	ms := t.UnixMilli()
	n := ms - ms%d + d
	if ms < 0 && ms%d != 0 { // floor for times before the epoch
		n -= d
	}
	return time.UnixMilli(n).UTC()
}

// Kind returns [KindEvery].
func (e Every) Kind() string { return KindEvery }

// String returns the interval ("30s").
func (e Every) String() string { return e.D.String() }

// ParseEvery reads an [Every] spec's text.
func ParseEvery(text string) (Spec, error) {
	d, err := time.ParseDuration(text)
	if err != nil {
		return nil, fmt.Errorf("interval %q: %w", text, err)
	}
	return NewEvery(d)
}
