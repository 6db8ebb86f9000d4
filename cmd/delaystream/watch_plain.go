package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/mattn/go-isatty"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/admin"
)

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// watchPlain prints a plain table of the queues every interval until ctx
// ends, or once. A failed read is printed and retried at the next
// interval (with once, it is the command's error).
func (a *app) watchPlain(ctx context.Context, in *admin.Operator, queues []string, interval time.Duration, once bool) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	var hist histories
	for {
		rs, err := in.Stats(ctx, queues...)
		if err == nil && hist.stale() {
			hist = readHistories(ctx, in, rs)
		}
		switch {
		case ctx.Err() != nil:
			return nil // interrupted: a requested stop
		case err != nil && once:
			return err
		case err != nil:
			fmt.Fprintf(a.stdout, "%s error: %s\n", time.Now().Format(time.DateTime), sentence(err))
		default:
			a.printWatchTable(rs, hist)
		}
		if once {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (a *app) printWatchTable(rs []admin.QueueReport, hist histories) {
	fmt.Fprintf(a.stdout, "%s prefix %s\n", time.Now().Format(time.DateTime), a.prefix)
	if len(rs) == 0 {
		fmt.Fprintln(a.stdout, "no queues under this prefix")
	}
	w := a.table()
	fmt.Fprintln(w, "QUEUE\tGROUP\tWAITING\tOVERDUE\tSTREAM\tQUARANTINED\tLAG\tPENDING\tOLDEST PENDING\tRETRY\tDEAD\tDONE/MIN\tFAILED/MIN\tPAUSED")
	for _, s := range rs {
		h, counted := hist.read[s.Queue]
		promoted := "-"
		if counted {
			promoted = fmt.Sprint(h.LastMinute.Promoted)
		}
		fmt.Fprintf(w, "%s\t-\t%d\t%d\t%d\t%d\t\t\t\t\t\t%s\t\t%s\n", s.Queue, s.Waiting, s.Overdue, s.StreamLength, s.Quarantined,
			promoted, paused(s.PausedSince))
		for _, g := range s.Groups {
			done, failed := "-", "-"
			if counted {
				c := h.LastMinute.Groups[g.Group]
				done, failed = fmt.Sprint(c.Handled+c.Dropped), fmt.Sprint(c.Failed())
			}
			fmt.Fprintf(w, "%s\t%s\t\t\t\t\t%s\t%d\t%s\t%d\t%d\t%s\t%s\t%s\n", s.Queue, g.Group, lag(g.Lag), g.Pending,
				age(g.OldestPendingEntryAgeMs), g.RetryWaiting, g.DeadLetters, done, failed, paused(g.PausedSince))
		}
	}
	_ = w.Flush()
	warnEvicting(a.stdout, firstEvicting(rs))
}

// firstEvicting returns the evicting servers of the reports (the same
// for each).
func firstEvicting(rs []admin.QueueReport) []delaystream.RedisMemory {
	for _, r := range rs {
		if len(r.Evicting) > 0 {
			return r.Evicting
		}
	}
	return nil
}
