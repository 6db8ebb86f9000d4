package group

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/delaystream/delaystream/codec"
	"github.com/delaystream/delaystream/internal/scripts"
	"github.com/delaystream/delaystream/mover"
	"github.com/delaystream/delaystream/stream"
)

// Retry-lane mover timing (see New).
const (
	retryLaneMaxIdle = 5 * time.Second
	retryLaneLease   = 6 * time.Second
)

// opTimeout bounds one Redis call made for a message outcome, so a hung
// connection cannot stall a worker for ever.
const opTimeout = 5 * time.Second

// Consumer reads a queue's due messages as one member of a consumer group,
// runs the handler, and acknowledges, retries, dead-letters or hands back
// each message. Create it with [New], start it with [Consumer.Run]. Its
// methods are safe for concurrent use.
type Consumer struct {
	rdb   redis.UniversalClient
	queue string
	group string
	keys  stream.Keys
	main  stream.Lane
	retry stream.Lane
	dead  string
	h     Handler
	cfg   config
	mv    *mover.Mover

	running atomic.Bool
	ctr     counters

	mu       sync.Mutex
	inflight map[flightKey]*flight
}

type flightKey struct{ stream, id string }

// flight is an entry this consumer holds: read or reclaimed, not yet settled.
type flight struct {
	key        flightKey
	since      time.Time               // when this consumer got it or last extended it; guarded by Consumer.mu
	cancel     context.CancelCauseFunc // set when the handler starts; guarded by Consumer.mu
	handedBack atomic.Bool
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
		return nil, fmt.Errorf("%w: %w", ErrInvalidOption, err)
	}
	cfg := defaultConfig()
	for _, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("%w: nil option", ErrInvalidOption)
		}
		if err := opt(&cfg); err != nil {
			return nil, err
		}
	}
	if cfg.prefetch < 0 {
		cfg.prefetch = 4 * cfg.workers
	}
	keys, err := stream.NewKeys(cfg.prefix, queue, 0, 1)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOption, err)
	}
	// The retry lane is woken through its channel by every retry that
	// becomes its head, so it polls rarely: idle it costs about 0.4 calls/s
	// per consumer, and a crashed lease holder delays retries by at most
	// the lease TTL.
	mv, err := mover.New(rdb, queue, mover.WithPrefix(cfg.prefix), mover.WithRetryLaneOf(group), mover.WithLogger(cfg.logger),
		mover.WithMaxIdle(retryLaneMaxIdle), mover.WithLeaseTTL(retryLaneLease))
	if err != nil {
		return nil, fmt.Errorf("%w: retry lane: %w", ErrInvalidOption, err)
	}
	return &Consumer{
		rdb: rdb, queue: queue, group: group, keys: keys,
		main: keys.Main(), retry: keys.Retry(group), dead: keys.DeadLetters(group),
		h: h, cfg: cfg, mv: mv, inflight: make(map[flightKey]*flight),
	}, nil
}

// Name returns this consumer's name within the group.
func (c *Consumer) Name() string { return c.cfg.consumer }

// Run consumes until ctx is cancelled and returns nil after that requested
// stop, or an error when the group cannot be created. A second concurrent
// Run returns [ErrRunning].
//
// It creates the group on the queue stream and on the group's retry lane if
// needed (idempotent), then reads both with XREADGROUP (block 1 s), runs up
// to the configured number of handlers at once, batches acknowledgements
// (an ack waits at most 2 ms), reclaims entries idle longer than the
// visibility timeout with XAUTOCLAIM, extends the hold of long-running
// handlers, promotes the retry lane, and trims the streams.
//
// On cancellation it stops reading at once, lets in-flight handlers finish
// for up to the drain timeout, then cancels them and hands their entries
// back (their idle time is set past the visibility timeout, so any consumer
// of the group reclaims them on its next pass). Worst-case shutdown time:
// the 1 s read block or the drain timeout, whichever is longer, plus one
// Redis round trip per pending outcome (each bounded by 5 s) — provided
// handlers return when their ctx is cancelled.
func (c *Consumer) Run(ctx context.Context) error {
	if !c.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer c.running.Store(false)
	log := c.cfg.logger.With(slog.String("queue", c.queue), slog.String("group", c.group), slog.String("consumer", c.cfg.consumer))
	if err := c.ensureGroups(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	log.DebugContext(ctx, "consumer started")

	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	ack := newAcker(c, log)
	ackDone := make(chan struct{})
	go func() { defer close(ackDone); ack.run() }()

	held := c.cfg.workers + c.cfg.prefetch
	r := &runState{c: c, log: log, ack: ack, workCtx: workCtx,
		credits: make(chan struct{}, held), jobs: make(chan job, held)}
	for range c.cfg.workers {
		r.handlers.Add(1)
		go r.worker()
	}
	g, gctx := errgroup.WithContext(ctx)
	stopIntake := context.AfterFunc(gctx, func() { r.stopping.Store(true) })
	defer stopIntake()
	// Intake (read and reclaim) feeds the workers; when it has stopped, the
	// job queue is closed and the workers drain it.
	var intake errgroup.Group
	intake.Go(func() error { return r.read(gctx) })
	if !c.cfg.noReclaim {
		intake.Go(func() error { return r.reclaimLoop(gctx) })
	}
	g.Go(func() error {
		err := intake.Wait()
		close(r.jobs)
		return err
	})
	g.Go(func() error { return r.extendLoop(gctx) })
	if !c.cfg.noTrim {
		g.Go(func() error { return r.trimLoop(gctx) })
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
			n := r.handBackAll(log)
			log.WarnContext(ctx, "drain timeout; cancelled handlers and handed back their entries",
				slog.Duration("drain", c.cfg.drain), slog.Int("handed_back", n))
			cancelWork()
		case <-done:
		}
	})
	err := g.Wait()
	r.handlers.Wait()
	stopDrain()
	ack.close()
	<-ackDone
	log.DebugContext(ctx, "consumer stopped")
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// ensureGroups creates the group on the queue stream and its retry lane.
func (c *Consumer) ensureGroups(ctx context.Context) error {
	start := "0"
	if c.cfg.fromNew {
		start = "$"
	}
	for _, s := range []struct{ key, start string }{{c.main.Stream, start}, {c.retry.Stream, "0"}} {
		err := c.rdb.XGroupCreateMkStream(ctx, s.key, c.group, s.start).Err()
		if err != nil && !redis.HasErrorPrefix(err, "BUSYGROUP") {
			return fmt.Errorf("create group %s on %s: %w", c.group, s.key, err)
		}
	}
	return nil
}

// runState is what one Run shares between its goroutines.
type runState struct {
	c        *Consumer
	log      *slog.Logger
	ack      *acker
	workCtx  context.Context
	credits  chan struct{} // one token per entry held: queued or being handled (workers + prefetch)
	jobs     chan job      // entries waiting for a worker
	stopping atomic.Bool   // intake stopped: queued jobs are handed back, not handled
	handlers sync.WaitGroup
}

// job is an entry waiting for a worker.
type job struct {
	f          *flight
	x          redis.XMessage
	deliveries int64
}

// read is the intake loop: XREADGROUP on the queue stream and the retry
// lane, as many entries as there are free workers.
func (r *runState) read(ctx context.Context) error {
	c := r.c
	streams := []string{c.main.Stream, c.retry.Stream, ">", ">"}
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		// Wait for room, but hold no credit during the blocking read: reclaim
		// takes only free credits and would starve behind an idle read.
		// Each entry read takes its credit in enqueue.
		select {
		case r.credits <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		n := cap(r.credits) - len(r.credits) + 1
		<-r.credits
		// The read is not tied to ctx: cancelling cannot interrupt a blocking
		// XREADGROUP, and a reply cut short would leave entries pending
		// unseen. Entries that arrive after ctx is done are handed back.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.block+opTimeout)
		res, err := c.rdb.XReadGroup(rctx, &redis.XReadGroupArgs{
			Group: c.group, Consumer: c.cfg.consumer, Streams: streams,
			Count: int64(n), Block: c.cfg.block,
		}).Result()
		cancel()
		if err != nil {
			if errors.Is(err, redis.Nil) {
				continue
			}
			if redis.HasErrorPrefix(err, "NOGROUP") {
				r.log.WarnContext(ctx, "group missing; recreating it", slog.Any("err", err))
				if err := c.ensureGroups(ctx); err != nil && ctx.Err() == nil {
					r.log.ErrorContext(ctx, "recreating group failed", slog.Any("err", err))
				}
			} else if ctx.Err() == nil {
				r.log.WarnContext(ctx, "xreadgroup failed", slog.Any("err", err), slog.Duration("retry_in", backoff))
			}
			sleepCtx(ctx, backoff)
			backoff = min(2*backoff, 2*time.Second)
			continue
		}
		backoff = 50 * time.Millisecond
		for _, s := range res {
			r.enqueue(ctx, s.Stream, s.Messages, nil)
		}
	}
	return nil
}

// enqueue registers entries as held (so they are extended while they wait)
// and queues them for the workers, one credit each. deliveries gives each
// entry's delivery count (nil: 1, a first delivery). Once intake has
// stopped, the remaining entries are handed back instead.
func (r *runState) enqueue(ctx context.Context, streamKey string, msgs []redis.XMessage, deliveries map[string]int64) {
	now := time.Now()
	fs := make([]*flight, len(msgs))
	r.c.mu.Lock()
	for i, x := range msgs {
		fs[i] = &flight{key: flightKey{streamKey, x.ID}, since: now}
		r.c.inflight[fs[i].key] = fs[i]
	}
	r.c.mu.Unlock()
	for i, x := range msgs {
		ok := false
		select {
		case r.credits <- struct{}{}: // usually free at once: COUNT applies per stream
			ok = ctx.Err() == nil
			if !ok {
				<-r.credits
			}
		case <-ctx.Done():
		}
		if !ok {
			ids := make([]string, 0, len(msgs)-i)
			for _, f := range fs[i:] {
				r.forget(f)
				ids = append(ids, f.key.id)
			}
			r.handBack(context.WithoutCancel(ctx), streamKey, ids)
			return
		}
		d := int64(1)
		if deliveries != nil {
			d = deliveries[x.ID]
		}
		r.jobs <- job{f: fs[i], x: x, deliveries: d} // never blocks: the queue holds as many as there are credits
	}
}

// worker handles queued entries until the queue is closed. After intake
// stopped it hands queued entries back instead of starting them.
func (r *runState) worker() {
	defer r.handlers.Done()
	for j := range r.jobs {
		if r.stopping.Load() {
			r.forget(j.f)
			r.handBack(context.WithoutCancel(r.workCtx), j.f.key.stream, []string{j.x.ID})
		} else {
			r.handle(j.f, j.x, j.deliveries)
			r.forget(j.f)
		}
		<-r.credits
	}
}

// forget drops an entry from the held set.
func (r *runState) forget(f *flight) {
	r.c.mu.Lock()
	if r.c.inflight[f.key] == f {
		delete(r.c.inflight, f.key)
	}
	r.c.mu.Unlock()
}

// handle decodes, runs the handler and settles the entry.
func (r *runState) handle(f *flight, x redis.XMessage, deliveries int64) {
	c := r.c
	opCtx := context.WithoutCancel(r.workCtx)
	c.ctr.delivered.Add(1)
	e, err := stream.Decode(f.key.stream, x.ID, x.Values)
	if err != nil {
		r.deadLetterRaw(opCtx, f.key, x, deliveries, err)
		return
	}
	m := &Message{
		ID: e.Envelope.ID, Payload: e.Envelope.Payload, Headers: e.Envelope.Headers,
		Attempt: max(e.Envelope.Attempt, 1), Deliveries: deliveries,
		Due: e.Envelope.Due, Created: e.Envelope.Created,
		Group: c.group, Stream: f.key.stream, EntryID: x.ID,
	}
	if deliveries > c.cfg.maxDeliveries {
		r.deadLetter(opCtx, m, &e.Envelope, ReasonDeliveries, fmt.Errorf("delivered %d times, max %d", deliveries, c.cfg.maxDeliveries))
		return
	}
	hctx, cancel := context.WithCancelCause(r.workCtx)
	defer cancel(nil)
	c.mu.Lock()
	f.cancel = cancel
	c.mu.Unlock()
	if h := c.cfg.hooks.OnDelivered; h != nil {
		h(m)
	}
	start := time.Now()
	herr := r.call(hctx, m)
	if f.handedBack.Load() && herr != nil {
		return // drain timeout: the entry was handed back to the group
	}
	var drop *DropError
	var dl *DeadLetterError
	switch {
	case herr == nil:
		r.ack.add(f.key, true) // Counters.Acked moves when the XACK succeeds
		if h := c.cfg.hooks.OnAcked; h != nil {
			h(m, time.Since(start))
		}
	case errors.As(herr, &drop):
		r.ack.add(f.key, false)
		c.ctr.dropped.Add(1)
		if h := c.cfg.hooks.OnDropped; h != nil {
			h(m, herr)
		}
	case errors.Is(context.Cause(hctx), errOwnershipLost):
		c.ctr.lost.Add(1)
		r.log.Warn("handler lost its entry to another consumer", slog.String("id", m.ID), slog.String("entry", m.EntryID))
	case errors.As(herr, &dl):
		c.ctr.failed.Add(1)
		r.deadLetter(opCtx, m, &e.Envelope, ReasonHandler, herr)
	case m.Attempt >= c.cfg.maxAttempts:
		c.ctr.failed.Add(1)
		r.deadLetter(opCtx, m, &e.Envelope, ReasonAttempts, herr)
	default:
		c.ctr.failed.Add(1)
		r.retry(opCtx, m, &e.Envelope, herr)
	}
}

// call runs the handler, turning a panic into an error.
func (r *runState) call(ctx context.Context, m *Message) (err error) {
	defer func() {
		if p := recover(); p != nil {
			r.c.ctr.panics.Add(1)
			r.log.ErrorContext(ctx, "handler panicked", slog.String("id", m.ID),
				slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
			err = fmt.Errorf("handler panic: %v", p)
		}
	}()
	return r.c.h(ctx, m)
}

// retry acknowledges the entry and schedules attempt+1 in the retry lane.
func (r *runState) retry(ctx context.Context, m *Message, env *codec.Envelope, herr error) {
	c := r.c
	wait := max(c.cfg.backoff(m.Attempt+1), 0)
	next := *env
	next.Attempt = m.Attempt + 1
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	due, err := scripts.Retry.Run(ctx, c.rdb,
		[]string{m.Stream, c.retry.Delayed, c.retry.Envelopes},
		c.group, m.EntryID, stream.RetryMember(m.ID, m.EntryID), codec.MarshalEnvelope(&next),
		wait.Milliseconds(), c.retry.Wake).Int64()
	if err != nil {
		// The entry stays pending; it is reclaimed after the visibility timeout.
		r.log.ErrorContext(ctx, "scheduling retry failed", slog.String("id", m.ID), slog.Any("err", err))
		return
	}
	if due < 0 {
		return // no longer ours: another consumer reclaimed and settled it
	}
	c.ctr.retried.Add(1)
	if h := c.cfg.hooks.OnFailed; h != nil {
		h(m, herr, wait)
	}
}

// deadLetter acknowledges the entry and appends it to the dead letters.
func (r *runState) deadLetter(ctx context.Context, m *Message, env *codec.Envelope, reason string, cause error) {
	fields := []any{
		stream.FieldID, m.ID,
		stream.FieldDue, strconv.FormatInt(m.Due.UnixMilli(), 10),
		stream.FieldEnvelope, codec.MarshalEnvelope(env),
		stream.FieldReason, reason,
		fieldError, errString(cause),
		fieldAttempt, m.Attempt,
		fieldDeliveries, m.Deliveries,
		fieldSource, m.Stream,
		fieldEntry, m.EntryID,
	}
	if r.settleDead(ctx, flightKey{m.Stream, m.EntryID}, fields) {
		if h := r.c.cfg.hooks.OnDeadLettered; h != nil {
			h(m, reason)
		}
	}
}

// deadLetterRaw dead-letters an entry that could not be decoded, keeping
// whatever fields it had.
func (r *runState) deadLetterRaw(ctx context.Context, k flightKey, x redis.XMessage, deliveries int64, cause error) {
	fields := []any{stream.FieldReason, ReasonUndecodable, fieldError, cause.Error(),
		fieldDeliveries, deliveries, fieldSource, k.stream, fieldEntry, x.ID}
	for _, f := range []string{stream.FieldID, stream.FieldDue, stream.FieldEnvelope} {
		if v, ok := x.Values[f].(string); ok {
			fields = append(fields, f, v)
		}
	}
	r.log.Warn("undecodable entry dead-lettered", slog.String("stream", k.stream), slog.String("entry", x.ID), slog.Any("err", cause))
	if r.settleDead(ctx, k, fields) {
		if h := r.c.cfg.hooks.OnDeadLettered; h != nil {
			h(nil, ReasonUndecodable)
		}
	}
}

func (r *runState) settleDead(ctx context.Context, k flightKey, fields []any) bool {
	c := r.c
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	args := append([]any{c.group, k.id, c.cfg.deadCap}, fields...)
	v, err := scripts.Dead.Run(ctx, c.rdb, []string{k.stream, c.dead}, args...).Int64Slice()
	if err != nil || len(v) != 2 {
		r.log.ErrorContext(ctx, "dead-lettering failed", slog.String("entry", k.id), slog.Any("err", err))
		return false
	}
	if v[0] == 0 {
		return false
	}
	c.ctr.deadLettered.Add(1)
	if v[1] > 0 {
		c.ctr.deadDropped.Add(uint64(v[1]))
		r.log.WarnContext(ctx, "dead-letter cap reached; oldest dead letters trimmed", slog.Int64("dropped", v[1]), slog.Int64("cap", c.cfg.deadCap))
	}
	return true
}

// handBack makes entries immediately reclaimable by any consumer of the
// group: it sets their idle time far past the visibility timeout. Ownership
// stays with this consumer until another one claims them.
func (r *runState) handBack(ctx context.Context, streamKey string, ids []string) {
	if len(ids) == 0 {
		return
	}
	c := r.c
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	args := []any{"XCLAIM", streamKey, c.group, c.cfg.consumer, 0}
	for _, id := range ids {
		args = append(args, id)
	}
	idle := (c.cfg.visibility + 24*time.Hour).Milliseconds()
	args = append(args, "IDLE", idle, "JUSTID")
	if err := c.rdb.Do(ctx, args...).Err(); err != nil {
		r.log.WarnContext(ctx, "handing entries back failed; they are reclaimed after the visibility timeout",
			slog.String("stream", streamKey), slog.Any("err", err))
		return
	}
	c.ctr.handedBack.Add(uint64(len(ids)))
}

// handBackAll hands back every entry still held, at drain timeout.
func (r *runState) handBackAll(log *slog.Logger) int {
	c := r.c
	byStream := map[string][]string{}
	c.mu.Lock()
	for k, f := range c.inflight {
		f.handedBack.Store(true)
		byStream[k.stream] = append(byStream[k.stream], k.id)
	}
	c.mu.Unlock()
	n := 0
	for s, ids := range byStream {
		r.handBack(context.WithoutCancel(r.workCtx), s, ids)
		n += len(ids)
	}
	return n
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// Dead-letter entry fields beyond stream.Field*.
const (
	fieldError      = "x" // last error
	fieldAttempt    = "a" // attempt that failed
	fieldDeliveries = "n" // deliveries of the failed entry
	fieldSource     = "s" // stream the entry was read from
	fieldEntry      = "o" // original stream entry id
)
