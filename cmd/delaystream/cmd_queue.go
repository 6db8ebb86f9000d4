package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/admin"
	"github.com/delaystream/delaystream/cmd/delaystream/internal/cli"
)

// queueRow is one line of `queues`: the queue and, unless --no-stats, its
// figures.
type queueRow struct {
	admin.QueueInfo
	Stats *admin.QueueReport `json:"stats,omitempty"`
}

func (a *app) queuesCmd() *cobra.Command {
	var noStats bool
	c := &cobra.Command{
		Use:   "queues",
		Short: "List the queues under the prefix (found on every master), with their figures",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			in, err := a.inspector()
			if err != nil {
				return err
			}
			qs, err := in.Queues(ctxOf(c))
			if err != nil {
				return err
			}
			if !a.jsonOut {
				// Also when no queue is found: eviction may be why.
				a.warnMemory(ctxOf(c), in)
			}
			rows := make([]queueRow, len(qs))
			for i, q := range qs {
				rows[i].QueueInfo = q
				if noStats || q.Shards == 0 {
					continue
				}
				rs, err := in.Stats(ctxOf(c), q.Name)
				if err != nil {
					return err
				}
				rs[0].PerShard = nil
				rows[i].Stats = &rs[0]
			}
			if a.jsonOut {
				return a.printJSON(rows)
			}
			if len(rows) == 0 {
				fmt.Fprintf(a.stdout, "no queues under prefix %q\n", a.prefix)
				return nil
			}
			w := a.table()
			if noStats {
				fmt.Fprintln(w, "QUEUE\tSHARDS")
				for _, r := range rows {
					fmt.Fprintf(w, "%s\t%d\n", r.Name, r.Shards)
				}
				return w.Flush()
			}
			fmt.Fprintln(w, "QUEUE\tSHARDS\tWAITING\tOVERDUE\tNEXT DUE\tSTREAM\tGROUPS\tPENDING\tDEAD\tQUARANTINED\tPAUSED")
			for _, r := range rows {
				if r.Stats == nil {
					fmt.Fprintf(w, "%s\t?\t\t\t(record without a valid shard count: %s)\n", r.Name, r.Meta)
					continue
				}
				s := r.Stats
				var pending, dead int64
				for _, g := range s.Groups {
					pending += g.Pending
					dead += g.DeadLetters
				}
				fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%s\t%d\t%d\t%d\t%d\t%d\t%s\n", r.Name, r.Shards, s.Waiting, s.Overdue,
					when(s.NextDue, s.Now), s.StreamLength, len(s.Groups), pending, dead, s.Quarantined, paused(s.PausedSince))
			}
			return w.Flush()
		},
	}
	c.Flags().BoolVar(&noStats, "no-stats", false, "only discover the queues, read no figures")
	a.addJSON(c)
	return c
}

func (a *app) statsCmd() *cobra.Command {
	var perShard bool
	c := &cobra.Command{
		Use:   "stats <queue>",
		Short: "Figures of a queue and of each of its consumer groups",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			in, err := a.inspector()
			if err != nil {
				return err
			}
			rs, err := in.Stats(ctxOf(c), args[0])
			if err != nil {
				return err
			}
			st := rs[0]
			if !perShard {
				st.PerShard = nil
			}
			if a.jsonOut {
				return a.printJSON(st)
			}
			a.warnMemory(ctxOf(c), in)
			a.printStats(st)
			// The counts Redis keeps; a failure to read them (an ACL
			// without HGETALL) does not hide the figures above.
			if h, err := in.History(ctxOf(c), args[0]); err != nil {
				fmt.Fprintf(a.stderr, "history not read: %v\n", err)
			} else {
				fmt.Fprintln(a.stdout)
				a.printHistory(h)
			}
			return nil
		},
	}
	c.Flags().BoolVar(&perShard, "per-shard", false, "also show every shard's figures")
	a.addJSON(c)
	return c
}

func (a *app) printStats(st admin.QueueReport) {
	fmt.Fprintf(a.stdout, "queue %s (%d shard%s), Redis time %s\n", st.Queue, st.Shards, plural(st.Shards),
		st.Now.Local().Format("2006-01-02 15:04:05.000"))
	w := a.table()
	fmt.Fprintf(w, "  waiting\t%d\n", st.Waiting)
	overdue := fmt.Sprint(st.Overdue)
	if !st.PausedSince.IsZero() {
		fmt.Fprintf(w, "  PAUSED\tsince %s: nothing is promoted (delaystream resume %s)\n", when(st.PausedSince, st.Now), st.Queue)
		if st.Overdue > 0 {
			overdue += " (the queue is paused)"
		}
	} else if d := st.OverdueBy(); d > 0 {
		overdue += fmt.Sprintf(" (oldest due %s ago: is a mover running?)", roundDur(d))
	}
	fmt.Fprintf(w, "  overdue\t%s\n", overdue)
	fmt.Fprintf(w, "  next due\t%s\n", when(st.NextDue, st.Now))
	fmt.Fprintf(w, "  in stream\t%d\n", st.StreamLength)
	fmt.Fprintf(w, "  quarantined\t%d\n", st.Quarantined)
	_ = w.Flush()
	fmt.Fprintln(a.stdout)
	a.printGroups(st.Groups, false)
	if len(st.PerShard) > 0 {
		fmt.Fprintln(a.stdout)
		w := a.table()
		fmt.Fprintln(w, "SHARD\tTAG\tWAITING\tOVERDUE\tNEXT DUE\tSTREAM\tQUARANTINED\tPENDING\tLAG\tDEAD")
		for _, s := range st.PerShard {
			var pending, dead, lg int64
			for _, g := range s.Groups {
				pending += g.Pending
				dead += g.DeadLetters
				if g.Lag < 0 || lg < 0 {
					lg = -1
				} else {
					lg += g.Lag
				}
			}
			fmt.Fprintf(w, "%d\t%s\t%d\t%d\t%s\t%d\t%d\t%d\t%s\t%d\n", s.Shard, s.Tag, s.Waiting, s.Overdue,
				when(s.NextDue, s.Now), s.StreamLength, s.Quarantined, pending, lag(lg), dead)
		}
		_ = w.Flush()
	}
}

func (a *app) printGroups(gs []admin.GroupReport, consumers bool) {
	if len(gs) == 0 {
		fmt.Fprintln(a.stdout, "no consumer groups yet")
		return
	}
	w := a.table()
	fmt.Fprintln(w, "GROUP\tCONSUMERS\tPENDING\tOLDEST PENDING\tLAG\tRETRY WAITING\tDEAD LETTERS\tPAUSED\tLIMITS")
	for _, g := range gs {
		fmt.Fprintf(w, "%s\t%d\t%d\t%s\t%s\t%d\t%d\t%s\t%s\n", g.Group, g.Consumers, g.Pending, age(g.OldestPendingEntryAgeMs),
			lag(g.Lag), g.RetryWaiting, g.DeadLetters, paused(g.PausedSince), limits(g))
	}
	_ = w.Flush()
	if !consumers {
		return
	}
	for _, g := range gs {
		if len(g.ConsumerList) == 0 {
			continue
		}
		fmt.Fprintf(a.stdout, "\ngroup %s consumers:\n", g.Group)
		w := a.table()
		fmt.Fprintln(w, "  CONSUMER\tSTATE\tPENDING\tIDLE")
		for _, c := range g.ConsumerList {
			state := "live"
			if !c.Live {
				state = "gone"
			}
			fmt.Fprintf(w, "  %s\t%s\t%d\t%s\n", c.Name, state, c.Pending, age(c.IdleMs))
		}
		_ = w.Flush()
	}
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func (a *app) groupsCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "groups <queue>",
		Short: "Consumer groups of a queue: pending, oldest pending age, lag, consumers, retry lane, dead letters",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			in, err := a.inspector()
			if err != nil {
				return err
			}
			gs, err := in.Groups(ctxOf(c), args[0])
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(gs)
			}
			a.printGroups(gs, true)
			return nil
		},
	}
	a.addJSON(c)
	return c
}

func (a *app) peekCmd() *cobra.Command {
	var (
		count       int
		overdueOnly bool
	)
	c := &cobra.Command{
		Use:   "peek <queue>",
		Short: "The earliest waiting messages: overdue first, then upcoming, with due times and a payload preview",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if count < 1 || count > admin.MaxPeek {
				return usagef("--count must be 1 to %d, got %d", admin.MaxPeek, count)
			}
			in, err := a.inspector()
			if err != nil {
				return err
			}
			ms, err := in.Peek(ctxOf(c), args[0], admin.ListOptions{Limit: count})
			if err != nil {
				return err
			}
			if overdueOnly {
				kept := ms[:0]
				for _, m := range ms {
					if m.Overdue {
						kept = append(kept, m)
					}
				}
				ms = kept
			}
			if a.jsonOut {
				return a.printJSON(waitingRows(ms))
			}
			if len(ms) == 0 {
				if overdueOnly {
					fmt.Fprintln(a.stdout, "nothing overdue")
				} else {
					fmt.Fprintln(a.stdout, "nothing waiting")
				}
				return nil
			}
			now := time.Now()
			w := a.table()
			fmt.Fprintln(w, "ID\tSHARD\tDUE\tSTATE\tATTEMPT\tSIZE\tPREVIEW")
			for _, m := range ms {
				state := "upcoming"
				if m.Overdue {
					state = "OVERDUE"
				}
				if m.Problem != "" {
					state = "BAD: " + m.Problem
				}
				fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%d\t%d\t%s\n", orDash(m.ID), m.Shard, when(m.Due, now), state,
					m.Attempt, m.Size, cli.Preview(m.Payload, cli.PreviewLen))
			}
			return w.Flush()
		},
	}
	c.Flags().IntVarP(&count, "count", "n", 20, fmt.Sprintf("how many messages (1 to %d)", admin.MaxPeek))
	c.Flags().BoolVar(&overdueOnly, "overdue", false, "show only the overdue ones (among the --count earliest)")
	a.addJSON(c)
	return c
}

func (a *app) getCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "get <queue> <id>",
		Short: "One waiting message, its payload in full; where it is (as locate) when it no longer waits",
		Args:  cobra.ExactArgs(2),
		RunE: func(c *cobra.Command, args []string) error {
			in, err := a.inspector()
			if err != nil {
				return err
			}
			ms, err := in.Peek(ctxOf(c), args[0], admin.ListOptions{IDs: args[1:2]})
			if errors.Is(err, delaystream.ErrNotFound) {
				if _, qerr := in.Queues(ctxOf(c), args[0]); qerr != nil {
					return qerr
				}
				return a.locate(c, args[0], args[1])
			}
			if err != nil {
				return err
			}
			m := ms[0]
			if a.jsonOut {
				return a.printJSON(waitingRows(ms)[0])
			}
			now := time.Now()
			w := a.table()
			fmt.Fprintf(w, "id\t%s\n", m.ID)
			if m.Problem != "" {
				fmt.Fprintf(w, "PROBLEM\t%s: it cannot be delivered, and is quarantined when due\n", m.Problem)
			}
			fmt.Fprintf(w, "shard\t%d\n", m.Shard)
			fmt.Fprintf(w, "due\t%s\n", when(m.Due, now))
			fmt.Fprintf(w, "overdue\t%v\n", m.Overdue)
			fmt.Fprintf(w, "attempt\t%d\n", m.Attempt)
			fmt.Fprintf(w, "created\t%s\n", when(m.Created, now))
			fmt.Fprintf(w, "deadline\t%s\n", when(m.Deadline, now))
			fmt.Fprintf(w, "headers\t%s\n", headers(m.Headers))
			fmt.Fprintf(w, "size\t%d\n", m.Size)
			fmt.Fprintf(w, "payload\t%s\n", cli.Preview(m.Payload, 4096))
			return w.Flush()
		},
	}
	a.addJSON(c)
	return c
}

func (a *app) cancelCmd() *cobra.Command {
	var (
		prefix string
		dryRun bool
	)
	c := &cobra.Command{
		Use:   "cancel <queue> [id...] [--id-prefix P]",
		Short: "Remove waiting messages, by id or by id prefix (asks for confirmation; --yes without a terminal)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			queue, ids := args[0], args[1:]
			if len(ids) == 0 && prefix == "" {
				return usagef("give message ids or --id-prefix")
			}
			in, err := a.inspector()
			if err != nil {
				return err
			}
			// Resolve first (a dry run), so the question names a count.
			res, err := in.Cancel(ctxOf(c), queue, admin.ActionOptions{IDs: ids, IDPrefix: prefix, DryRun: true})
			if err != nil {
				return err
			}
			if !dryRun && res.Matched > 0 {
				what := fmt.Sprintf("cancel %d waiting message%s of queue %s", res.Matched, plural(res.Matched), queue)
				if len(ids) == 1 && prefix == "" {
					what = fmt.Sprintf("cancel message %s of queue %s", ids[0], queue)
				}
				if err := a.confirm(what); err != nil {
					return err
				}
				sel := admin.ActionOptions{IDs: ids, IDPrefix: prefix}
				if !res.IDsTruncated {
					sel = admin.ActionOptions{IDs: res.IDs} // act on exactly what was found
				}
				notWaiting := res.NotFound
				if res, err = in.Cancel(ctxOf(c), queue, sel); err != nil {
					return err
				}
				res.NotFound = append(notWaiting, res.NotFound...)
			}
			if err := a.printCancel(res); err != nil {
				return err
			}
			if len(res.NotFound) > 0 {
				return fmt.Errorf("%d of the messages given not waiting (already due, cancelled or unknown): %w",
					len(res.NotFound), delaystream.ErrNotFound)
			}
			return nil
		},
	}
	c.Flags().StringVar(&prefix, "id-prefix", "", "also every waiting message whose id starts with this (messages with their own ids)")
	c.Flags().BoolVar(&dryRun, "dry-run", false, "show what would be cancelled, write nothing")
	a.addYes(c)
	a.addJSON(c)
	return c
}

// printCancel prints what cancel did, or would do.
func (a *app) printCancel(res admin.ActionResult) error {
	if a.jsonOut {
		return a.printJSON(res)
	}
	if res.DryRun {
		fmt.Fprintf(a.stdout, "dry run: would cancel %d waiting message%s of %s\n", res.Matched, plural(res.Matched), res.Queue)
	} else {
		fmt.Fprintf(a.stdout, "cancelled %d waiting message%s of %s\n", res.Done, plural(res.Done), res.Queue)
	}
	for _, id := range res.IDs {
		fmt.Fprintf(a.stdout, "  %s\n", id)
	}
	if res.IDsTruncated {
		fmt.Fprintf(a.stdout, "  (first %d shown)\n", len(res.IDs))
	}
	for _, id := range res.NotFound {
		fmt.Fprintf(a.stdout, "  not waiting: %s\n", id)
	}
	return nil
}

// confirmOn returns the inspector for an action on queue once the queue
// exists and the operator confirmed question (see confirm): an unknown
// queue is refused before anyone is asked.
func (a *app) confirmOn(c *cobra.Command, queue, question string) (*admin.Operator, error) {
	in, err := a.inspector()
	if err != nil {
		return nil, err
	}
	if _, err := in.Queues(ctxOf(c), queue); err != nil {
		return nil, err
	}
	if err := a.confirm(question); err != nil {
		return nil, err
	}
	return in, nil
}

func (a *app) forgetGroupCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "forget-group <queue> <group>",
		Short: "Retire a consumer group for good: trimming no longer waits for it (asks for confirmation; --yes without a terminal)",
		Long: "Destroys the group on the queue's streams (its position and pending entries) and removes it from the\n" +
			"queue's record of its groups, which trimming waits for: use it for a group whose consumers will not\n" +
			"run again. Its retry lane and dead letters stay (dlq purge --all removes the latter).",
		Args: cobra.ExactArgs(2),
		RunE: func(c *cobra.Command, args []string) error {
			in, err := a.confirmOn(c, args[0], fmt.Sprintf("forget group %s of queue %s (its pending entries are dropped)", args[1], args[0]))
			if err != nil {
				return err
			}
			if err := in.ForgetGroup(ctxOf(c), args[0], args[1]); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "forgot group %s of %s\n", args[1], args[0])
			return nil
		},
	}
	a.addYes(c)
	return c
}

func (a *app) rescheduleCmd() *cobra.Command {
	var (
		in time.Duration
		at string
	)
	c := &cobra.Command{
		Use:   "reschedule <queue> <id> (--in <duration> | --at <RFC 3339 time>)",
		Short: "Move a waiting message's due time (asks for confirmation; --yes without a terminal)",
		Args:  cobra.ExactArgs(2),
		RunE: func(c *cobra.Command, args []string) error {
			var (
				due delaystream.When
				to  string // the new due time, for the question
			)
			switch {
			case c.Flags().Changed("in") == (at != ""):
				return usagef("give exactly one of --in and --at")
			case at != "":
				t, err := time.Parse(time.RFC3339Nano, at)
				if err != nil {
					return usagef("--at: %w", err)
				}
				due, to = delaystream.At(t), "at "+t.Format(time.RFC3339Nano)
			case in < 0:
				return usagef("--in must not be negative")
			default:
				due, to = delaystream.After(in), "after "+in.String()
			}
			insp, err := a.confirmOn(c, args[0], fmt.Sprintf("reschedule message %s of queue %s to %s", args[1], args[0], to))
			if err != nil {
				return err
			}
			q, err := insp.Queue(ctxOf(c), args[0])
			if err != nil {
				return err
			}
			at, err := q.Reschedule(ctxOf(c), args[1], due)
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(map[string]any{"id": args[1], "due": at})
			}
			fmt.Fprintf(a.stdout, "rescheduled %s: due %s\n", args[1], when(at, time.Now()))
			return nil
		},
	}
	c.Flags().DurationVar(&in, "in", 0, "due this long from now, by the Redis clock (0s: at once)")
	c.Flags().StringVar(&at, "at", "", "due at this time (RFC 3339, e.g. 2025-01-02T15:04:05Z)")
	a.addYes(c)
	a.addJSON(c)
	return c
}
