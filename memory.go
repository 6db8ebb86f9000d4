package delaystream

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream/internal/memory"
)

// RedisMemory is the memory state of one Redis server a queue writes to
// (each master of a Cluster), from INFO memory and INFO stats.
type RedisMemory struct {
	Addr   string `json:"addr"`   // host:port
	Used   int64  `json:"used"`   // used_memory, in bytes
	Max    int64  `json:"max"`    // maxmemory, in bytes; 0: no limit
	Policy string `json:"policy"` // maxmemory-policy
	// Evicted is the keys the server evicted since it started
	// (evicted_keys); -1 when not known.
	Evicted int64 `json:"evicted"`
	// Known says whether the server reported its memory settings (a
	// server that refuses INFO, or has no memory section, does not);
	// Why says why not.
	Known bool   `json:"known"`
	Why   string `json:"why,omitempty"`
}

// Evicts reports whether the server may evict keys: its settings are
// known, a memory limit is set and its policy is not noeviction.
// allkeys-* policies evict any key (a message's envelope, a stream: the
// message is lost); volatile-* policies evict keys with a TTL (leases,
// call tokens). See docs/operations.md.
func (m RedisMemory) Evicts() bool { return memory.Server(m).Evicts() }

// String describes m: "127.0.0.1:6379: used 8.1 MiB, maxmemory 8.0 MiB,
// maxmemory-policy allkeys-lru".
func (m RedisMemory) String() string { return memory.Server(m).String() }

func redisMemory(s memory.Server) RedisMemory { return RedisMemory(s) }

func redisMemories(list []memory.Server) []RedisMemory {
	var out []RedisMemory
	for _, s := range list {
		out = append(out, redisMemory(s))
	}
	return out
}

// MemoryCheckInterval is how often a running Queue reads its servers'
// memory settings again (a CONFIG SET, a failover to a differently
// configured server).
const MemoryCheckInterval = time.Minute

// WithNoEvictionRequired makes the Queue refuse to work on a Redis whose
// maxmemory-policy can evict its keys: [Queue.Run] returns, and
// [Queue.Schedule] and [Queue.ScheduleBatch] refuse, with an error
// wrapping [ErrEvictionPolicy], writing nothing. Without it such a server
// is reported (a WARN log line, [WithEvictionHook], [Stats].Evicting)
// and used. A server whose settings cannot be read (INFO refused, or
// without a memory section) is not refused; it is logged.
func WithNoEvictionRequired() Option {
	return func(c *config) error {
		c.noEviction = true
		return nil
	}
}

// WithEvictionHook sets f to be called with the servers whose policy can
// evict the queue's keys whenever that set changes (nil when none is
// left), as read at the start of [Queue.Run], at the first schedule and
// every [MemoryCheckInterval] while Run runs. f must return quickly.
func WithEvictionHook(f func(evicting []RedisMemory)) Option {
	return func(c *config) error {
		c.evictionHook = f
		return nil
	}
}

// memWatch reads the memory settings of the queue's servers and reports
// those that can evict.
type memWatch struct {
	rdb     redis.UniversalClient
	log     *slog.Logger
	require bool
	hook    func([]RedisMemory)
	every   time.Duration

	state atomic.Pointer[memState] // nil until the first check that reached Redis

	mu       sync.Mutex               // one check at a time; guards reported
	reported map[string]memory.Server // server -> its settings last reported
}

// memState is the result of the latest check.
type memState struct {
	evicting []memory.Server
	refusal  error // ErrEvictionPolicy, with WithNoEvictionRequired
}

func newMemWatch(rdb redis.UniversalClient, cfg config) *memWatch {
	return &memWatch{rdb: rdb, log: cfg.logger, require: cfg.noEviction, hook: cfg.evictionHook,
		every: cfg.memEvery, reported: map[string]memory.Server{}}
}

// gate returns the refusal of the latest check, checking first if none
// was made: one atomic load once a check has been made.
func (w *memWatch) gate(ctx context.Context) error {
	if st := w.state.Load(); st != nil {
		return st.refusal
	}
	st, err := w.check(ctx)
	if err != nil || st == nil {
		return nil // Redis unreachable: the write itself says so
	}
	return st.refusal
}

// check reads every server's settings, reports what changed and records
// the result. It returns a nil state when Redis could not be reached.
func (w *memWatch) check(ctx context.Context) (*memState, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	list, err := memory.Read(ctx, w.rdb)
	if err != nil {
		w.log.DebugContext(ctx, "reading Redis memory settings failed", slog.Any("err", err))
		return nil, err
	}
	st := &memState{}
	changed := false
	for _, s := range list {
		changed = w.note(ctx, s) || changed
		if s.Evicts() {
			st.evicting = append(st.evicting, s)
		}
	}
	if len(st.evicting) > 0 && w.require {
		st.refusal = fmt.Errorf("%w: %s; set maxmemory-policy noeviction", ErrEvictionPolicy, st.evicting[0])
	}
	w.state.Store(st)
	if changed && w.hook != nil {
		w.hook(redisMemories(st.evicting))
	}
	return st, nil
}

// note logs server s's settings when they changed since last reported, and
// reports whether it evicts changed.
func (w *memWatch) note(ctx context.Context, s memory.Server) bool {
	last, seen := w.reported[s.Addr]
	if seen && last.Known == s.Known && last.Policy == s.Policy && last.Max == s.Max {
		return false
	}
	w.reported[s.Addr] = s
	switch {
	case !s.Known:
		w.logUnknown(ctx, s.String())
	case s.Evicts():
		w.log.WarnContext(ctx, "Redis may evict this queue's keys, and messages are then lost: set maxmemory-policy noeviction (CONFIG SET maxmemory-policy noeviction, and in redis.conf)",
			slog.String("server", s.Addr), slog.String("policy", s.Policy),
			slog.String("used", memory.Bytes(s.Used)), slog.String("maxmemory", memory.Bytes(s.Max)))
	case seen:
		w.log.InfoContext(ctx, "Redis no longer evicts", slog.String("server", s.Addr), slog.String("policy", s.Policy))
	}
	return last.Evicts() != s.Evicts()
}

// logUnknown logs that a server's settings could not be read: at Warn
// when they are required, else at Debug.
func (w *memWatch) logUnknown(ctx context.Context, why string) {
	level := slog.LevelDebug
	if w.require {
		level = slog.LevelWarn
	}
	w.log.Log(ctx, level, "Redis memory settings unknown; whether it may evict the queue's keys is not checked", slog.String("why", why))
}

// loop checks every w.every until ctx ends.
func (w *memWatch) loop(ctx context.Context) {
	t := time.NewTicker(w.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_, _ = w.check(ctx)
		}
	}
}
