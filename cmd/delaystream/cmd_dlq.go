package main

import (
	"context"
	"fmt"
	"regexp"
	"time"

	"github.com/spf13/cobra"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/admin"
	"github.com/delaystream/delaystream/cmd/delaystream/internal/cli"
)

// filterFlags are the --since / --from / --to / --reason flags.
type filterFlags struct {
	since    time.Duration
	from, to string
	reason   string
}

func (f *filterFlags) add(c *cobra.Command) {
	c.Flags().DurationVar(&f.since, "since", 0, "dead-lettered within this long before now (this host's clock)")
	c.Flags().StringVar(&f.from, "from", "", "dead-lettered at or after this time (RFC 3339)")
	c.Flags().StringVar(&f.to, "to", "", "dead-lettered before this time (RFC 3339)")
	c.Flags().StringVar(&f.reason, "reason", "", `with this reason only, as listed or as metrics label it, e.g. "attempts exhausted" or "attempts"`)
}

// filter returns the listing options of the flags: From, To and Reason.
func (f *filterFlags) filter() (admin.ListOptions, error) {
	var out admin.ListOptions
	if f.since < 0 {
		return out, usagef("--since must not be negative")
	}
	if f.since > 0 && f.from != "" {
		return out, usagef("give --since or --from, not both")
	}
	if f.since > 0 {
		out.From = time.Now().Add(-f.since)
	}
	for _, p := range []struct {
		flag, v string
		dst     *time.Time
	}{{"--from", f.from, &out.From}, {"--to", f.to, &out.To}} {
		if p.v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, p.v)
		if err != nil {
			return out, usagef("%s: %w", p.flag, err)
		}
		*p.dst = t
	}
	out.Reason = f.reason
	return out, nil
}

func (a *app) dlqCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "dlq",
		Short: "A consumer group's dead letters: ls, show, redrive, purge",
	}
	c.AddCommand(a.dlqLsCmd(), a.dlqShowCmd(), a.dlqActCmd("redrive"), a.dlqActCmd("purge"))
	return c
}

func (a *app) dlqLsCmd() *cobra.Command {
	var (
		limit  int
		after  string
		newest bool
		ff     filterFlags
	)
	c := &cobra.Command{
		Use:   "ls <queue> [group]",
		Short: "List dead letters, oldest first (--newest: newest first): a group's, or every group's with their totals",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(c *cobra.Command, args []string) error {
			opts, err := ff.filter()
			if err != nil {
				return err
			}
			opts.Limit, opts.After, opts.Newest = limit, after, newest
			if opts.Limit < 1 {
				return usagef("--limit must be at least 1")
			}
			in, err := a.inspector()
			if err != nil {
				return err
			}
			groups, err := a.dlqGroups(c, in, args)
			if err != nil {
				return err
			}
			if len(groups) > 1 && opts.After != "" {
				return usagef("--after pages one group's dead letters: name the group")
			}
			rows := []deadRow{}
			now := time.Now()
			w := a.table()
			if !a.jsonOut {
				fmt.Fprintln(w, "GROUP\tENTRY ID\tDEAD-LETTERED\tMESSAGE ID\tREASON\tATTEMPT\tLAST ERROR\tPREVIEW")
			}
			shown, total := 0, int64(0)
			for _, g := range groups {
				ds, err := in.DeadLetters(ctxOf(c), args[0], g.Group, opts)
				if err != nil {
					return err
				}
				shown += len(ds)
				total += g.DeadLetters
				for _, r := range deadRows(ds) {
					r.Group = g.Group
					rows = append(rows, r)
				}
				for _, d := range ds {
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", g.Group, d.EntryID, when(d.At, now), orDash(d.ID), d.Reason,
						d.Attempt, orDash(cli.Preview([]byte(d.LastError), 60)), cli.Preview(d.Payload, cli.PreviewLen))
				}
			}
			if a.jsonOut {
				return a.printJSON(rows)
			}
			if shown == 0 {
				fmt.Fprintln(a.stdout, "no dead letters")
				return nil
			}
			if err := w.Flush(); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "%d shown of %d dead letter%s in %d group%s (at most %d a group: --limit; filters narrow what is shown)\n",
				shown, total, plural(int(total)), len(groups), plural(len(groups)), limit)
			return nil
		},
	}
	c.Flags().IntVarP(&limit, "limit", "n", 50, "most entries listed per group")
	c.Flags().StringVar(&after, "after", "", "list after this entry id (paging one group)")
	c.Flags().BoolVar(&newest, "newest", false, "newest first (--after then pages towards older ones)")
	ff.add(c)
	a.addJSON(c)
	return c
}

// dlqGroups returns the figures of the group named in args[1], or of
// every group of queue args[0] that delaystream can use.
func (a *app) dlqGroups(c *cobra.Command, in *admin.Operator, args []string) ([]admin.GroupReport, error) {
	rs, err := in.Stats(ctxOf(c), args[0])
	if err != nil {
		return nil, err
	}
	var out []admin.GroupReport
	for _, g := range rs[0].Groups {
		if g.Foreign || (len(args) == 2 && g.Group != args[1]) {
			continue
		}
		out = append(out, g)
	}
	if len(args) == 2 && len(out) == 0 {
		// Not a group of the queue: the call says why (an invalid name,
		// or not found).
		if _, err := in.DeadLetters(ctxOf(c), args[0], args[1], admin.ListOptions{Limit: 1}); err != nil {
			return nil, err
		}
		return []admin.GroupReport{{Group: args[1]}}, nil
	}
	return out, nil
}

func (a *app) dlqShowCmd() *cobra.Command {
	var byMessage bool
	c := &cobra.Command{
		Use:   "show <queue> <group> <entry-id | message-id>",
		Short: "One dead letter in full, by its entry id or its message's id (every dead letter of the message)",
		Args:  cobra.ExactArgs(3),
		RunE: func(c *cobra.Command, args []string) error {
			in, err := a.inspector()
			if err != nil {
				return err
			}
			ids, err := a.deadEntryIDs(c, in, args[0], args[1], args[2:3], byMessage)
			if err != nil {
				return err
			}
			ds, err := in.DeadLetters(ctxOf(c), args[0], args[1], admin.ListOptions{IDs: ids})
			if err != nil {
				return err
			}
			if a.jsonOut {
				if len(ds) == 1 {
					return a.printJSON(deadRows(ds)[0])
				}
				return a.printJSON(deadRows(ds))
			}
			for i, d := range ds {
				if i > 0 {
					fmt.Fprintln(a.stdout)
				}
				a.printDead(d)
			}
			return nil
		},
	}
	c.Flags().BoolVar(&byMessage, "message", false, "the id is a message id, even if it looks like an entry id")
	a.addJSON(c)
	return c
}

// printDead prints one dead letter in full.
func (a *app) printDead(d delaystream.DeadLetterEntry) {
	now := time.Now()
	w := a.table()
	fmt.Fprintf(w, "entry id\t%s\n", d.EntryID)
	fmt.Fprintf(w, "dead-lettered\t%s\n", when(d.At, now))
	fmt.Fprintf(w, "message id\t%s\n", orDash(d.ID))
	fmt.Fprintf(w, "reason\t%s\n", d.Reason)
	fmt.Fprintf(w, "last error\t%s\n", orDash(d.LastError))
	fmt.Fprintf(w, "attempt\t%d\n", d.Attempt)
	fmt.Fprintf(w, "deliveries\t%d\n", d.Deliveries)
	fmt.Fprintf(w, "source\t%s %s\n", d.Source, d.SourceID)
	fmt.Fprintf(w, "due\t%s\n", when(d.Due, now))
	fmt.Fprintf(w, "created\t%s\n", when(d.Created, now))
	fmt.Fprintf(w, "headers\t%s\n", headers(d.Headers))
	fmt.Fprintf(w, "decoded\t%v\n", d.Decoded)
	fmt.Fprintf(w, "size\t%d\n", d.Size)
	fmt.Fprintf(w, "payload\t%s\n", cli.Preview(d.Payload, 4096))
	_ = w.Flush()
}

// dlqActCmd builds `dlq redrive` and `dlq purge`.
func (a *app) dlqActCmd(action string) *cobra.Command {
	var (
		all, dryRun bool
		byMessage   bool
		delay       time.Duration
		ff          filterFlags
		short       = "Deliver dead letters again to their group (by id, or --all with filters)"
	)
	if action == "purge" {
		short = "Delete dead letters for good (by id, or --all with filters)"
	}
	c := &cobra.Command{
		Use:   action + " <queue> <group> [entry-id | message-id ...] [--all]",
		Short: short,
		Args:  cobra.MinimumNArgs(2),
		RunE: func(c *cobra.Command, args []string) error {
			f, err := ff.filter()
			if err != nil {
				return err
			}
			sel := admin.ActionOptions{IDs: args[2:], All: all, From: f.From, To: f.To, Reason: f.Reason, Delay: delay}
			if all == (len(sel.IDs) > 0) {
				return usagef("give entry ids or --all, not both or neither")
			}
			if !all && (!f.From.IsZero() || !f.To.IsZero() || f.Reason != "") {
				return usagef("--since, --from, --to and --reason select with --all only")
			}
			in, err := a.inspector()
			if err != nil {
				return err
			}
			queue, group := args[0], args[1]
			if sel.IDs, err = a.deadEntryIDs(c, in, queue, group, sel.IDs, byMessage); err != nil {
				return err
			}
			do := in.Redrive
			if action == "purge" {
				do = in.Purge
			}
			// Resolve first (a dry run), so the question names a count.
			dry := sel
			dry.DryRun = true
			res, err := do(ctxOf(c), queue, group, dry)
			if err != nil {
				return err
			}
			res.DryRun = dryRun
			if !dryRun && res.Matched > 0 {
				if err := a.confirm(fmt.Sprintf("%s %d dead letter%s of %s/%s", action, res.Matched, plural(res.Matched), queue, group)); err != nil {
					return err
				}
				if all && !res.IDsTruncated {
					// Act on exactly what was shown.
					sel = admin.ActionOptions{IDs: res.IDs, Delay: delay}
				}
				if res, err = do(ctxOf(c), queue, group, sel); err != nil {
					return err
				}
			}
			if err := a.printAction(action, res); err != nil {
				return err
			}
			if len(res.NotFound) > 0 {
				return fmt.Errorf("%w: %d of the dead letters given (listed above)", delaystream.ErrNotFound, len(res.NotFound))
			}
			return nil
		},
	}
	c.Flags().BoolVar(&all, "all", false, "every dead letter (narrowed by --since, --from, --to, --reason)")
	c.Flags().BoolVar(&dryRun, "dry-run", false, "show what would be done, write nothing")
	c.Flags().BoolVar(&byMessage, "message", false, "the ids are message ids, even those that look like entry ids")
	if action == "redrive" {
		c.Flags().DurationVar(&delay, "delay", 0, "deliver after this delay (Redis clock)")
	}
	ff.add(c)
	a.addYes(c)
	a.addJSON(c)
	return c
}

// printAction prints what a redrive or purge did, or would do.
func (a *app) printAction(action string, res admin.ActionResult) error {
	if a.jsonOut {
		return a.printJSON(res)
	}
	if res.DryRun {
		fmt.Fprintf(a.stdout, "dry run: would %s %d dead letter%s of %s/%s\n", action, res.Matched, plural(res.Matched), res.Queue, res.Group)
		for _, id := range res.IDs {
			fmt.Fprintf(a.stdout, "  %s\n", id)
		}
	} else {
		verb := map[string]string{"redrive": "redriven", "purge": "purged"}[action]
		fmt.Fprintf(a.stdout, "%s %d of %d dead letter%s of %s/%s\n", verb, res.Done, res.Matched, plural(res.Matched), res.Queue, res.Group)
	}
	for _, id := range res.NotFound {
		fmt.Fprintf(a.stdout, "  not found: %s\n", id)
	}
	for _, id := range res.Unrecoverable {
		fmt.Fprintf(a.stdout, "  unrecoverable (no valid envelope; purge it): %s\n", id)
	}
	return nil
}

func (a *app) quarantineCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "quarantine",
		Short: "Members the mover could not promote (undecodable, foreign), with their reason",
	}
	var limit int
	ls := &cobra.Command{
		Use:   "ls <queue>",
		Short: "List quarantined entries of a queue's main and retry lanes",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if limit < 1 {
				return usagef("--limit must be at least 1")
			}
			in, err := a.inspector()
			if err != nil {
				return err
			}
			qs, err := in.Quarantine(ctxOf(c), args[0], admin.ListOptions{Limit: limit})
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(quarantineRows(qs))
			}
			if len(qs) == 0 {
				fmt.Fprintln(a.stdout, "nothing quarantined")
				return nil
			}
			now := time.Now()
			w := a.table()
			fmt.Fprintln(w, "ENTRY ID\tLANE\tQUARANTINED\tMESSAGE ID\tDUE\tREASON\tPREVIEW")
			for _, q := range quarantineRows(qs) {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", q.EntryID, q.Lane, when(q.At, now), orDash(q.ID),
					when(q.Due, now), q.Reason, q.Preview)
			}
			return w.Flush()
		},
	}
	ls.Flags().IntVarP(&limit, "limit", "n", 100, "most entries listed")
	a.addJSON(ls)
	c.AddCommand(ls, a.quarantineActCmd("rm"), a.quarantineActCmd("restore"))
	return c
}

// quarantineActCmd builds `quarantine rm` and `quarantine restore`.
func (a *app) quarantineActCmd(action string) *cobra.Command {
	var (
		wait time.Duration
		all  bool
	)
	short := "Delete quarantined entries for good, by entry id or --all (asks for confirmation; --yes without a terminal)"
	if action == "restore" {
		short = "Put quarantined entries back once fixed: their messages wait again (asks for confirmation; --yes without a terminal)"
	}
	use := action + " <queue> <entry-id>..."
	if action == "rm" {
		use = action + " <queue> [entry-id...] [--all]"
	}
	c := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			queue, ids := args[0], args[1:]
			if (len(ids) == 0) != all {
				return usagef("give entry ids or --all, not both or neither")
			}
			if all {
				var err error
				if ids, err = a.allQuarantined(c, queue); err != nil {
					return err
				}
				if len(ids) == 0 {
					fmt.Fprintln(a.stdout, "nothing quarantined")
					return nil
				}
			}
			verb := map[string]string{"rm": "delete", "restore": "restore"}[action]
			in, err := a.confirmOn(c, queue, fmt.Sprintf("%s %d quarantined entr%s of queue %s", verb, len(ids), pluralY(len(ids)), queue))
			if err != nil {
				return err
			}
			var res admin.ActionResult
			if action == "rm" {
				res, err = in.DeleteQuarantined(ctxOf(c), queue, ids...)
			} else {
				res, err = in.RestoreQuarantined(ctxOf(c), queue, wait, ids...)
			}
			if err != nil {
				return err
			}
			if a.jsonOut {
				if err := a.printJSON(res); err != nil {
					return err
				}
			} else {
				done := map[string]string{"rm": "deleted", "restore": "restored"}[action]
				fmt.Fprintf(a.stdout, "%s %d of %d quarantined entr%s of %s\n", done, res.Done, len(ids), pluralY(len(ids)), queue)
				for _, id := range res.NotFound {
					fmt.Fprintf(a.stdout, "  not found: %s\n", id)
				}
				for _, id := range res.Unrecoverable {
					fmt.Fprintf(a.stdout, "  unrecoverable (no message id or readable envelope; rm it): %s\n", id)
				}
			}
			switch {
			case len(res.NotFound) > 0:
				return fmt.Errorf("%w: %d of the quarantined entries given (listed above)", delaystream.ErrNotFound, len(res.NotFound))
			case len(res.Unrecoverable) > 0:
				return fmt.Errorf("%d of the quarantined entries given could not be restored", len(res.Unrecoverable))
			}
			return nil
		},
	}
	if action == "restore" {
		c.Flags().DurationVar(&wait, "delay", 0, "deliver after this delay (or at the entry's due time, if later)")
	} else {
		c.Flags().BoolVar(&all, "all", false, fmt.Sprintf("every quarantined entry of the queue (up to %d at a time)", admin.MaxPeek))
	}
	a.addYes(c)
	a.addJSON(c)
	return c
}

// allQuarantined returns the entry ids of queue's quarantined entries, up
// to admin.MaxPeek of them.
func (a *app) allQuarantined(c *cobra.Command, queue string) ([]string, error) {
	in, err := a.inspector()
	if err != nil {
		return nil, err
	}
	qs, err := in.Quarantine(ctxOf(c), queue, admin.ListOptions{Limit: admin.MaxPeek, MaxPayloadBytes: 1})
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(qs))
	for i, q := range qs {
		ids[i] = q.EntryID
	}
	return ids, nil
}

func pluralY(n int) string {
	if n == 1 {
		return "y"
	}
	return "ies"
}

// entryIDPattern matches a dead letter's entry id: "<ms>-<seq>", with
// "@<shard>" on a sharded queue.
var entryIDPattern = regexp.MustCompile(`^\d+-\d+(@\d+)?$`)

// deadEntryIDs turns the ids given into dead-letter entry ids: an entry id
// stays as it is, any other id (or every id, byMessage) is a message id
// whose dead letters in group are looked up.
func (a *app) deadEntryIDs(c *cobra.Command, in *admin.Operator, queue, group string, ids []string, byMessage bool) ([]string, error) {
	var out []string
	for _, id := range ids {
		if !byMessage && entryIDPattern.MatchString(id) {
			out = append(out, id)
			continue
		}
		found, err := deadLetterIDs(ctxOf(c), in, queue, group, id)
		if err != nil {
			return nil, err
		}
		out = append(out, found...)
	}
	return out, nil
}

// deadLetterIDs returns the entry ids of the dead letters of message id
// in group of queue, found with Locate. None found wraps
// delaystream.ErrNotFound.
func deadLetterIDs(ctx context.Context, in *admin.Operator, queue, group, id string) ([]string, error) {
	q, err := in.Queue(ctx, queue)
	if err != nil {
		return nil, err
	}
	loc, err := q.Locate(ctx, id)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range loc.Places {
		if p.Group == group && p.Kind == delaystream.PlaceDeadLettered {
			out = append(out, p.EntryID)
		}
	}
	if len(out) == 0 {
		partial := ""
		if loc.Partial {
			partial = fmt.Sprintf(" within the first %d entries", delaystream.LocateScanLimit)
		}
		return nil, fmt.Errorf("no dead letter of message %s in group %s of queue %s%s: %w", id, group, queue, partial, delaystream.ErrNotFound)
	}
	return out, nil
}
