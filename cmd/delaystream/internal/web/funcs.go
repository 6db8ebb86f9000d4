package web

import (
	"fmt"
	"html/template"
	"net/url"
	"strconv"
	"time"

	"github.com/delaystream/delaystream/admin"
	"github.com/delaystream/delaystream/internal/memory"
)

// funcs are the template helpers.
var funcs = template.FuncMap{
	"esc":   url.PathEscape,
	"ts":    stamp,
	"rel":   relative,
	"ms":    msDuration,
	"num":   number,
	"lag":   lagText,
	"qsafe": url.QueryEscape,
	"bytes": memory.Bytes,
	"pendingSum": func(gs []admin.GroupReport) int64 {
		var n int64
		for _, g := range gs {
			n += g.Pending
		}
		return n
	},
	"deadSum": func(gs []admin.GroupReport) int64 {
		var n int64
		for _, g := range gs {
			n += g.DeadLetters
		}
		return n
	},
}

// stamp formats t in UTC with milliseconds; "—" for the zero time.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05.000Z")
}

// relative says how far t is from now: "in 5m3s" or "12s ago".
func relative(now, t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	d := t.Sub(now)
	if d >= 0 {
		return "in " + short(d)
	}
	return short(-d) + " ago"
}

// msDuration formats a duration in milliseconds; "—" for 0.
func msDuration(ms int64) string {
	if ms <= 0 {
		return "—"
	}
	return short(time.Duration(ms) * time.Millisecond)
}

// short rounds d for a human: ms under a second, then seconds, then
// minutes and hours.
func short(d time.Duration) string {
	switch {
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	case d < 24*time.Hour:
		return d.Round(time.Second).String()
	}
	days := d / (24 * time.Hour)
	return fmt.Sprintf("%dd%s", days, (d % (24 * time.Hour)).Round(time.Minute))
}

// number groups the digits of n by thousands with thin spaces.
func number(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, "\u202f"...)
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

// lagText is a group's lag, "?" when Redis cannot tell.
func lagText(n int64) string {
	if n < 0 {
		return "?"
	}
	return number(n)
}
