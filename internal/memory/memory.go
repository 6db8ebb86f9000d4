package memory

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream/internal/errs"
)

// NoEviction is the only maxmemory-policy under which Redis never evicts
// keys: a write past the limit is refused instead.
const NoEviction = "noeviction"

// Server is the memory state of one Redis server.
type Server struct {
	Addr   string // host:port; "" when the client does not say
	Used   int64  // used_memory, in bytes
	Max    int64  // maxmemory, in bytes; 0: no limit
	Policy string // maxmemory_policy; "" when unknown
	// Evicted is evicted_keys (INFO stats): the keys the server evicted
	// since it started; -1 when not known.
	Evicted int64
	Known   bool   // whether INFO had a memory section
	Why     string // why the settings are unknown, when not Known
}

// Evicts reports whether Redis may evict keys on s: a memory limit is set
// and its policy is not noeviction. volatile-* policies evict keys with a
// TTL only (a queue's leases and call tokens), allkeys-* any key.
func (s Server) Evicts() bool {
	return s.Known && s.Max > 0 && s.Policy != "" && s.Policy != NoEviction
}

// String describes s: "127.0.0.1:6379: used 8.1 MiB, maxmemory 8.0 MiB,
// maxmemory-policy allkeys-lru".
func (s Server) String() string {
	if !s.Known {
		return s.Addr + ": memory settings unknown (" + s.Why + ")"
	}
	limit := "none"
	if s.Max > 0 {
		limit = Bytes(s.Max)
	}
	return fmt.Sprintf("%s: used %s, maxmemory %s, maxmemory-policy %s", s.Addr, Bytes(s.Used), limit, s.Policy)
}

// Bytes formats n bytes for people: "512 B", "8.0 MiB".
func Bytes(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}

// Parse reads the memory fields of an INFO reply (and evicted_keys, when
// it has the stats section).
func Parse(info string) Server {
	s := Server{Evicted: -1}
	for line := range strings.Lines(info) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch k {
		case "used_memory":
			s.Used, _ = strconv.ParseInt(v, 10, 64)
			s.Known = true
		case "maxmemory":
			s.Max, _ = strconv.ParseInt(v, 10, 64)
		case "maxmemory_policy":
			s.Policy = v
		case "evicted_keys":
			s.Evicted, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	if s.Policy == "" {
		s.Known = false
	}
	return s
}

// Read returns the memory state of every server rdb writes to: each master
// of a Cluster, the server of any other client. A server that answers INFO
// memory with an error (an ACL refusing it, a server without the section)
// is returned not Known, with why; an error is returned only when a
// server could not be reached.
func Read(ctx context.Context, rdb redis.UniversalClient) ([]Server, error) {
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		var mu sync.Mutex
		var out []Server
		err := c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
			s, err := readOne(ctx, n, n.Options().Addr)
			mu.Lock()
			defer mu.Unlock()
			out = append(out, s)
			return err
		})
		sortServers(out)
		return out, err
	case *redis.Client:
		s, err := readOne(ctx, c, c.Options().Addr)
		return []Server{s}, err
	default:
		s, err := readOne(ctx, rdb, "")
		return []Server{s}, err
	}
}

func readOne(ctx context.Context, c redis.Cmdable, addr string) (Server, error) {
	info, err := c.Info(ctx, "memory", "stats").Result()
	var rerr redis.Error
	switch {
	case errors.As(err, &rerr): // the server answered: INFO refused (an ACL), or a section it lacks
		return Server{Addr: addr, Why: "INFO memory: " + rerr.Error()}, nil
	case err != nil:
		return Server{Addr: addr}, fmt.Errorf("INFO memory on %s: %w", addr, err)
	}
	s := Parse(info)
	s.Addr = addr
	if !s.Known {
		s.Why = "no memory section in INFO"
	}
	return s, nil
}

func sortServers(s []Server) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j].Addr < s[j-1].Addr; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// Evicting returns the servers of list whose policy can evict keys.
func Evicting(list []Server) []Server {
	var out []Server
	for _, s := range list {
		if s.Evicts() {
			out = append(out, s)
		}
	}
	return out
}

// OOMError is a write Redis refused because its memory is full (an OOM
// reply): it matches errs.ErrOutOfMemory and unwraps to Redis's reply.
type OOMError struct {
	Server Server // the server's memory state read after the refusal; Known false when it could not be read
	Err    error  // Redis's reply
}

// Error says what happened: "write refused, nothing written: used 8.1 MiB,
// maxmemory 8.0 MiB, maxmemory-policy noeviction (Redis: OOM ...)".
func (e *OOMError) Error() string {
	s := "delaystream: write refused, nothing written"
	if e.Server.Known {
		s += fmt.Sprintf(": used %s, maxmemory %s, maxmemory-policy %s", Bytes(e.Server.Used), Bytes(e.Server.Max), e.Server.Policy)
	}
	return s + " (Redis: " + e.Err.Error() + ")"
}

// Unwrap returns Redis's reply.
func (e *OOMError) Unwrap() error { return e.Err }

// Is matches errs.ErrOutOfMemory.
func (e *OOMError) Is(target error) bool { return target == errs.ErrOutOfMemory }

// IsOOM reports whether err is Redis refusing a write for memory.
func IsOOM(err error) bool {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return false
	}
	msg := rerr.Error()
	return strings.HasPrefix(msg, "OOM ") || strings.Contains(msg, "OOM command not allowed")
}

// Explain turns an OOM reply into an *OOMError carrying the memory state
// of the server (read from rdb; on a Cluster, the master nearest its
// limit), and returns any other error as it is.
func Explain(ctx context.Context, rdb redis.UniversalClient, err error) error {
	if !IsOOM(err) || errors.Is(err, errs.ErrOutOfMemory) {
		return err
	}
	oom := &OOMError{Err: err}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readTimeout)
	defer cancel()
	list, _ := Read(rctx, rdb)
	for _, s := range list {
		if s.Known && s.Max > 0 && (!oom.Server.Known || ratio(s) > ratio(oom.Server)) {
			oom.Server = s
		}
	}
	return oom
}

// readTimeout bounds the read of the memory state that explains a refusal.
const readTimeout = 2 * time.Second

func ratio(s Server) float64 { return float64(s.Used) / float64(s.Max) }
