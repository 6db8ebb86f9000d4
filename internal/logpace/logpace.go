// Package logpace spaces the log lines of a loop whose calls keep failing:
// the first failure is logged at once, the next lines after intervals that
// double from First up to Max. An operator sees an outage begin, sees it
// go on while it is young, and a long one costs a line every Max, not one
// per retry.
package logpace

import "time"

// The intervals between the lines about one run of failures.
const (
	First = time.Second     // between the first line and the second
	Max   = 5 * time.Minute // the longest interval
)

// Pace tracks the lines logged about one run of failures. The zero value
// is a run with nothing logged yet. Not safe for concurrent use.
type Pace struct {
	lines int       // lines logged in the run
	last  time.Time // when the last of them was
}

// Due reports whether a line is due at now, and if so counts it as logged.
func (p *Pace) Due(now time.Time) bool {
	if p.lines > 0 && now.Sub(p.last) < Interval(p.lines) {
		return false
	}
	p.lines++
	p.last = now
	return true
}

// Reset ends the run: the next failure is logged at once.
func (p *Pace) Reset() { *p = Pace{} }

// Interval returns the least time between line n of a run (1 for the
// first) and the next: First, doubling with each line, at most Max.
func Interval(n int) time.Duration {
	d := First
	for i := 1; i < n && d < Max; i++ {
		d *= 2
	}
	return min(d, Max)
}
