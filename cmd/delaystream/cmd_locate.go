package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/delaystream/delaystream"
)

func (a *app) locateCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "locate <queue> <id>",
		Short: "Every place of a message: waiting, ready or pending in a group, retrying, dead-lettered, quarantined, handled (exit 3 when nowhere)",
		Args:  cobra.ExactArgs(2),
		RunE: func(c *cobra.Command, args []string) error {
			return a.locate(c, args[0], args[1])
		},
	}
	a.addJSON(c)
	return c
}

// locate prints every place of message id in queue; a message found
// nowhere is an error wrapping delaystream.ErrNotFound (after the
// output).
func (a *app) locate(c *cobra.Command, queue, id string) error {
	in, err := a.inspector()
	if err != nil {
		return err
	}
	q, err := in.Queue(ctxOf(c), queue)
	if err != nil {
		return err
	}
	loc, err := q.Locate(ctxOf(c), id)
	if err != nil {
		return err
	}
	switch {
	case a.jsonOut:
		if err := a.printJSON(loc); err != nil {
			return err
		}
	case loc.Found():
		a.printLocation(loc)
	}
	if !loc.Found() {
		if loc.Partial {
			return fmt.Errorf("message %s of queue %s: %w within the first %d entries of each stream", id, queue, delaystream.ErrNotFound, delaystream.LocateScanLimit)
		}
		return fmt.Errorf("message %s of queue %s: %w anywhere (handled by every group that keeps no records of it, cancelled, or never scheduled)", id, queue, delaystream.ErrNotFound)
	}
	return nil
}

func (a *app) printLocation(loc delaystream.Location) {
	now := time.Now()
	fmt.Fprintf(a.stdout, "message %s (shard %d)\n", loc.ID, loc.Shard)
	w := a.table()
	fmt.Fprintln(w, "WHERE\tGROUP\tENTRY\tDETAILS")
	for _, p := range loc.Places {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", p.Kind, orDash(p.Group), orDash(p.EntryID), placeDetails(p, now))
	}
	_ = w.Flush()
	if loc.Partial {
		fmt.Fprintf(a.stdout, "partial: a stream held more than %d entries; entries beyond them were not searched\n", delaystream.LocateScanLimit)
	}
}

func placeDetails(p delaystream.Place, now time.Time) string {
	lane := ""
	if p.RetryLane {
		lane = " (retry lane)"
	}
	switch p.Kind {
	case delaystream.PlaceWaiting:
		if p.Problem != "" {
			return fmt.Sprintf("due %s, %s: it cannot be delivered, and is quarantined when due", when(p.Due, now), strings.ToUpper(p.Problem))
		}
		return fmt.Sprintf("due %s, attempt %d", when(p.Due, now), p.Attempt)
	case delaystream.PlaceUnread:
		return "in the stream; the queue has no consumer group yet"
	case delaystream.PlacePending:
		return fmt.Sprintf("consumer %s, attempt %d, %d deliveries, idle %s%s", p.Consumer, p.Attempt, p.Deliveries, roundDur(p.Idle), lane)
	case delaystream.PlaceRetrying:
		return fmt.Sprintf("attempt %d due %s", p.Attempt, when(p.Due, now))
	case delaystream.PlaceDeadLettered:
		return fmt.Sprintf("reason %q, attempt %d: %s", p.Reason, p.Attempt, p.LastError)
	case delaystream.PlaceHandled:
		how := "handled"
		if p.Dropped {
			how = "dropped by its handler"
		}
		return fmt.Sprintf("%s at %s, attempt %d, consumer %s", how, when(p.HandledAt, now), p.Attempt, p.Consumer)
	case delaystream.PlaceQuarantined:
		return fmt.Sprintf("reason %q", p.Reason)
	}
	return fmt.Sprintf("attempt %d, not yet delivered to the group%s", p.Attempt, lane)
}
