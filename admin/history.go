package admin

import (
	"context"
	"time"

	"github.com/delaystream/delaystream/internal/history"
)

// History is a queue's counters as Redis keeps them. The library's
// scripts count each transition in the call that makes it (no round trip
// of their own), so every process and tool reads the same history,
// whoever did the work and whatever restarted since. Buckets are placed by
// the clocks of the processes that did the work and read by the reader's
// (Now): clocks a few seconds apart move counts between neighbouring
// buckets, never lose them.
type History struct {
	Queue string    `json:"queue"`
	Now   time.Time `json:"now"` // the reader's clock when read
	// Totals are every count since the queue's first (until the queue is
	// deleted; purging dead letters does not lower them).
	Totals HistoryCounts `json:"totals"`
	// LastMinute is the last complete minute; LastHour the minute in
	// progress and the 59 before it; LastDay the hour in progress and the
	// 23 before it.
	LastMinute HistoryCounts `json:"last_minute"`
	LastHour   HistoryCounts `json:"last_hour"`
	LastDay    HistoryCounts `json:"last_day"`
	// Minutes are the last 60 minutes and Hours the last 24 hours, oldest
	// first, the one in progress last, each with its Start.
	Minutes []HistoryCounts `json:"minutes"`
	Hours   []HistoryCounts `json:"hours"`
}

// HistoryCounts are a queue's counts over a span: messages promoted (due,
// appended to the stream) and quarantined (unreadable, set aside by
// promotion), and each group's, by name.
type HistoryCounts struct {
	Start       time.Time               `json:"start,omitzero"` // a bucket's start; zero for a sum
	Promoted    int64                   `json:"promoted"`
	Quarantined int64                   `json:"quarantined"`
	Groups      map[string]GroupHistory `json:"groups,omitempty"`
}

// GroupHistory are one group's counts over a span: entries acknowledged
// after their handler succeeded (Handled) or dropped them (Dropped),
// failures scheduled for a retry, and entries dead-lettered (for any
// reason: attempts or deliveries exhausted, undecodable, expired).
type GroupHistory struct {
	Handled      int64 `json:"handled"`
	Dropped      int64 `json:"dropped"`
	Retried      int64 `json:"retried"`
	DeadLettered int64 `json:"dead_lettered"`
}

// Failed returns the failures counted: retried or dead-lettered.
func (g GroupHistory) Failed() int64 { return g.Retried + g.DeadLettered }

// History reads queue's history (see [History]): read only, one pipeline
// of HGETALL, about 85 keys per shard. It returns an error wrapping
// delaystream.ErrNotFound for a queue Redis does not hold.
func (in *Operator) History(ctx context.Context, queue string) (History, error) {
	h, err := in.open(ctx, queue)
	if err != nil {
		return History{}, err
	}
	now := time.Now()
	raw, err := history.Read(ctx, in.rdb, h.layout, 61, 24, now)
	if err != nil {
		return History{}, err
	}
	out := History{Queue: queue, Now: now, Totals: historyCounts(time.Time{}, raw.Totals),
		LastMinute: historyCounts(time.Time{}, raw.Minutes[59].Counts)}
	for _, b := range raw.Minutes[1:] {
		out.Minutes = append(out.Minutes, historyCounts(b.Start, b.Counts))
		out.LastHour.add(b.Counts)
	}
	for _, b := range raw.Hours {
		out.Hours = append(out.Hours, historyCounts(b.Start, b.Counts))
		out.LastDay.add(b.Counts)
	}
	return out, nil
}

// historyCounts converts c, of the bucket that starts at start.
func historyCounts(start time.Time, c history.Counts) HistoryCounts {
	out := HistoryCounts{Start: start}
	out.add(c)
	return out
}

// add adds c to h.
func (h *HistoryCounts) add(c history.Counts) {
	h.Promoted += c.Promoted
	h.Quarantined += c.Quarantined
	for name, g := range c.Groups {
		if h.Groups == nil {
			h.Groups = make(map[string]GroupHistory)
		}
		s := h.Groups[name]
		s.Handled += g.Handled
		s.Dropped += g.Dropped
		s.Retried += g.Retried
		s.DeadLettered += g.Dead
		h.Groups[name] = s
	}
}

// HistoryTotals returns queue's history totals alone (History.Totals):
// one HGETALL per shard, cheap enough for every metrics scrape.
func (in *Operator) HistoryTotals(ctx context.Context, queue string) (HistoryCounts, error) {
	h, err := in.open(ctx, queue)
	if err != nil {
		return HistoryCounts{}, err
	}
	raw, err := history.Read(ctx, in.rdb, h.layout, 0, 0, time.Now())
	if err != nil {
		return HistoryCounts{}, err
	}
	return historyCounts(time.Time{}, raw.Totals), nil
}
