package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/delaystream/delaystream/admin"
)

func (a *app) deleteQueueCmd() *cobra.Command {
	var force, dryRun bool
	c := &cobra.Command{
		Use:   "delete-queue <queue>",
		Short: "Delete a queue with everything in it (asks for confirmation; --yes without a terminal); refused while it is in use unless --force",
		Long: `delete-queue deletes every key of a queue: waiting messages, streams, consumer groups with their
retry lanes and dead letters, quarantine and its record. It is refused while the queue is in use
(a live consumer of any group, or a process promoting it) unless --force; stop those processes
first, or they recreate part of it.`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			queue := args[0]
			in, err := a.inspector()
			if err != nil {
				return err
			}
			res, err := in.DeleteQueue(ctxOf(c), queue, admin.ActionOptions{DryRun: true})
			if err != nil {
				return err
			}
			if len(res.InUse) > 0 && !force && !dryRun {
				return fmt.Errorf("queue %s is in use by %s: stop those processes first, or pass --force", queue, strings.Join(res.InUse, ", "))
			}
			if !dryRun {
				what := fmt.Sprintf("delete queue %s with its %d keys (waiting messages, streams, %d group%s, dead letters)",
					queue, res.Keys, len(res.Groups), plural(len(res.Groups)))
				if err := a.confirm(what); err != nil {
					return err
				}
				if res, err = in.DeleteQueue(ctxOf(c), queue, admin.ActionOptions{Force: force}); err != nil {
					return err
				}
			}
			if a.jsonOut {
				return a.printJSON(res)
			}
			if dryRun {
				fmt.Fprintf(a.stdout, "dry run: would delete queue %s: %d keys, groups %s\n", queue, res.Keys, orDash(strings.Join(res.Groups, ", ")))
			} else {
				fmt.Fprintf(a.stdout, "deleted queue %s: %d keys\n", queue, res.Keys)
			}
			if len(res.InUse) > 0 {
				fmt.Fprintf(a.stdout, "in use by %s\n", strings.Join(res.InUse, ", "))
			}
			return nil
		},
	}
	c.Flags().BoolVar(&force, "force", false, "delete even while consumers or movers use the queue")
	c.Flags().BoolVar(&dryRun, "dry-run", false, "show what would be deleted, delete nothing")
	a.addYes(c)
	a.addJSON(c)
	return c
}
