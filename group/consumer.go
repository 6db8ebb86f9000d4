package group

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"strings"
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

	mu      sync.Mutex
	batches map[*batch]struct{} // what this consumer holds, by read or reclaim batch; guarded by mu
}

// batch is the entries of one read or reclaim of one stream, allocated
// together and held by this consumer until each is settled. Holding is
// tracked per batch, not per entry: the workers take the consumer's lock
// once per batch, not once per entry.
type batch struct {
	stream  string
	flights []flight
	left    atomic.Int32 // flights not yet settled; the batch is dropped at 0
}

// flight is an entry this consumer holds: read or reclaimed, not yet settled.
type flight struct {
	b          *batch
	x          redis.XMessage // the entry as read
	deliveries int64
	since      time.Time // when this consumer got it or last extended it; guarded by Consumer.mu
	mu         sync.Mutex
	cancel     context.CancelCauseFunc // set when the handler starts; guarded by mu
	handedBack atomic.Bool             // handed back to the group (see takeBack)
	settled    atomic.Bool             // handled or handed back: no longer held
}

// takeBack claims the hand-back of f: true for the first caller only, so
// an entry queued when the drain timeout hands everything back is not
// handed back (and counted) twice.
func (f *flight) takeBack() bool { return f.handedBack.CompareAndSwap(false, true) }

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
		h: h, cfg: cfg, mv: mv, batches: make(map[*batch]struct{}),
	}, nil
}

// Name returns this consumer's name within the group.
func (c *Consumer) Name() string { return c.cfg.consumer }

// Run consumes until ctx is cancelled and returns nil after that requested
// stop, or an error when the group cannot be created. A second concurrent
// Run returns [ErrRunning].
//
// It creates the group on the queue stream and on the group's retry lane if
// needed (idempotent), then reads both with XREADGROUP (block 1 s, reading
// ahead of the workers; see the package doc), runs up to the configured
// number of handlers at once, batches acknowledgements (an ack waits at most
// 2 ms), reclaims entries idle longer than the visibility timeout with
// XAUTOCLAIM, extends the hold of read and running entries, promotes the
// retry lane, and trims the streams after acknowledging entries.
//
// On cancellation it stops reading at once, hands back the entries read
// ahead and not started, lets in-flight handlers finish for up to the
// drain timeout, then cancels them and hands their entries back (their idle time is set past the visibility timeout, so any consumer
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
	r := &runState{c: c, log: log, workCtx: workCtx, opCtx: context.WithoutCancel(workCtx),
		workers: int64(c.cfg.workers), room: make(chan struct{}, 1)}
	r.minAhead, r.maxAhead = int64(c.cfg.prefetch), int64(c.cfg.prefetch)
	if c.cfg.prefetch < 0 { // adaptive
		r.minAhead = 4 * r.workers
		r.maxAhead = max(maxReadAhead, r.minAhead)
	}
	r.ahead.Store(r.minAhead)
	r.jobs = make(chan *flight, r.workers+r.maxAhead)
	r.ack = newAcker(r)
	ackDone := make(chan struct{})
	go func() { defer close(ackDone); r.ack.run() }()
	g, gctx := errgroup.WithContext(ctx)
	r.intake = gctx
	for range c.cfg.workers {
		r.handlers.Add(1)
		go r.worker()
	}
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
	r.ack.close()
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
	workCtx  context.Context // handlers' parent: cancelled only by the drain timeout
	opCtx    context.Context // for recording outcomes: never cancelled (each call has its own timeout)
	workers  int64
	held     atomic.Int64    // entries held: queued or being handled
	room     chan struct{}   // a token when room was freed; the reader waits on it
	jobs     chan *flight    // entries waiting for a worker
	intake   context.Context // done when intake stops: queued jobs are then handed back, not handled
	handlers sync.WaitGroup
	trimDue  [2]atomic.Bool // per stream (main, retry lane): this consumer settled entries since its last trim

	// Read-ahead: how many entries may be held beyond the workers. Fixed
	// with WithPrefetch; by default adapted by the reader to the handlers'
	// pace (see adapt).
	ahead              atomic.Int64
	minAhead, maxAhead int64
	handled, busy      atomic.Int64 // entries handled and the time they took (ns), for adapt
	seenN, seenBusy    int64        // handled and busy at the last adapt; the reader's
}

// Default read-ahead bounds: the workers' queue holds about what they
// handle in readAheadHorizon, between 4 × workers and maxReadAhead entries.
const (
	readAheadHorizon = 100 * time.Millisecond
	maxReadAhead     = 256
)

// capacity returns how many entries may be held: workers + read-ahead.
func (r *runState) capacity() int64 { return r.workers + r.ahead.Load() }

// free returns how many more entries may be held.
func (r *runState) free() int64 { return r.capacity() - r.held.Load() }

// roomy reports whether free room is worth a read: while workers still
// have queued entries to take, half the capacity, so that a burst is read
// in few large reads; when the queue is empty, any room.
func (r *runState) roomy(free int64) bool {
	return free > 0 && (2*free >= r.capacity() || len(r.jobs) == 0)
}

// waitRoom waits until there is room worth a read and returns it (0 when
// ctx is done).
func (r *runState) waitRoom(ctx context.Context) int64 {
	for {
		r.adapt()
		if n := r.free(); r.roomy(n) {
			return n
		}
		select {
		case <-r.room:
		case <-ctx.Done():
			return 0
		}
	}
}

// adapt sets the default read-ahead to what the workers handle in
// readAheadHorizon at the pace measured since the last change (once at
// least one entry per worker was handled), within its bounds. Fast
// handlers get large reads, which cost Redis and the client much less per
// entry; slow handlers get a short queue, so one consumer does not sit on
// work other consumers of the group could do, and a crash strands little.
func (r *runState) adapt() {
	if r.minAhead == r.maxAhead {
		return
	}
	n, busy := r.handled.Load(), r.busy.Load()
	if n-r.seenN < r.workers {
		return
	}
	r.ahead.Store(readAheadFor(r.workers, time.Duration(busy-r.seenBusy)/time.Duration(n-r.seenN), r.minAhead, r.maxAhead))
	r.seenN, r.seenBusy = n, busy
}

// readAheadFor returns how many entries workers handling one entry in
// each take within readAheadHorizon, bounded by lo and hi.
func readAheadFor(workers int64, each time.Duration, lo, hi int64) int64 {
	if each <= 0 {
		return hi
	}
	return min(max(workers*int64(readAheadHorizon/each), lo), hi)
}

// read is the intake loop: XREADGROUP on the queue stream and the retry
// lane, as many entries as there is room for.
func (r *runState) read(ctx context.Context) error {
	c := r.c
	streams := []string{c.main.Stream, c.retry.Stream, ">", ">"}
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		// Hold no room during the blocking read: reclaim takes only free
		// room and would starve behind an idle read.
		n := r.waitRoom(ctx)
		if n == 0 {
			return nil
		}
		// The read is not tied to ctx: cancelling cannot interrupt a blocking
		// XREADGROUP, and a reply cut short would leave entries pending
		// unseen. Entries that arrive after ctx is done are handed back.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.block+opTimeout)
		res, err := c.rdb.XReadGroup(rctx, &redis.XReadGroupArgs{
			Group: c.group, Consumer: c.cfg.consumer, Streams: streams,
			Count: n, Block: c.cfg.block,
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
			r.enqueue(ctx, r.streamKey(s.Stream), s.Messages, nil)
		}
	}
	return nil
}

// streamKey returns the consumer's own copy of a stream key named in a reply.
func (r *runState) streamKey(s string) string {
	switch s {
	case r.c.main.Stream:
		return r.c.main.Stream
	case r.c.retry.Stream:
		return r.c.retry.Stream
	}
	return strings.Clone(s)
}

// enqueue registers entries as held (so they are extended while they wait)
// and queues them for the workers. deliveries gives each entry's delivery
// count (nil: 1, a first delivery). Once intake has stopped, the remaining
// entries are handed back instead.
func (r *runState) enqueue(ctx context.Context, streamKey string, es []redis.XMessage, deliveries map[string]int64) {
	if len(es) == 0 {
		return
	}
	c := r.c
	b := &batch{stream: streamKey, flights: make([]flight, len(es))}
	b.left.Store(int32(len(es)))
	now := time.Now()
	for i := range es {
		f := &b.flights[i]
		f.b, f.x, f.since, f.deliveries = b, es[i], now, 1
		if deliveries != nil {
			f.deliveries = deliveries[es[i].ID]
		}
	}
	r.held.Add(int64(len(es)))
	c.mu.Lock()
	c.batches[b] = struct{}{}
	c.mu.Unlock()
	for i := range b.flights {
		f := &b.flights[i]
		if ctx.Err() == nil {
			select {
			case r.jobs <- f: // usually room at once
				continue
			default:
			}
			select { // full: both streams and reclaim may fill it at once
			case r.jobs <- f:
				continue
			case <-ctx.Done():
			}
		}
		rest := make([]*flight, 0, len(b.flights)-i)
		for j := i; j < len(b.flights); j++ {
			rest = append(rest, &b.flights[j])
		}
		r.giveBack(rest)
		return
	}
}

// worker handles queued entries until the queue is closed. After intake
// stopped it hands queued entries back instead of starting them.
func (r *runState) worker() {
	defer r.handlers.Done()
	// The handlers' contexts derive from one per worker, so that creating
	// and cancelling them takes no lock shared with the other workers.
	wctx, cancel := context.WithCancel(r.workCtx)
	defer cancel()
	for f := range r.jobs {
		if r.intake.Err() != nil {
			r.handBackQueued(f)
		} else {
			start := time.Now()
			r.handle(wctx, f)
			r.busy.Add(int64(time.Since(start)))
			r.handled.Add(1)
			r.release(f)
		}
	}
}

// handBackQueued hands back f and whatever else is queued at that moment,
// in one call per stream, rather than one call per entry.
func (r *runState) handBackQueued(f *flight) {
	fs := []*flight{f}
	for {
		select {
		case f, ok := <-r.jobs: // closed once intake has stopped
			if ok {
				fs = append(fs, f)
				continue
			}
		default:
		}
		break
	}
	r.giveBack(fs)
}

// giveBack releases entries that will not be handled and hands them back,
// one call per stream; an entry the drain timeout handed back already is
// only released.
func (r *runState) giveBack(fs []*flight) {
	byStream := map[string][]string{}
	for _, f := range fs {
		if f.takeBack() {
			byStream[f.b.stream] = append(byStream[f.b.stream], f.x.ID)
		}
		r.release(f)
	}
	for s, ids := range byStream {
		r.handBack(r.opCtx, s, ids)
	}
}

// release drops an entry from the held set and makes room for another.
func (r *runState) release(f *flight) {
	f.settled.Store(true)
	if f.b.left.Add(-1) == 0 {
		r.c.mu.Lock()
		delete(r.c.batches, f.b)
		r.c.mu.Unlock()
	}
	if r.roomy(r.capacity() - r.held.Add(-1)) {
		select {
		case r.room <- struct{}{}:
		default:
		}
	}
}

// handle decodes, runs the handler and settles the entry.
func (r *runState) handle(wctx context.Context, f *flight) {
	c := r.c
	c.ctr.delivered.Add(1)
	e, err := stream.Decode(f.b.stream, f.x.ID, f.x.Values)
	if err != nil {
		r.deadLetterRaw(r.opCtx, f, err)
		return
	}
	m := &Message{
		ID: e.Envelope.ID, Payload: e.Envelope.Payload, Headers: e.Envelope.Headers,
		Attempt: max(e.Envelope.Attempt, 1), Deliveries: f.deliveries,
		Due: e.Envelope.Due, Created: e.Envelope.Created,
		Group: c.group, Stream: f.b.stream, EntryID: f.x.ID,
	}
	if f.deliveries > c.cfg.maxDeliveries {
		r.deadLetter(r.opCtx, m, &e.Envelope, ReasonDeliveries, fmt.Errorf("delivered %d times, max %d", f.deliveries, c.cfg.maxDeliveries))
		return
	}
	hctx, cancel := context.WithCancelCause(wctx)
	defer cancel(nil)
	f.mu.Lock()
	f.cancel = cancel
	f.mu.Unlock()
	if h := c.cfg.hooks.OnDelivered; h != nil {
		h(m)
	}
	var start time.Time
	if c.cfg.hooks.OnAcked != nil {
		start = time.Now()
	}
	herr := r.call(hctx, m)
	if f.handedBack.Load() && herr != nil {
		return // drain timeout: the entry was handed back to the group
	}
	if herr == nil {
		r.ack.add(f.b.stream, f.x.ID, true) // Counters.Acked moves when the XACK succeeds
		if h := c.cfg.hooks.OnAcked; h != nil {
			h(m, time.Since(start))
		}
		return
	}
	r.failed(hctx, f, m, &e.Envelope, herr)
}

// failed settles an entry whose handler returned herr.
func (r *runState) failed(hctx context.Context, f *flight, m *Message, env *codec.Envelope, herr error) {
	c := r.c
	var drop *DropError
	var dl *DeadLetterError
	switch {
	case errors.As(herr, &drop):
		r.ack.add(f.b.stream, f.x.ID, false)
		c.ctr.dropped.Add(1)
		if h := c.cfg.hooks.OnDropped; h != nil {
			h(m, herr)
		}
	case errors.Is(context.Cause(hctx), errOwnershipLost):
		c.ctr.lost.Add(1)
		r.log.Warn("handler lost its entry to another consumer", slog.String("id", m.ID), slog.String("entry", m.EntryID))
	case errors.As(herr, &dl):
		c.ctr.failed.Add(1)
		r.deadLetter(r.opCtx, m, env, ReasonHandler, herr)
	case m.Attempt >= c.cfg.maxAttempts:
		c.ctr.failed.Add(1)
		r.deadLetter(r.opCtx, m, env, ReasonAttempts, herr)
	default:
		c.ctr.failed.Add(1)
		r.retry(r.opCtx, m, env, herr)
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

// settled notes that this consumer acknowledged entries of streamKey, so
// its next trim pass trims that stream.
func (r *runState) settled(streamKey string) {
	if streamKey == r.c.retry.Stream {
		r.trimDue[1].Store(true)
	} else {
		r.trimDue[0].Store(true)
	}
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
	r.settled(m.Stream)
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
	if r.settleDead(ctx, m.Stream, m.EntryID, fields) {
		if h := r.c.cfg.hooks.OnDeadLettered; h != nil {
			h(m, reason)
		}
	}
}

// deadLetterRaw dead-letters an entry that could not be decoded, keeping
// whatever fields it had.
func (r *runState) deadLetterRaw(ctx context.Context, f *flight, cause error) {
	streamKey, id := f.b.stream, f.x.ID
	fields := []any{stream.FieldReason, ReasonUndecodable, fieldError, cause.Error(),
		fieldDeliveries, f.deliveries, fieldSource, streamKey, fieldEntry, id}
	vals := f.x.Values
	// A packed entry whose member splits (only its envelope is bad) is
	// written with id and envelope fields, so the dead letter reads and
	// redrives like any other; one that does not split keeps its bytes.
	if p, ok := vals[stream.FieldPacked].(string); ok {
		d, _ := vals[stream.FieldDue].(string)
		due, err := strconv.ParseInt(d, 10, 64)
		var mid, env string
		if err == nil {
			mid, env, err = stream.Unpack(due, p)
		}
		if err == nil {
			vals = map[string]any{stream.FieldID: mid, stream.FieldDue: d, stream.FieldEnvelope: env}
		} else {
			fields = append(fields, stream.FieldPacked, p)
		}
	}
	for _, k := range []string{stream.FieldID, stream.FieldDue, stream.FieldEnvelope} {
		if v, ok := vals[k].(string); ok {
			fields = append(fields, k, v)
		}
	}
	r.log.Warn("undecodable entry dead-lettered", slog.String("stream", streamKey), slog.String("entry", id), slog.Any("err", cause))
	if r.settleDead(ctx, streamKey, id, fields) {
		if h := r.c.cfg.hooks.OnDeadLettered; h != nil {
			h(nil, ReasonUndecodable)
		}
	}
}

func (r *runState) settleDead(ctx context.Context, streamKey, id string, fields []any) bool {
	c := r.c
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	args := append([]any{c.group, id, c.cfg.deadCap}, fields...)
	v, err := scripts.Dead.Run(ctx, c.rdb, []string{streamKey, c.dead}, args...).Int64Slice()
	if err != nil || len(v) != 2 {
		r.log.ErrorContext(ctx, "dead-lettering failed", slog.String("entry", id), slog.Any("err", err))
		return false
	}
	if v[0] == 0 {
		return false
	}
	r.settled(streamKey)
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
	for b := range c.batches {
		for i := range b.flights {
			if f := &b.flights[i]; !f.settled.Load() && f.takeBack() {
				byStream[b.stream] = append(byStream[b.stream], f.x.ID)
			}
		}
	}
	c.mu.Unlock()
	n := 0
	for s, ids := range byStream {
		r.handBack(r.opCtx, s, ids)
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
