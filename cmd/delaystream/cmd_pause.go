package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/delaystream/delaystream/admin"
)

func (a *app) pauseCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "pause <queue> [group]",
		Short: "Pause a queue's promotion, or a group's consumers, in every process until resumed",
		Long: "Without a group: the queue's shards promote nothing; due messages wait (shown as overdue) and\n" +
			"what is already in the stream is still handled. With a group: its consumers in every process\n" +
			"take no new entries (running handlers finish and are acknowledged); messages keep arriving in\n" +
			"the stream (the group's lag grows). The pause is kept in Redis, survives restarts, and is shown\n" +
			"by queues, stats and groups (PAUSED). Pausing what is paused keeps its first time.",
		Args: cobra.RangeArgs(1, 2),
		RunE: func(c *cobra.Command, args []string) error { return a.setPause(c, args, true) },
	}
	a.addJSON(c)
	return c
}

func (a *app) resumeCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "resume <queue> [group]",
		Short: "Resume a paused queue or group: everything due meanwhile is delivered, nothing early",
		Args:  cobra.RangeArgs(1, 2),
		RunE:  func(c *cobra.Command, args []string) error { return a.setPause(c, args, false) },
	}
	a.addJSON(c)
	return c
}

// setPause runs pause (on) or resume on the queue or group of args.
func (a *app) setPause(c *cobra.Command, args []string, on bool) error {
	in, err := a.inspector()
	if err != nil {
		return err
	}
	queue, group := args[0], ""
	var since time.Time
	verb := map[bool]string{true: "paused", false: "resumed"}[on]
	switch {
	case len(args) == 2: // a group, even an empty name (refused: never the whole queue)
		group = args[1]
		do := in.Resume
		if on {
			do = in.Pause
		}
		since, err = do(ctxOf(c), queue, group)
	case on:
		since, err = in.PauseQueue(ctxOf(c), queue)
	default:
		since, err = in.ResumeQueue(ctxOf(c), queue)
	}
	if err != nil {
		return err
	}
	what := "queue " + queue
	if group != "" {
		what = "group " + group + " of " + queue
	}
	if a.jsonOut {
		out := map[string]any{"queue": queue, "paused": on, "paused_since": nil}
		if group != "" {
			out["group"] = group
		}
		if !since.IsZero() {
			out["paused_since"] = since
		}
		return a.printJSON(out)
	}
	switch {
	case on:
		fmt.Fprintf(a.stdout, "%s %s (since %s)\n", verb, what, when(since, time.Now()))
	case since.IsZero():
		fmt.Fprintf(a.stdout, "%s was not paused\n", what)
	default:
		fmt.Fprintf(a.stdout, "%s %s (paused for %s)\n", verb, what, roundDur(time.Since(since)))
	}
	return nil
}

// paused renders a pause state for a PAUSED column: "-" or the time since.
func paused(since time.Time) string {
	if since.IsZero() {
		return "-"
	}
	return "since " + roundDur(time.Since(since))
}

// limits renders a group's flow limits for a LIMITS column: "-", or
// "3 at once (2 held), 200/s burst 20, waited 1m3s" (the consumers' time
// waiting for them, in all).
func limits(g admin.GroupReport) string {
	var parts []string
	if g.ConcurrencyLimit > 0 {
		parts = append(parts, fmt.Sprintf("%d at once (%d held)", g.ConcurrencyLimit, g.SlotsHeld))
	}
	if g.RatePerSecond > 0 {
		parts = append(parts, fmt.Sprintf("%s/s burst %d", strconv.FormatFloat(g.RatePerSecond, 'g', 4, 64), g.RateBurst))
	}
	if len(parts) == 0 {
		return "-"
	}
	if g.LimitWaitMs > 0 {
		parts = append(parts, "waited "+age(g.LimitWaitMs))
	}
	return strings.Join(parts, ", ")
}
