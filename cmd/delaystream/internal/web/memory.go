package web

import (
	"context"
	"sync"
	"time"

	"github.com/delaystream/delaystream"
)

// memoryTTL is how long the servers' memory settings read for the banner
// are reused before they are read again.
const memoryTTL = 10 * time.Second

// memoryCache holds the servers that can evict, as last read.
type memoryCache struct {
	mu       sync.Mutex
	read     time.Time
	evicting []delaystream.RedisMemory
}

// evicting returns the servers whose maxmemory-policy can evict the
// queues' keys, read at most every memoryTTL; nil when none or when they
// cannot be read.
func (s *Server) evicting(ctx context.Context) []delaystream.RedisMemory {
	s.mem.mu.Lock()
	defer s.mem.mu.Unlock()
	if time.Since(s.mem.read) < memoryTTL {
		return s.mem.evicting
	}
	s.mem.read = time.Now()
	s.mem.evicting = nil
	for _, in := range s.ins {
		list, err := in.Memory(ctx)
		if err != nil {
			return nil
		}
		for _, m := range list {
			if m.Evicts() {
				s.mem.evicting = append(s.mem.evicting, m)
			}
		}
		break // every prefix is on the same client
	}
	return s.mem.evicting
}
