package group

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream/internal/engine"
)

// A Consumer keeps its queue promoted (unless built [WithoutPromotion]):
// while it runs, its process runs a mover of the queue's main lanes, so
// that a program of producers and consumers alone delivers. The consumers
// of one queue in one process share that mover (one per Redis client,
// prefix, queue and shard count), so a process with many groups or
// consumers promotes the queue once, not once per consumer. Across
// processes it is like running several mover.Movers: the lease (or, for a
// sharded queue, the registry of live movers) makes them share the work,
// and promotion stays one atomic script, so nothing is promoted twice.
// The first of its consumers to run reads in the pipelines of the shared
// mover's promote calls (take.go), as one built WithoutPromotion and
// WithPromoteCalls does in those of the mover it names.

// promoters are the process's shared movers, by what they promote.
var promoters = struct {
	sync.Mutex
	m map[promoterKey]*promoter
}{m: map[promoterKey]*promoter{}}

// promoterKey identifies the main lanes a shared mover promotes: the client
// is part of it, so that consumers on different clients (or servers) never
// share a mover.
type promoterKey struct {
	rdb    redis.UniversalClient
	prefix string
	queue  string
	shards int
	prec   time.Duration
}

// promoter is one shared mover and the consumers running on it.
type promoter struct {
	key    promoterKey
	eng    *engine.Engine
	refs   int
	cancel context.CancelFunc
	done   chan struct{}
}

// acquirePromoter returns the shared mover of c's queue, started if c is
// its first user; release it with releasePromoter when c's Run ends.
func acquirePromoter(c *Consumer, log *slog.Logger) (*promoter, error) {
	k := promoterKey{rdb: c.rdb, prefix: c.cfg.prefix, queue: c.queue, shards: c.cfg.shards, prec: c.cfg.precision}
	promoters.Lock()
	defer promoters.Unlock()
	if p := promoters.m[k]; p != nil {
		p.refs++
		return p, nil
	}
	eng, err := engine.New(c.rdb, c.queue, engine.WithPrefix(c.cfg.prefix), engine.WithShards(c.cfg.shards),
		engine.WithLogger(c.cfg.logger), engine.WithIdleProbe(idleProbe), engine.WithPrecision(c.cfg.precision))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &promoter{key: k, eng: eng, refs: 1, cancel: cancel, done: make(chan struct{})}
	promoters.m[k] = p
	go func() {
		defer close(p.done)
		// Run returns an error only for what no retry fixes (the queue's
		// recorded shard count disagrees); the consumer meets the same
		// error at its own check, so it is logged here and not repeated.
		if err := eng.Run(ctx); err != nil {
			log.Error("the consumer's mover stopped; the queue is not promoted by this process", slog.Any("err", err))
		}
	}()
	return p, nil
}

// releasePromoter gives back p; the last user stops it and waits until it
// has released its leases (or left the movers' registry), so that another
// process's mover takes over at once rather than after a lease TTL.
func releasePromoter(p *promoter) {
	promoters.Lock()
	p.refs--
	last := p.refs == 0
	if last {
		delete(promoters.m, p.key)
	}
	promoters.Unlock()
	if last {
		p.cancel()
		<-p.done
	}
}
