package web

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/delaystream/delaystream/admin"
)

// countsEvery is how long a queue's counts read from Redis are served
// again before they are read anew: its per-minute figures change once a
// minute, and every open page refreshes them.
const countsEvery = 5 * time.Second

// countsCache keeps the counts last read of each queue (admin.History),
// for countsEvery, so that pages refreshed in many tabs read them from
// Redis once. Bounded: it is emptied when it holds maxCachedCounts.
type countsCache struct {
	mu   sync.Mutex
	read map[historyKey]countsRead
}

type countsRead struct {
	h  admin.History
	at time.Time
}

// maxCachedCounts bounds the queues whose counts are kept.
const maxCachedCounts = 256

// get returns queue's counts, read from Redis through in when not read
// within countsEvery.
func (c *countsCache) get(ctx context.Context, in *admin.Operator, prefix, queue string) (admin.History, error) {
	k := historyKey{prefix: prefix, queue: queue}
	c.mu.Lock()
	r, ok := c.read[k]
	c.mu.Unlock()
	if ok && time.Since(r.at) < countsEvery {
		return r.h, nil
	}
	h, err := in.History(ctx, queue)
	if err != nil {
		return admin.History{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.read == nil || len(c.read) >= maxCachedCounts {
		c.read = make(map[historyKey]countsRead)
	}
	c.read[k] = countsRead{h: h, at: time.Now()}
	return h, nil
}

// countChart is the data of a "promoted, handled, failed" SVG over
// buckets (minutes or hours), computed here so that the template only
// places it.
type countChart struct {
	ID, Title                 string
	W, H                      int
	Left, Top, Right, Bottom  int
	Promoted, Handled, Failed string // polylines
	YMax, YMid                int64
	YMidAt                    int
	From, To                  string // x labels
	SumPromoted, SumHandled   int64
	SumFailed                 int64
	Empty                     bool
}

// newCountChart lays out buckets (oldest first, each with its Start) as
// three polylines: promoted, handled (all groups, dropped included) and
// failed (all groups: retried or dead-lettered). layout formats the x
// labels (UTC).
func newCountChart(id, title string, buckets []admin.HistoryCounts, layout string) countChart {
	c := countChart{ID: id, Title: title, W: chartW, H: chartH, Left: chartLeft, Top: chartTop,
		Right: chartW - chartRight, Bottom: chartH - chartBottom}
	c.YMidAt = (c.Top + c.Bottom) / 2
	if len(buckets) == 0 {
		c.Empty = true
		return c
	}
	promoted, handled, failed := make([]int64, len(buckets)), make([]int64, len(buckets)), make([]int64, len(buckets))
	var top int64
	for i, b := range buckets {
		promoted[i] = b.Promoted
		for _, g := range b.Groups {
			handled[i] += g.Handled + g.Dropped
			failed[i] += g.Failed()
		}
		c.SumPromoted += promoted[i]
		c.SumHandled += handled[i]
		c.SumFailed += failed[i]
		top = max(top, promoted[i], handled[i], failed[i])
	}
	c.YMax = niceCeil(top)
	c.YMid = c.YMax / 2
	c.YMidAt = c.Bottom - int(float64(c.Bottom-c.Top)*float64(c.YMid)/float64(c.YMax))
	line := func(vs []int64) string {
		var b strings.Builder
		w, h := float64(c.Right-c.Left), float64(c.Bottom-c.Top)
		for i, v := range vs {
			if i > 0 {
				b.WriteByte(' ')
			}
			x := float64(c.Right)
			if len(vs) > 1 {
				x = float64(c.Left) + w*float64(i)/float64(len(vs)-1)
			}
			b.WriteString(fmt1(x) + "," + fmt1(float64(c.Bottom)-h*float64(v)/float64(c.YMax)))
		}
		return b.String()
	}
	c.Promoted, c.Handled, c.Failed = line(promoted), line(handled), line(failed)
	c.From, c.To = buckets[0].Start.UTC().Format(layout), buckets[len(buckets)-1].Start.UTC().Format(layout)
	return c
}

// countsSection is the queue page's counts: two charts and a row per
// group.
type countsSection struct {
	Minutes, Hours countChart
	History        admin.History
	Groups         []countsRow
	Err            string // a fixed sentence when the counts could not be read
}

// countsRow is one group's counts over the windows.
type countsRow struct {
	Group                                string
	LastMinute, LastHour, LastDay, Total admin.GroupHistory
}

// newCountsSection lays out h for the queue page.
func newCountsSection(h admin.History) countsSection {
	s := countsSection{History: h,
		Minutes: newCountChart("counts-minutes", "per minute, last hour", h.Minutes, "15:04"),
		Hours:   newCountChart("counts-hours", "per hour, last day", h.Hours, "Jan 2 15:04")}
	for _, g := range sortedGroups(h.Totals.Groups) {
		s.Groups = append(s.Groups, countsRow{Group: g, LastMinute: h.LastMinute.Groups[g], LastHour: h.LastHour.Groups[g],
			LastDay: h.LastDay.Groups[g], Total: h.Totals.Groups[g]})
	}
	return s
}

// sortedGroups returns the keys of m, sorted.
func sortedGroups(m map[string]admin.GroupHistory) []string {
	out := make([]string, 0, len(m))
	for g := range m {
		out = append(out, g)
	}
	slices.Sort(out)
	return out
}
