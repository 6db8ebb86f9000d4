package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/admin"
)

// errEvicting is returned by memory when a server can evict.
var errEvicting = errors.New("a Redis server may evict the queues' keys: set maxmemory-policy noeviction (see docs/operations.md, \"Redis memory\")")

func (a *app) memoryCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "memory",
		Short: "Memory settings of every Redis server (each master of a Cluster); exit status 1 when one may evict the queues' keys",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			in, err := a.inspector()
			if err != nil {
				return err
			}
			list, err := in.Memory(ctxOf(c))
			if err != nil {
				return err
			}
			evicting := false
			for _, s := range list {
				evicting = evicting || s.Evicts()
			}
			if a.jsonOut {
				if err := a.printJSON(list); err != nil {
					return err
				}
			} else {
				a.printMemory(list)
			}
			if evicting {
				return errEvicting
			}
			return nil
		},
	}
	a.addJSON(c)
	return c
}

func (a *app) printMemory(list []admin.ServerMemory) {
	w := a.table()
	fmt.Fprintln(w, "SERVER\tUSED\tMAXMEMORY\tPOLICY\tEVICTS")
	for _, s := range list {
		if !s.Known {
			fmt.Fprintf(w, "%s\t?\t?\t?\tunknown (%s)\n", s.Addr, s.Why)
			continue
		}
		limit := "none"
		if s.Max > 0 {
			limit = bytesText(s.Max)
		}
		evicts := "no"
		if s.Evicts() {
			evicts = "YES: messages can be lost"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", s.Addr, bytesText(s.Used), limit, s.Policy, evicts)
	}
	_ = w.Flush()
}

// warnEvicting writes a warning line per server that can evict.
func warnEvicting(out io.Writer, evicting []delaystream.RedisMemory) {
	for _, s := range evicting {
		fmt.Fprintf(out, "WARNING: Redis %s has maxmemory-policy %s with maxmemory set: it may evict the queues' keys and lose messages; set maxmemory-policy noeviction\n",
			s.Addr, s.Policy)
	}
}

// bytesText formats n bytes for people ("8.0 MiB").
func bytesText(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}
