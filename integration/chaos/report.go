package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
)

// printTable writes the run's figures and verdict.
func printTable(w io.Writer, s *Summary) {
	fmt.Fprintf(w, "\n== delaystream chaos: mode %s, appendfsync %s, seed %d, %.1fs\n", s.Mode, s.Fsync, s.Seed, s.RunSeconds)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "messages\t\n")
	fmt.Fprintf(tw, "  scheduled (acknowledged)\t%d\t%d with generated ids; %d outcome unknown (Schedule failed)\n", s.Scheduled, s.Generated, s.ScheduleUnknown)
	fmt.Fprintf(tw, "  cancelled (Cancel true)\t%d\tCancel false %d, failed %d, false but re-sent %d\n", s.Cancelled, s.CancelFalse, s.CancelUnknown, s.RetriedCancelFalse)
	fmt.Fprintf(tw, "  rescheduled\t%d\ttwice %d; not found (promoted already) %d, failed %d\n", s.Rescheduled, s.RescheduledTwice, s.RescheduleNotFound, s.RescheduleUnknown)
	fmt.Fprintf(tw, "  poison (dead letters due)\t%d\t\n", s.Poison)
	fmt.Fprintf(tw, "  expected per group\t%d\tacknowledged, not cancelled, no failed Cancel\n", s.Expected)
	fmt.Fprintf(tw, "  recurring occurrences per group\t%d\tevery second from definition to deletion, each created once\n", s.Occurrences)
	tw.Flush()

	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "group\tdelivered\tdead-lettered\tlost\tearly\twrong due\tcancelled delivered\tunexpected\tduplicates\tbound\ttwins\tresent early\tcalls\tfailed calls\t\n")
	for _, g := range s.Groups {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", g.Group, g.Delivered, g.DeadLettered, g.Lost, g.Early,
			g.WrongDue, g.CancelledDelivered, g.Unexpected, g.Duplicates, g.Bound, g.Twins, g.ResentEarly, g.Calls, g.Failures)
	}
	tw.Flush()
	for _, g := range s.Groups {
		if len(g.DeadOther) > 0 || g.OptionalDelivered > 0 {
			fmt.Fprintf(w, "  %s: dead-lettered besides poison %v; delivered with an unknown outcome %d\n", g.Group, g.DeadOther, g.OptionalDelivered)
		}
	}
	fmt.Fprintf(w, "lateness of first deliveries (handled - due): n %d, p50 %.1f ms, p99 %.1f ms, max %.1f ms\n",
		s.Lateness.N, s.Lateness.P50, s.Lateness.P99, s.Lateness.Max)

	fmt.Fprintln(w)
	fmt.Fprintf(w, "faults injected\n")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, k := range faultKinds {
		fmt.Fprintf(tw, "  %s\t%d\t\n", k, s.Faults[k])
	}
	var gs []string
	for g := range s.InFlight {
		gs = append(gs, g)
	}
	sort.Strings(gs)
	for _, g := range gs {
		fmt.Fprintf(tw, "  in flight at the faults, %s\t%d\t(the duplicate bound)\n", g, s.InFlight[g])
	}
	tw.Flush()
	for _, f := range s.FaultList {
		if f.Kind == faultRestart {
			fmt.Fprintf(w, "  restart: down %.3fs; %s\n", f.End.Sub(f.Start).Seconds(), f.Note)
		}
	}

	fmt.Fprintln(w)
	fmt.Fprintf(w, "recovery after Redis-wide faults (seconds after the fault ended: first entry appended, first handled per group)\n")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "fault\tat\tlasted\tpromotion\t%s\t\n", strings.Join(groups, "\t"))
	for _, r := range s.Recovery {
		line := fmt.Sprintf("%s\t%.1f\t%.3f\t%.3f", r.Kind, r.At, r.Down, r.Promotion)
		for _, g := range groups {
			line += fmt.Sprintf("\t%.3f", r.Delivery[g])
		}
		fmt.Fprintln(tw, line+"\t")
	}
	tw.Flush()

	if s.Restart != nil {
		r := s.Restart
		fmt.Fprintf(w, "\nrestart losses (appendfsync everysec; writes acknowledged in the %.0fs before the kill): schedules %d, cancels %d, reschedules %d, duplicates beyond the bound %d, data-loss reports %d\n",
			r.WindowSeconds, r.Schedules, r.Cancels, r.Reschedules, r.Duplicates, r.DataLoss)
	}
	if s.Quarantine > 0 || s.DataLoss > 0 {
		fmt.Fprintf(w, "quarantined %d; data-loss reports %d\n", s.Quarantine, s.DataLoss)
	}
	// Children that gave up, grouped by what they said (names differ).
	exits := map[string]int{}
	var order []string
	for _, x := range s.ChildExits {
		msg := strings.TrimSpace(x)
		if i := strings.Index(msg, "): "); i >= 0 {
			msg = msg[i+3:]
		}
		if exits[msg] == 0 {
			order = append(order, msg)
		}
		exits[msg]++
	}
	for _, msg := range order {
		fmt.Fprintf(w, "children exited on their own (restarted): %d x %s\n", exits[msg], msg)
	}
	for _, x := range s.UncleanStops {
		fmt.Fprintf(w, "did not stop cleanly on SIGTERM: %s\n", x)
	}
	for _, x := range s.Notes {
		fmt.Fprintf(w, "note: %s\n", x)
	}
	for _, x := range s.Harness {
		fmt.Fprintf(w, "run failed: %s\n", x)
	}
	for _, f := range s.Findings {
		fmt.Fprintf(w, "FINDING: %s\n", f)
	}
	for _, v := range s.ViolationList {
		fmt.Fprintf(w, "VIOLATION: %s\n", v)
	}
	if s.Violations > len(s.ViolationList) {
		fmt.Fprintf(w, "... and %d more violations\n", s.Violations-len(s.ViolationList))
	}
	if s.Dir != "" {
		fmt.Fprintf(w, "work directory kept: %s\n", s.Dir)
	}
	fmt.Fprintf(w, "verdict: %s\n", s.Verdict)
}
