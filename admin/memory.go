package admin

import (
	"context"
	"fmt"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/internal/memory"
)

// ServerMemory is the memory state of one Redis server: its figures, and
// whether they could be read.
type ServerMemory struct {
	delaystream.RedisMemory
	Known bool   `json:"known"`         // whether the server reported its memory settings
	Why   string `json:"why,omitempty"` // why not, when not Known
}

// Evicts reports whether the server may evict keys (see
// delaystream.RedisMemory.Evicts); false when its settings are unknown.
func (s ServerMemory) Evicts() bool { return s.Known && s.RedisMemory.Evicts() }

// Memory reads the memory settings of every server the Inspector's client
// writes to (each master of a Cluster), from INFO memory, sorted by
// address. A server that refuses INFO or has no memory section is
// returned not Known; an unreachable one fails the call.
func (in *Inspector) Memory(ctx context.Context) ([]ServerMemory, error) {
	list, err := memory.Read(ctx, in.rdb)
	if err != nil {
		return nil, fmt.Errorf("memory: %w", err)
	}
	out := make([]ServerMemory, len(list))
	for i, s := range list {
		out[i] = ServerMemory{RedisMemory: delaystream.RedisMemory{Addr: s.Addr, Used: s.Used, Max: s.Max, Policy: s.Policy, Evicted: s.Evicted},
			Known: s.Known, Why: s.Why}
	}
	return out, nil
}

// evicting returns the servers of the Inspector's client that can evict,
// or nil when they cannot be read.
func (in *Inspector) evicting(ctx context.Context) []delaystream.RedisMemory {
	list, err := in.Memory(ctx)
	if err != nil {
		return nil
	}
	var out []delaystream.RedisMemory
	for _, s := range list {
		if s.Evicts() {
			out = append(out, s.RedisMemory)
		}
	}
	return out
}
