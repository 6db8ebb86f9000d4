package group

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/delaystream/delaystream/internal/memory"
)

// The pauses between the tries of a settling write Redis refuses for
// memory: the first, doubling up to the last.
const (
	refusedFirstWait = 100 * time.Millisecond
	refusedMaxWait   = 5 * time.Second
)

// refusals is an episode of settling writes Redis refuses for memory,
// shared by a run's workers: its first refusal is logged, then lines at
// rising intervals (logpace), and its end once. The scripts of settling
// writes free before they write, so Redis accepts them on a full server;
// a server that refuses them all the same is waited for here.
type refusals struct {
	on atomic.Bool // an episode is on; guarded by mu for writes
	mu sync.Mutex
	f  failures
}

func (r *refusals) refused(ctx context.Context, log *slog.Logger, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.on.Store(true)
	r.f.failed(ctx, log, "Redis refuses writes for memory; failed entries stay held and pending, and their outcome is written once it accepts", err)
}

func (r *refusals) accepted(ctx context.Context, log *slog.Logger) {
	if !r.on.Load() {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.on.Load() {
		r.f.succeeded(ctx, log, "Redis accepts writes again; held outcomes written")
		r.on.Store(false)
	}
}

// store makes call, a settling write on shard sh (the retry of a failure,
// a dead letter), and returns its error. While Redis refuses it for memory
// (maxmemory reached under noeviction), store calls again after a growing,
// jittered pause: the entry stays pending and held (the extender keeps it
// from being reclaimed), its handler does not run again, and the worker
// takes no other entry, so intake backs off too. It gives up, returning
// the refusal, when wait ends (the drain timeout, or another consumer took
// the entry over): the entry then stays pending with the group.
func (s *settler) store(wait context.Context, sh *shard, call func(ctx context.Context) error) error {
	r, c := s.r, s.r.c
	pause := refusedFirstWait
	for {
		ctx, cancel := context.WithTimeout(r.opCtx, opTimeout)
		err := call(ctx)
		cancel()
		if err == nil {
			r.refused.accepted(r.opCtx, r.log)
		}
		if !memory.IsOOM(err) {
			return err
		}
		c.ctr.memoryRefused.Add(1)
		r.refused.refused(r.opCtx, r.log, c.explain(r.opCtx, err, sh))
		sleepCtx(wait, jitter(pause))
		if wait.Err() != nil {
			return err
		}
		pause = min(2*pause, refusedMaxWait)
	}
}
