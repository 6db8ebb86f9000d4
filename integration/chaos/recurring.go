package main

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"time"

	"github.com/delaystream/delaystream"
)

// The run's recurring schedule: every second, defined by the parent before
// the movers start (every mover, whose Run tops it up, is killed and
// restarted along the run) and deleted before the drain.
const (
	recurID = "chaos-tick"
	// Ledger records: the consumers' handlings of occurrences, and the
	// parent's definition and deletion times (Redis clock, ms).
	recOccurrence = "O" // group, consumer, occurrence ms, message id, lane, entry id, ok
	recSchedule   = "RC"
)

// defineSchedule defines the run's schedule and returns when (Redis clock).
func (c *chaos) defineSchedule(ctx context.Context) (time.Time, error) {
	q, err := delaystream.New(c.ctl, queueName, delaystream.WithPrefix(keyPrefix))
	if err != nil {
		return time.Time{}, err
	}
	if _, err := q.DefineRecurring(ctx, delaystream.Recurring{ID: recurID, Spec: delaystream.Every(time.Second), Payload: []byte("tick")}); err != nil {
		return time.Time{}, fmt.Errorf("define the recurring schedule: %w", err)
	}
	return c.ctl.Time(ctx).Result()
}

// deleteSchedule deletes the run's schedule and records its definition
// and deletion times in the parent's ledger.
func (c *chaos) deleteSchedule(ctx context.Context, dir string, defined time.Time) error {
	q, err := delaystream.New(c.ctl, queueName, delaystream.WithPrefix(keyPrefix))
	if err != nil {
		return err
	}
	if err := q.DeleteRecurring(ctx, recurID); err != nil {
		return fmt.Errorf("delete the recurring schedule: %w", err)
	}
	deleted, err := c.ctl.Time(ctx).Result()
	if err != nil {
		return err
	}
	led, err := openLedger(filepath.Join(dir, "ledger", "parent.log"))
	if err != nil {
		return err
	}
	defer led.close()
	led.write(recSchedule, itoa(defined.UnixMilli()), itoa(deleted.UnixMilli()))
	return nil
}

// occurrence is what the ledger says of one occurrence in one group.
type occurrence struct {
	entries map[string]bool // queue stream entries it was delivered from
	ok      bool            // handled successfully at least once
}

// occurrences gathers the ledger's occurrence records: group -> occurrence
// ms -> what was seen.
type occurrences struct {
	byGroup          map[string]map[int64]*occurrence
	defined, deleted int64
	haveSchedule     bool
}

func (o *occurrences) add(r record) {
	switch r.kind() {
	case recSchedule:
		o.defined, o.deleted, o.haveSchedule = r.num(1), r.num(2), true
	case recOccurrence:
		if o.byGroup == nil {
			o.byGroup = map[string]map[int64]*occurrence{}
		}
		g, at := r.str(1), r.num(3)
		if o.byGroup[g] == nil {
			o.byGroup[g] = map[int64]*occurrence{}
		}
		oc := o.byGroup[g][at]
		if oc == nil {
			oc = &occurrence{entries: map[string]bool{}}
			o.byGroup[g][at] = oc
		}
		if r.str(5) == "q" {
			oc.entries[r.str(6)] = true
		}
		oc.ok = oc.ok || r.str(7) == "ok"
	}
}

// judge checks once per occurrence: in every group, each occurrence from
// the first after the definition to the last due a second before the
// deletion is handled, each from one queue stream entry (a redelivery of
// the entry is at-least-once; a second entry is an occurrence created
// twice), and none after the deletion is delivered. It returns the
// occurrences expected per group.
func (o *occurrences) judge(violate func(string, ...any)) int {
	if !o.haveSchedule {
		if len(o.byGroup) > 0 {
			violate("recurring: occurrences delivered, and the parent's ledger has no schedule record")
		}
		return 0
	}
	first := o.defined - o.defined%1000 + 1000
	last := o.deleted - o.deleted%1000 - 1000
	expected := int((last-first)/1000) + 1
	for _, g := range groups {
		seen := o.byGroup[g]
		for at := first; at <= last; at += 1000 {
			if oc := seen[at]; oc == nil || !oc.ok {
				violate("recurring: %s never handled the occurrence at %s", g, time.UnixMilli(at).UTC().Format("15:04:05.000"))
			}
		}
		ats := make([]int64, 0, len(seen))
		for at := range seen {
			ats = append(ats, at)
		}
		sort.Slice(ats, func(i, j int) bool { return ats[i] < ats[j] })
		for _, at := range ats {
			if n := len(seen[at].entries); n > 1 {
				violate("recurring: %s got the occurrence at %s from %d stream entries: created more than once", g, time.UnixMilli(at).UTC().Format("15:04:05.000"), n)
			}
			if at > o.deleted+1000 {
				violate("recurring: %s got the occurrence at %s, after the schedule was deleted", g, time.UnixMilli(at).UTC().Format("15:04:05.000"))
			}
		}
	}
	return expected
}
