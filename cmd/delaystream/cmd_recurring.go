package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/cmd/delaystream/internal/cli"
	"github.com/delaystream/delaystream/contrib/cron"
)

// recurringRow is one schedule as `recurring ls --json` prints it.
type recurringRow struct {
	ID         string            `json:"id"`
	Spec       string            `json:"spec"` // "<kind> <text>"
	Paused     bool              `json:"paused"`
	Revision   int64             `json:"revision"`
	Missed     string            `json:"missed"`
	Next       time.Time         `json:"next,omitzero"`
	Last       time.Time         `json:"last,omitzero"`
	LastFired  time.Time         `json:"last_fired,omitzero"`
	LatenessMs *int64            `json:"last_lateness_ms,omitempty"`
	Headers    map[string]string `json:"headers,omitempty"`
	Preview    string            `json:"preview"`
}

func recurringRowOf(s delaystream.RecurringStatus) recurringRow {
	r := recurringRow{ID: s.ID, Spec: s.SpecKind + " " + s.SpecText, Paused: s.Paused, Revision: s.Revision,
		Missed: s.Missed.String(), Next: s.Next, Last: s.Last, LastFired: s.LastFired, Headers: s.Headers,
		Preview: cli.Preview(s.Payload, 64)}
	if late, ok := s.Lateness(); ok {
		ms := late.Milliseconds()
		r.LatenessMs = &ms
	}
	return r
}

func (a *app) recurringCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "recurring",
		Short: "Recurring schedules of a queue: ls, define, pause, resume, rm",
	}
	c.AddCommand(a.recurringLsCmd(), a.recurringDefineCmd(),
		a.recurringChangeCmd("pause", "Pause a schedule (its waiting occurrences not yet due are removed)"),
		a.recurringChangeCmd("resume", "Resume a paused schedule from its next occurrence"),
		a.recurringChangeCmd("rm", "Delete a schedule and its waiting occurrences not yet due (asks for confirmation; --yes without a terminal)"))
	return c
}

func (a *app) recurringLsCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "ls <queue>",
		Short: "List the recurring schedules of a queue: spec, state, next and last occurrence, how late the last fired",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			in, err := a.inspector()
			if err != nil {
				return err
			}
			q, err := in.Queue(ctxOf(c), args[0], cron.Option())
			if err != nil {
				return err
			}
			list, err := q.ListRecurring(ctxOf(c))
			if err != nil {
				return err
			}
			rows := make([]recurringRow, len(list))
			for i, s := range list {
				rows[i] = recurringRowOf(s)
			}
			if a.jsonOut {
				return a.printJSON(rows)
			}
			if len(rows) == 0 {
				fmt.Fprintf(a.stdout, "no recurring schedules in queue %s\n", args[0])
				return nil
			}
			now := time.Now()
			w := a.table()
			fmt.Fprintln(w, "ID\tSPEC\tSTATE\tNEXT\tLAST\tLATE\tMISSED\tREV")
			for _, r := range rows {
				state, late := "active", "-"
				if r.Paused {
					state = "paused"
				}
				if r.LatenessMs != nil {
					late = roundDur(time.Duration(*r.LatenessMs) * time.Millisecond)
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\n", r.ID, r.Spec, state, when(r.Next, now), when(r.Last, now),
					late, r.Missed, r.Revision)
			}
			return w.Flush()
		},
	}
	a.addJSON(c)
	return c
}

// defineFlags are the flags of `recurring define`.
type defineFlags struct {
	every                time.Duration
	cronExpr, zone       string
	payload, payloadFile string
	headers              []string
	missed               string
}

func (f *defineFlags) recurring(id string) (delaystream.Recurring, error) {
	r := delaystream.Recurring{ID: id, Payload: []byte(f.payload)}
	switch {
	case (f.every != 0) == (f.cronExpr != ""):
		return r, usagef("give one of --every and --cron")
	case f.every != 0:
		r.Spec = delaystream.Every(f.every)
	default:
		spec, err := cron.New(f.cronExpr, f.zone)
		if err != nil {
			return r, usagef("--cron: %w", err)
		}
		r.Spec = spec
	}
	if f.payloadFile != "" {
		if f.payload != "" {
			return r, usagef("give --payload or --payload-file, not both")
		}
		b, err := os.ReadFile(f.payloadFile)
		if err != nil {
			return r, usagef("--payload-file: %w", err)
		}
		r.Payload = b
	}
	for _, h := range f.headers {
		k, v, ok := strings.Cut(h, "=")
		if !ok {
			return r, usagef("--header %q: want key=value", h)
		}
		if r.Headers == nil {
			r.Headers = map[string]string{}
		}
		r.Headers[k] = v
	}
	var err error
	if r.Missed, err = delaystream.ParseMissedPolicy(f.missed); err != nil {
		return r, usageError{err}
	}
	return r, nil
}

func (a *app) recurringDefineCmd() *cobra.Command {
	var f defineFlags
	c := &cobra.Command{
		Use:   "define <queue> <id>",
		Short: "Create or update a recurring schedule (the same definition again changes nothing)",
		Args:  cobra.ExactArgs(2),
		RunE: func(c *cobra.Command, args []string) error {
			r, err := f.recurring(args[1])
			if err != nil {
				return err
			}
			in, err := a.inspector()
			if err != nil {
				return err
			}
			q, err := in.Queue(ctxOf(c), args[0], cron.Option())
			if err != nil {
				return err
			}
			out, err := q.DefineRecurring(ctxOf(c), r)
			if errors.Is(err, delaystream.ErrInvalidMessage) {
				return usageError{err} // a bad definition is a bad command line
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "%s %s\n", out, args[1])
			if f.cronExpr != "" {
				fmt.Fprintf(a.stderr, "note: a cron schedule's occurrences are computed by the processes that run queue %s; "+
					"each must be built with contrib/cron (delaystream.New(…, cron.Option())): one that is not warns once in its log "+
					"and leaves the schedule to the others, and with none the schedule is never topped up\n", args[0])
			}
			return nil
		},
	}
	fl := c.Flags()
	fl.DurationVar(&f.every, "every", 0, "fire at every multiple of this interval since the Unix epoch (at least 1s)")
	fl.StringVar(&f.cronExpr, "cron", "", `cron expression ("0 9 * * MON"; an optional leading seconds field)`)
	fl.StringVar(&f.zone, "zone", "UTC", "IANA time zone of --cron")
	fl.StringVar(&f.payload, "payload", "", "payload of each occurrence")
	fl.StringVar(&f.payloadFile, "payload-file", "", "read the payload from this file")
	fl.StringArrayVar(&f.headers, "header", nil, "header key=value of each occurrence (repeatable)")
	fl.StringVar(&f.missed, "missed", "skip", "missed occurrences while no process ran: skip or fire-once")
	return c
}

func (a *app) recurringChangeCmd(verb, short string) *cobra.Command {
	c := &cobra.Command{
		Use:   verb + " <queue> <id>",
		Short: short,
		Args:  cobra.ExactArgs(2),
		RunE: func(c *cobra.Command, args []string) error {
			queue, id := args[0], args[1]
			in, err := a.inspector()
			if verb == "rm" {
				in, err = a.confirmOn(c, queue, fmt.Sprintf("delete recurring schedule %s of queue %s", id, queue))
			}
			if err != nil {
				return err
			}
			q, err := in.Queue(ctxOf(c), queue)
			if err != nil {
				return err
			}
			switch verb {
			case "pause":
				err = q.PauseRecurring(ctxOf(c), id)
			case "resume":
				err = q.ResumeRecurring(ctxOf(c), id)
			default:
				err = q.DeleteRecurring(ctxOf(c), id)
			}
			if err != nil {
				return err
			}
			done := map[string]string{"pause": "paused", "resume": "resumed", "rm": "deleted"}[verb]
			fmt.Fprintf(a.stdout, "%s %s\n", done, id)
			return nil
		},
	}
	if verb == "rm" {
		a.addYes(c)
	}
	return c
}
