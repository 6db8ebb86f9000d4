package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/admin"
	"github.com/delaystream/delaystream/internal/memory"
)

// errEvicting is returned by memory when a server can evict.
var errEvicting = errors.New("a Redis server may evict the queues' keys: set maxmemory-policy noeviction (see docs/operations.md, \"Redis memory\")")

// errFull is returned by memory when a server is full and evicts nothing.
var errFull = errors.New("a Redis server is full: Schedule is refused until the groups drain it or maxmemory is raised (see docs/operations.md, \"Redis memory\")")

func (a *app) memoryCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "memory",
		Short: "Memory settings of every Redis server (each master of a Cluster); exit status 1 when one may evict the queues' keys or is full",
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
			evicting, full := false, false
			for _, s := range list {
				evicting = evicting || s.Evicts()
				full = full || isFull(s)
			}
			if a.jsonOut {
				if err := a.printJSON(list); err != nil {
					return err
				}
			} else {
				a.printMemory(list)
			}
			switch {
			case evicting:
				return errEvicting
			case full:
				return errFull
			}
			return nil
		},
	}
	a.addJSON(c)
	return c
}

func (a *app) printMemory(list []delaystream.RedisMemory) {
	w := a.table()
	fmt.Fprintln(w, "SERVER\tUSED\tMAXMEMORY\tPOLICY\tEVICTED KEYS\tEVICTS")
	for _, s := range list {
		if !s.Known {
			fmt.Fprintf(w, "%s\t?\t?\t?\t?\tunknown (%s)\n", s.Addr, s.Why)
			continue
		}
		limit := "none"
		if s.Max > 0 {
			limit = memory.Bytes(s.Max)
		}
		evicts := "no"
		if s.Evicts() {
			evicts = "YES: messages can be lost"
		}
		evicted := "?"
		if s.Evicted >= 0 {
			evicted = fmt.Sprint(s.Evicted)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", s.Addr, memory.Bytes(s.Used), limit, s.Policy, evicted, evicts)
	}
	_ = w.Flush()
}

// isFull reports whether s evicts nothing and has reached its maxmemory:
// every write that adds memory is refused (Schedule among them).
func isFull(s delaystream.RedisMemory) bool {
	return s.Known && !s.Evicts() && s.Max > 0 && s.Used >= s.Max
}

// warnMemory writes a warning line per server of in's client that can
// evict or is full, read now (nothing when they cannot be read: the
// command's own reads report that).
func (a *app) warnMemory(ctx context.Context, in *admin.Operator) {
	list, err := in.Memory(ctx)
	if err != nil {
		return
	}
	var evicting []delaystream.RedisMemory
	for _, s := range list {
		if s.Evicts() {
			evicting = append(evicting, s)
		}
		if isFull(s) {
			fmt.Fprintf(a.stderr, "WARNING: Redis %s is full (used %s of maxmemory %s, maxmemory-policy %s): Schedule is refused until the groups drain it or maxmemory is raised\n",
				s.Addr, memory.Bytes(s.Used), memory.Bytes(s.Max), s.Policy)
		}
	}
	warnEvicting(a.stderr, evicting)
}

// warnEvicting writes a warning line per server that can evict.
func warnEvicting(out io.Writer, evicting []delaystream.RedisMemory) {
	for _, s := range evicting {
		fmt.Fprintf(out, "WARNING: Redis %s has maxmemory-policy %s with maxmemory set: it may evict the queues' keys and lose messages; set maxmemory-policy noeviction\n",
			s.Addr, s.Policy)
	}
}
