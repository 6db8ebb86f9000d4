package group

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/delaystream/delaystream/internal/engine"
	"github.com/delaystream/delaystream/internal/errs"
	"github.com/delaystream/delaystream/internal/flow"
	"github.com/delaystream/delaystream/internal/heal"
	"github.com/delaystream/delaystream/internal/optcheck"
	"github.com/delaystream/delaystream/internal/runctx"
	"github.com/delaystream/delaystream/internal/stream"
)

// Retry-lane mover timing (see New).
const (
	retryLaneMaxIdle = 5 * time.Second
	retryLaneLease   = 6 * time.Second
	// idleProbe is how often a consumer's idle movers (the retry lane's and
	// the shared one of the queue) probe a lane's head for a lost wake-up:
	// a wake-up is lost only while the pub/sub connection is broken, and
	// every resubscription makes them look at once.
	idleProbe = 30 * time.Second
)

// Consumer reads a queue's due messages as one member of a consumer group,
// runs the handler, and acknowledges, retries, dead-letters or hands back
// each message. Create it with [New], start it with [Consumer.Run]. Its
// methods are safe for concurrent use.
type Consumer struct {
	core                // shared with the roles of Run (see state.go)
	mv   *engine.Engine // promotes the group's retry lane

	running atomic.Bool
}

// New returns a Consumer of group on queue. It validates everything (errors
// wrap [ErrInvalidOption]), talks to no server and starts nothing. The
// client is borrowed and never closed.
func New(rdb redis.UniversalClient, queue, group string, h Handler, opts ...Option) (*Consumer, error) {
	switch {
	case rdb == nil:
		return nil, fmt.Errorf("%w: nil redis client", ErrInvalidOption)
	case h == nil:
		return nil, fmt.Errorf("%w: nil handler", ErrInvalidOption)
	}
	if err := stream.ValidateName("group", group); err != nil {
		return nil, errs.Invalid(err)
	}
	cfg := defaultConfig()
	if err := optcheck.Apply(ErrInvalidOption, &cfg, opts); err != nil {
		return nil, err
	}
	layout, err := stream.NewLayout(cfg.prefix, queue, cfg.shards)
	if err != nil {
		return nil, errs.Invalid(err)
	}
	// The retry lane is woken through its channel by every retry that
	// becomes its head, so it polls rarely: idle it probes once per 30 s,
	// and a crashed lease holder delays retries by at most the lease TTL.
	mv, err := engine.New(rdb, queue, engine.WithPrefix(cfg.prefix), engine.WithRetryLaneOf(group), engine.WithLogger(cfg.logger),
		engine.WithMaxIdle(retryLaneMaxIdle), engine.WithIdleProbe(idleProbe), engine.WithLeaseTTL(retryLaneLease), engine.WithShards(cfg.shards),
		engine.WithPrecision(cfg.precision))
	if err != nil {
		return nil, fmt.Errorf("retry lane: %w", errs.Invalid(err))
	}
	c := &Consumer{mv: mv}
	c.init(rdb, layout, group, h, cfg)
	return c, nil
}

// Shards returns the shard count of the consumer's queue.
func (c *Consumer) Shards() int { return len(c.shards) }

// Name returns this consumer's name within the group.
func (c *Consumer) Name() string { return c.cfg.consumer }

// Run consumes until ctx is cancelled and returns nil after that requested
// stop, or an error when the group cannot be created. A key of the wrong
// type (someone SET the queue's stream, say) is not such an error: Run
// logs it (a *stream.KeyTypeError naming the key), goes on with the
// group's other streams and resumes the key's once it is deleted. A second
// concurrent Run returns [ErrRunning].
//
// It creates the group on the queue stream and on the group's retry lane if
// needed (idempotent), then reads both with XREADGROUP when the movers
// announce new entries on the lanes' arrivals channels (one pub/sub
// connection, outside the client's pool; without blocking, so no read
// holds a connection of the pool; and every 30 s in case an announcement
// was lost), reading ahead of the workers (see the package doc), runs up to the configured
// number of handlers at once, batches acknowledgements (an ack goes in the round trip
// of the next read, or alone after at most 50 ms, a quarter of the visibility timeout when that is shorter), reclaims entries idle longer than the visibility timeout with
// XAUTOCLAIM on the streams where entries may be pending (it listens to
// the movers' arrival announcements on one pub/sub connection), extends
// the hold of read and running entries, promotes the
// retry lane, and trims the streams after acknowledging entries. Unless
// built [WithoutPromotion], it also keeps the queue promoted: its process
// runs a mover of the queue while any of its consumers of the queue runs.
//
// On cancellation it stops reading at once, hands back the entries read
// ahead and not started, lets in-flight handlers finish for up to the
// drain timeout, then cancels them and hands their entries back (their idle time is set past the visibility timeout, so any consumer
// of the group reclaims them on its next pass). Worst-case shutdown time:
// the drain timeout (or one read in flight, bounded by 5 s), plus one
// Redis round trip per pending outcome (each bounded by 5 s) — provided
// handlers return when their ctx is cancelled.
func (c *Consumer) Run(ctx context.Context) error {
	if !c.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer c.running.Store(false)
	// A deadline on ctx ends the run like a cancellation: go-redis would
	// put it on the sockets, and a call cut by it fails before ctx
	// reports its end, which the roles would log as a Redis failure.
	ctx, release := runctx.WithoutDeadline(ctx)
	defer release()
	log := c.cfg.logger.With(slog.String("queue", c.queue), slog.String("group", c.group), slog.String("consumer", c.cfg.consumer))
	if err := c.start(ctx, log); err != nil || ctx.Err() != nil {
		return err
	}
	calls := c.cfg.joinCalls
	if !c.cfg.noPromote {
		// After the group exists: entries promoted before it would be
		// missed by a group created from new entries only.
		p, err := acquirePromoter(c, log)
		if err != nil {
			return err
		}
		defer releasePromoter(p)
		calls = p.eng
	}
	log.DebugContext(ctx, "consumer started")

	// The roles of this run, each in its own file: the reader (and the
	// reclaimer) queue entries for the workers, which pass outcomes to the
	// settler, which acknowledges through the acker and tells the trimmer
	// what it settled; the extender keeps held entries from being reclaimed.
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	r := &runState{c: &c.core, log: log, workCtx: workCtx, opCtx: context.WithoutCancel(workCtx), pause: newPauseState(), calls: calls}
	// A pause in place is obeyed (and reported) before anything is read.
	var pauseFails failures
	r.readPause(ctx, true, &pauseFails)
	trim := newTrimmer(r)
	ack := newAcker(r, trim)
	settle := &settler{r: r, ack: ack, trim: trim}
	rd := newReader(r, settle)
	c.intake.Store(rd)
	defer c.intake.Store(nil)
	c.recordLimits(ctx, log)
	ackDone := make(chan struct{})
	go func() { defer close(ackDone); ack.run() }()
	g, gctx := errgroup.WithContext(ctx)
	pool := &workers{r: r, rd: rd, settle: settle, intake: gctx}
	for range c.cfg.workers {
		r.handlers.Add(1)
		go pool.work()
	}
	// Intake (read and reclaim) feeds the workers; when it has stopped, the
	// job queue is closed and the workers drain it.
	var intake errgroup.Group
	intake.Go(func() error { return rd.read(gctx) })
	if !c.cfg.noReclaim {
		rc := &reclaimer{r: r, rd: rd}
		intake.Go(func() error { return rc.loop(gctx) })
	}
	g.Go(func() error {
		err := intake.Wait()
		close(rd.jobs)
		return err
	})
	ext := &extender{r: r}
	g.Go(func() error { return ext.loop(gctx) })
	g.Go(func() error { return r.watchPause(gctx) })
	if rd.lim != nil {
		g.Go(func() error { return rd.lim.loop(gctx) })
	}
	if !c.cfg.noTrim {
		g.Go(func() error { return trim.loop(gctx) })
	}
	g.Go(func() error { return c.mv.Run(gctx) })

	// Drain: when intake stops, in-flight handlers get the drain timeout,
	// then their contexts are cancelled and their entries handed back.
	stopDrain := context.AfterFunc(gctx, func() {
		t := time.NewTimer(c.cfg.drain)
		defer t.Stop()
		done := make(chan struct{})
		go func() { r.handlers.Wait(); close(done) }()
		select {
		case <-t.C:
			n := settle.handBackAll()
			log.WarnContext(ctx, "drain timeout; cancelled handlers and handed back their entries",
				slog.Duration("drain", c.cfg.drain), slog.Int("handed_back", n))
			cancelWork()
		case <-done:
		}
	})
	err := g.Wait()
	r.handlers.Wait()
	if rd.lim != nil {
		rd.lim.close()
	}
	stopDrain()
	ack.close()
	<-ackDone
	log.DebugContext(ctx, "consumer stopped")
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// DeadLetters returns the dead-letter handle of the consumer's group.
func (c *Consumer) DeadLetters() *DeadLetters { return newDeadLetters(c.rdb, c.layout, c.group) }

// Counters returns the running totals.
func (c *Consumer) Counters() Counters { return c.ctr.load() }

// Stats reads the group's and the queue's figures.
func (c *Consumer) Stats(ctx context.Context) (Stats, error) {
	return readStats(ctx, c.rdb, c.layout, c.group)
}

// ShardStats reads the group's and the queue's figures shard by shard.
func (c *Consumer) ShardStats(ctx context.Context) ([]Stats, error) {
	return readShardStats(ctx, c.rdb, c.layout, c.group)
}

// CreateGroup creates the group on every shard's queue stream and retry
// lane and records it in the queue's set of groups (which trimming waits
// for), checking the queue's shard count first; Run does the same when it
// starts, and a second call changes nothing. Call it before anything of
// the queue is promoted when the group must get every message from then
// on: trimming keeps what a recorded group has not read, but a group
// first created by a consumer that starts late only sees what the other
// groups' consumers have not trimmed yet. The front door ([Queue.Run] of
// package delaystream) does it for all its groups before its mover
// starts. It retries failures that pass by themselves (Redis unreachable,
// loading its data, failing over) with backoff until ctx ends, then
// returns ctx's error. A key of the wrong type is returned as an error
// wrapping [stream.ErrWrongType] (a *stream.KeyTypeError naming it).
func (c *Consumer) CreateGroup(ctx context.Context) error {
	log := c.cfg.logger.With(slog.String("queue", c.queue), slog.String("group", c.group), slog.String("consumer", c.cfg.consumer))
	if err := c.createGroup(ctx, log); err != nil {
		return err
	}
	return ctx.Err()
}

// start is what Run does first: createGroup, where a key of the wrong type
// is not an error: start logs it and returns nil, and the reader reads
// the group's other streams and recreates the group once the key is
// deleted; failing here would stop every part run with this consumer
// (the whole front-door Queue).
func (c *Consumer) start(ctx context.Context, log *slog.Logger) error {
	err := c.createGroup(ctx, log)
	if errors.Is(err, stream.ErrWrongType) {
		log.ErrorContext(ctx, "creating the group failed: a key holds the wrong type; reading the other streams until it is fixed",
			slog.Any("err", err))
		return nil
	}
	return err
}

// createGroup checks the queue's shard count (recording it on the queue's
// first use) and creates the group where it is missing. A failure that
// passes by itself (heal.Transient) is retried with backoff until ctx
// ends, when createGroup returns nil. It returns the error of a shard
// count that disagrees, of a key of the wrong type, and of anything that
// needs someone to act (a refused permission, say).
func (c *Consumer) createGroup(ctx context.Context, log *slog.Logger) error {
	backoff := 50 * time.Millisecond
	var fails failures
	for {
		err := c.guard.Check(ctx, c.rdb)
		if err == nil {
			err = c.ensureGroups(ctx)
		}
		switch {
		case ctx.Err() != nil:
			return nil
		case err == nil:
			fails.succeeded(ctx, log, "consumer started after failures")
			return nil
		case errors.Is(err, stream.ErrShardCount) || errors.Is(err, stream.ErrWrongType) || !heal.Transient(err):
			return err
		}
		heal.After(c.rdb, err)
		fails.failed(ctx, log, "starting the consumer failed; retrying", err, slog.Duration("retry_in", backoff))
		sleepCtx(ctx, jitter(backoff))
		backoff = min(2*backoff, 2*time.Second)
	}
}

// recordLimits records the consumer's flow limits in the group's flow
// state, for operators (a failure is logged: the limits hold anyway).
func (c *Consumer) recordLimits(ctx context.Context, log *slog.Logger) {
	rctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	if err := flow.Record(rctx, c.rdb, c.layout, c.group, c.cfg.limits); err != nil && ctx.Err() == nil {
		log.WarnContext(ctx, "recording the group's flow limits failed", slog.Any("err", err))
	}
}
