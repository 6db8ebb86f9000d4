package main

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// when renders t relative to now: "2025-01-02 15:04:05 (in 4m59s)" or
// "(3m0s ago)"; "-" for the zero time.
func when(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := t.Sub(now)
	rel := "in " + roundDur(d)
	if d < 0 {
		rel = roundDur(-d) + " ago"
	}
	return t.Local().Format("2006-01-02 15:04:05 MST") + " (" + rel + ")"
}

// roundDur rounds d to a readable precision.
func roundDur(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	default:
		return d.Round(time.Minute).String()
	}
}

// age renders an age in ms, "-" for none.
func age(ms int64) string {
	if ms <= 0 {
		return "-"
	}
	return roundDur(time.Duration(ms) * time.Millisecond)
}

// lag renders a group's lag, "?" when Redis cannot tell.
func lag(n int64) string {
	if n < 0 {
		return "?"
	}
	return fmt.Sprint(n)
}

// headers renders headers sorted, "k=v k=v".
func headers(h map[string]string) string {
	if len(h) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + h[k]
	}
	return strings.Join(parts, " ")
}

// orDash returns s, or "-" when empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
