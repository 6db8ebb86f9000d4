package main

import (
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/delaystream/delaystream/admin"
)

func (a *app) historyCmd() *cobra.Command {
	var hours bool
	c := &cobra.Command{
		Use:   "history <queue>",
		Short: "What a queue and its groups did, minute by minute (or hour by hour), from the counters Redis keeps",
		Long: `history prints the counts Redis keeps of a queue's work: messages promoted
and quarantined, and each group's messages handled, dropped, retried and
dead-lettered, for each of the last 60 minutes (--hours: the last 24 hours),
oldest first, the one in progress last, then the totals. Every process that
runs the queue counts its work there, so every tool sees the same history.`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			in, err := a.inspector()
			if err != nil {
				return err
			}
			h, err := in.History(ctxOf(c), args[0])
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(h)
			}
			a.printHistoryBuckets(h, hours)
			return nil
		},
	}
	c.Flags().BoolVar(&hours, "hours", false, "hour by hour over the last day instead of minute by minute over the last hour")
	a.addJSON(c)
	return c
}

// historyGroups returns the names of the groups counted in h, sorted.
func historyGroups(h admin.History) []string {
	var names []string
	for name := range h.Totals.Groups {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// printHistory prints h's windows and totals, a row per counter.
func (a *app) printHistory(h admin.History) {
	w := a.table()
	fmt.Fprintln(w, "COUNTED\tLAST MINUTE\tLAST HOUR\tLAST DAY\tTOTAL")
	row := func(name string, get func(admin.HistoryCounts) int64) {
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\n", name, get(h.LastMinute), get(h.LastHour), get(h.LastDay), get(h.Totals))
	}
	row("promoted", func(c admin.HistoryCounts) int64 { return c.Promoted })
	row("quarantined", func(c admin.HistoryCounts) int64 { return c.Quarantined })
	for _, g := range historyGroups(h) {
		for _, k := range groupCounters {
			row(g+" "+k.name, func(c admin.HistoryCounts) int64 { return k.get(c.Groups[g]) })
		}
	}
	_ = w.Flush()
}

// groupCounters are a group's counters, in the order shown.
var groupCounters = []struct {
	name string
	get  func(admin.GroupHistory) int64
}{
	{"handled", func(g admin.GroupHistory) int64 { return g.Handled }},
	{"dropped", func(g admin.GroupHistory) int64 { return g.Dropped }},
	{"retried", func(g admin.GroupHistory) int64 { return g.Retried }},
	{"dead-lettered", func(g admin.GroupHistory) int64 { return g.DeadLettered }},
}

// printHistoryBuckets prints h's minutes (or hours), a row per bucket and
// a column per counter, then the totals.
func (a *app) printHistoryBuckets(h admin.History, hours bool) {
	buckets, layout := h.Minutes, "15:04"
	if hours {
		buckets, layout = h.Hours, "2006-01-02 15:04"
	}
	groups := historyGroups(h)
	fmt.Fprintf(a.stdout, "queue %s, counted by Redis, times in %s\n", h.Queue, zoneName(h.Now))
	w := a.table()
	fmt.Fprint(w, "FROM\tPROMOTED\tQUARANTINED")
	for _, g := range groups {
		fmt.Fprintf(w, "\t%s HANDLED\tDROPPED\tRETRIED\tDEAD", g)
	}
	fmt.Fprintln(w)
	line := func(label string, c admin.HistoryCounts) {
		fmt.Fprintf(w, "%s\t%d\t%d", label, c.Promoted, c.Quarantined)
		for _, g := range groups {
			for _, k := range groupCounters {
				fmt.Fprintf(w, "\t%d", k.get(c.Groups[g]))
			}
		}
		fmt.Fprintln(w)
	}
	for _, b := range buckets {
		line(b.Start.Local().Format(layout), b)
	}
	line("total", h.Totals)
	_ = w.Flush()
}

// zoneName names the local time zone at t, with its offset.
func zoneName(t time.Time) string {
	name, _ := t.Local().Zone()
	return name + " (UTC" + t.Local().Format("-07:00") + ")"
}
