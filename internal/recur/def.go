package recur

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Missed says what a top-up does with occurrences found more than
// [Grace] late (every process was down, or the schedule's top-ups could
// not run).
type Missed int

// The missed policies.
const (
	SkipMissed     Missed = iota // skip them: the next occurrence is the next one to come
	FireMissedOnce               // fire the latest of them once, then go on
)

// Grace is how late an occurrence may be at a top-up and still be added:
// an older one counts as missed.
const Grace = 5 * time.Second

// MaxAhead is the most occurrences one top-up adds for one schedule.
const MaxAhead = 100

// The headers every occurrence carries.
const (
	HeaderSchedule   = "ds.schedule"   // the schedule's id
	HeaderOccurrence = "ds.occurrence" // the occurrence's time, RFC 3339 with ms, UTC
)

// OccurrenceFormat is the layout of [HeaderOccurrence].
const OccurrenceFormat = "2006-01-02T15:04:05.000Z07:00"

// Def is a schedule's definition as stored: its body is its JSON
// encoding, the same bytes for the same definition. Version comes first,
// so that recur_define.lua reads it from the body's start; left out when
// 0, so that a definition without one is stored as before versions.
type Def struct {
	Version uint64            `json:"v,omitempty"`
	Kind    string            `json:"k"`
	Spec    string            `json:"s"`
	Payload []byte            `json:"p,omitempty"`
	Headers map[string]string `json:"h,omitempty"`
	Missed  Missed            `json:"m,omitempty"`
}

func (d Def) body() (string, error) {
	b, err := json.Marshal(d)
	return string(b), err
}

func parseDef(body string) (Def, error) {
	var d Def
	if err := json.Unmarshal([]byte(body), &d); err != nil {
		return Def{}, fmt.Errorf("definition: %w", err)
	}
	if d.Kind == "" || d.Missed < SkipMissed || d.Missed > FireMissedOnce {
		return Def{}, fmt.Errorf("definition: kind %q, missed policy %d", d.Kind, d.Missed)
	}
	return d, nil
}

// The states of a schedule's progress record.
const (
	stateActive  = 'a'
	statePaused  = 'p'
	stateDeleted = 'x'
)

// progress is a schedule's progress record (see recur_define.lua).
type progress struct {
	rev     int64
	through int64 // ms: the latest occurrence added or skipped
	fenced  bool
	state   byte
	next    int64 // ms: when the next top-up is due (0: at once)
}

func parseProgress(s string) (progress, bool) {
	f := strings.Split(s, "|")
	if (len(f) != 4 && len(f) != 5) || len(f[3]) != 1 {
		return progress{}, false
	}
	rev, err1 := strconv.ParseInt(f[0], 10, 64)
	th, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil || (f[2] != "0" && f[2] != "1") {
		return progress{}, false
	}
	p := progress{rev: rev, through: th, fenced: f[2] == "1", state: f[3][0]}
	if len(f) == 5 && f[4] != "" {
		var err error
		if p.next, err = strconv.ParseInt(f[4], 10, 64); err != nil {
			return progress{}, false
		}
	}
	return p, true
}

// neverMs is the next top-up of a schedule with no occurrence left.
const neverMs = 253402300799999 // 9999-12-31T23:59:59.999Z

// nextTopUp returns when a schedule whose occurrences are written through
// (ms) needs its next top-up: when its next occurrence comes within the
// horizon.
func nextTopUp(sp Spec, through int64, horizon time.Duration) int64 {
	t := sp.Next(time.UnixMilli(through))
	if t.IsZero() {
		return neverMs
	}
	return t.UnixMilli() - horizon.Milliseconds()
}

// shardRecord is one shard's occurrence record (see recur_add.lua).
type shardRecord struct {
	rev     int64
	last    int64   // ms of the latest occurrence added for rev
	fired   int64   // ms of the latest occurrence known due
	waiting []int64 // ms of occurrences added and not yet known due

	runs     string // when the occurrences were written (see writtenAt)
	appended string // the latest occurrence recorded as appended (see parseAppended)
}

func parseShardRecord(s string) (shardRecord, bool) {
	f := strings.Split(s, "|")
	if len(f) != 4 {
		return shardRecord{}, false
	}
	var r shardRecord
	var err [3]error
	r.rev, err[0] = strconv.ParseInt(f[0], 10, 64)
	r.last, err[1] = strconv.ParseInt(f[1], 10, 64)
	r.fired, err[2] = strconv.ParseInt(f[2], 10, 64)
	if err[0] != nil || err[1] != nil || err[2] != nil {
		return shardRecord{}, false
	}
	for _, w := range strings.Split(f[3], ",") {
		if ms, e := strconv.ParseInt(w, 10, 64); e == nil {
			r.waiting = append(r.waiting, ms)
		}
	}
	return r, true
}

// OccurrenceID returns the message id of schedule sid's occurrence at ms
// in revision rev.
func OccurrenceID(sid string, ms, rev int64) string {
	return sid + "@" + strconv.FormatInt(ms, 10) + "#" + strconv.FormatInt(rev, 10)
}

// plan returns the occurrences a top-up at now adds after through (ms),
// in ascending order, and how far they take the schedule (the latest
// occurrence added or skipped; through when none). It adds those up to
// now+horizon, and always the next one after now; occurrences more than
// [Grace] late are missed: skipped, or, with FireMissedOnce, the latest of
// them added once. At most [MaxAhead].
func plan(sp Spec, missed Missed, through, now int64, horizon time.Duration) ([]int64, int64) {
	cut, end := now-Grace.Milliseconds(), now+horizon.Milliseconds()
	t := sp.Next(time.UnixMilli(walkStart(sp, through, cut)))
	var lastMissed int64
	// Occurrences missed: walked over (bounded; see walkStart).
	for n := 0; !t.IsZero() && t.UnixMilli() <= cut; n++ {
		lastMissed = t.UnixMilli()
		if n == 100_000 {
			t = sp.Next(time.UnixMilli(cut))
			break
		}
		t = sp.Next(t)
	}
	var out []int64
	newThrough := max(through, lastMissed)
	if missed == FireMissedOnce && lastMissed != 0 {
		out = append(out, lastMissed)
	}
	future := through > now
	for !t.IsZero() && len(out) < MaxAhead && (t.UnixMilli() <= end || !future) {
		ms := t.UnixMilli()
		if ms <= newThrough { // a spec that does not move forward
			break
		}
		out = append(out, ms)
		newThrough = ms
		future = future || ms > now
		t = sp.Next(t)
	}
	return out, newThrough
}

// walkStart returns where to start looking for missed occurrences: through,
// or, after a long outage, the latest of cut minus a minute, an hour, a day,
// 32 days or 366 days after which the spec still fires before cut, so that
// the walk to the latest missed occurrence stays short.
func walkStart(sp Spec, through, cut int64) int64 {
	for _, w := range []time.Duration{time.Minute, time.Hour, 24 * time.Hour, 32 * 24 * time.Hour, 366 * 24 * time.Hour} {
		from := cut - w.Milliseconds()
		if from <= through {
			return through
		}
		if t := sp.Next(time.UnixMilli(from)); !t.IsZero() && t.UnixMilli() <= cut {
			return from
		}
	}
	return through
}
