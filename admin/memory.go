package admin

import (
	"context"
	"fmt"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/internal/memory"
)

// Memory reads the memory settings of every server the Operator's client
// writes to (each master of a Cluster), from INFO memory, sorted by
// address. A server that refuses INFO or has no memory section is
// returned not Known; an unreachable one fails the call.
func (in *Operator) Memory(ctx context.Context) ([]delaystream.RedisMemory, error) {
	list, err := memory.Read(ctx, in.rdb)
	if err != nil {
		return nil, fmt.Errorf("memory: %w", err)
	}
	out := make([]delaystream.RedisMemory, len(list))
	for i, s := range list {
		out[i] = delaystream.RedisMemory(s)
	}
	return out, nil
}

// evicting returns the servers of the Operator's client that can evict,
// or nil when they cannot be read.
func (in *Operator) evicting(ctx context.Context) []delaystream.RedisMemory {
	list, err := in.Memory(ctx)
	if err != nil {
		return nil
	}
	var out []delaystream.RedisMemory
	for _, s := range list {
		if s.Evicts() {
			out = append(out, s)
		}
	}
	return out
}
