package delaystream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/delaystream/delaystream/internal/delay"
	"github.com/delaystream/delaystream/internal/errs"
	"github.com/delaystream/delaystream/internal/flow"
	"github.com/delaystream/delaystream/internal/group"
	"github.com/delaystream/delaystream/internal/memory"
	"github.com/delaystream/delaystream/internal/mover"
	"github.com/delaystream/delaystream/internal/optcheck"
	"github.com/delaystream/delaystream/internal/recur"
	"github.com/delaystream/delaystream/internal/runctx"
	"github.com/delaystream/delaystream/internal/stream"
)

// Queue is one queue: its scheduling, its promotion of due messages and
// its consumer groups, built from one Redis client and one set of options.
// Schedule, Cancel, Reschedule and Get work at once; [Queue.Handle] adds
// consumer groups, and [Queue.Run] runs promotion and every group until its
// ctx is cancelled. Its methods are safe for concurrent use.
type Queue struct {
	rdb      redis.UniversalClient
	name     string
	layout   *stream.Layout
	cfg      config
	producer *delay.Queue
	mover    *mover.Mover // nil WithoutPromotion
	recur    *recur.Store // recurring schedules
	mem      *memWatch
	located  groupNames // the groups Locate last found recorded

	mu      sync.Mutex
	running bool
	groups  []*Group // in the order of Handle
}

// New returns the Queue named name. It validates its arguments and options
// (errors wrap [ErrInvalidOption] or [ErrInvalidName]), talks to no server
// and starts nothing: call [Queue.Handle] for each consumer group, then
// [Queue.Run]. The client is borrowed and never closed. A name (of a
// queue, a group or a prefix) is 1 to 128 bytes of UTF-8 without spaces,
// control characters or braces.
func New(rdb redis.UniversalClient, name string, opts ...Option) (*Queue, error) {
	if rdb == nil {
		return nil, fmt.Errorf("%w: nil redis client", ErrInvalidOption)
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	layout, err := stream.NewLayout(cfg.prefix, name, cfg.shards)
	if err != nil {
		return nil, errs.Invalid(err)
	}
	q := &Queue{rdb: rdb, name: name, layout: layout, cfg: cfg, mem: newMemWatch(rdb, cfg)}
	popts := append([]delay.Option{delay.WithPrefix(cfg.prefix), delay.WithShards(cfg.shards), delay.WithCodec(cfg.codec)}, cfg.producer...)
	if q.producer, err = delay.New(rdb, name, popts...); err != nil {
		return nil, partError("scheduling", err)
	}
	q.recur = recur.New(rdb, layout, recur.Config{Horizon: cfg.horizon, Parsers: cfg.parsers, Logger: cfg.logger, Check: q.producer.CheckShards})
	if cfg.promote {
		mopts := append([]mover.Option{mover.WithLogger(cfg.logger), mover.WithPrefix(cfg.prefix), mover.WithShards(cfg.shards)}, cfg.mover...)
		if !cfg.history {
			mopts = append(mopts, mover.WithoutHistory())
		}
		if q.mover, err = mover.New(rdb, name, mopts...); err != nil {
			return nil, partError("promotion", err)
		}
	}
	return q, nil
}

// Name returns the queue's name.
func (q *Queue) Name() string { return q.name }

// Stats returns the figures of the waiting messages (waiting, overdue,
// next due, by the Redis clock), over every shard, since when the queue
// is paused, the number of recurring schedules, and the servers whose
// memory policy can evict the queue's keys (read now). Each group's
// figures come from [Group.Stats].
func (q *Queue) Stats(ctx context.Context) (Stats, error) {
	s, err := q.producer.Stats(ctx)
	out := Stats{Waiting: s.Waiting, Overdue: s.Overdue, NextDue: s.NextDue, Now: s.Now}
	if err != nil {
		return out, err
	}
	if list, merr := memory.Read(ctx, q.rdb); merr == nil {
		out.Evicting = redisMemories(memory.Evicting(list))
	}
	if out.PausedSince, _, err = flow.QueueSince(ctx, q.rdb, q.layout); err != nil {
		return out, err
	}
	out.Recurring, err = q.recur.Count(ctx)
	return out, err
}

// Quarantine returns up to count entries of the queue's quarantine, oldest
// first, after entry id after ("" for the beginning): the waiting messages
// promotion could not read, with their bytes and a reason. A sharded
// queue's quarantine is read shard by shard, and its entry ids carry their
// shard, "<ms>-<seq>@<shard>".
func (q *Queue) Quarantine(ctx context.Context, after string, count int64) ([]Quarantined, error) {
	if count < 1 {
		return nil, fmt.Errorf("%w: count must be >= 1, got %d", ErrInvalidOption, count)
	}
	n := q.layout.Shards()
	shard, id, err := quarantineCursor(after, n)
	if err != nil {
		return nil, err
	}
	var out []Quarantined
	for ; shard < n && int64(len(out)) < count; shard, id = shard+1, "" {
		page, err := stream.ReadQuarantine(ctx, q.rdb, q.layout.Shard(shard).Main().Quarantine, id, count-int64(len(out)))
		if err != nil {
			return out, err
		}
		for _, e := range page {
			out = append(out, Quarantined(e.Whole().Entry(shard, "main", n > 1)))
		}
	}
	return out, nil
}

// quarantineCursor splits a quarantine cursor into its shard and entry id.
func quarantineCursor(after string, shards int) (int, string, error) {
	if after == "" || shards == 1 {
		return 0, after, nil
	}
	id, sh, ok := strings.Cut(after, "@")
	shard, err := strconv.Atoi(sh)
	if !ok || err != nil || shard < 0 || shard >= shards {
		return 0, "", fmt.Errorf("%w: quarantine cursor %q: want <ms>-<seq>@<shard>, as returned", ErrInvalidOption, after)
	}
	return shard, id, nil
}

// Handle adds consumer group name to the queue: [Queue.Run] will run one
// consumer of it in this process, with h as its handler. Every group gets
// every message and retries and dead-letters on its own. A group added
// twice, or while the queue runs (wrapping [ErrRunning]), is refused, as
// are invalid options (wrapping [ErrInvalidOption]). With promotion, the
// first group added reads its new entries in the pipelines of the queue's
// promote calls, which also carry its acknowledgements: at a trickle a
// message costs that group no round trip of its own (see the concepts
// guide); the other groups read on the calls' announcements.
func (q *Queue) Handle(name string, h Handler, opts ...GroupOption) (*Group, error) {
	if h == nil {
		return nil, fmt.Errorf("group %q: %w: nil handler", name, ErrInvalidOption)
	}
	return q.handle(name, h, opts)
}

func (q *Queue) handle(name string, h Handler, opts []GroupOption) (*Group, error) {
	var gc groupConfig
	if err := optcheck.Apply(ErrInvalidOption, &gc, opts); err != nil {
		return nil, fmt.Errorf("group %q: %w", name, err)
	}
	// The queue runs promotion itself (unless WithoutPromotion): its
	// consumers do not run their own.
	gopts := []group.Option{group.WithLogger(q.cfg.logger), group.WithDrainTimeout(q.cfg.drain),
		group.WithPrefix(q.cfg.prefix), group.WithShards(q.cfg.shards), group.WithoutPromotion(),
		group.WithPrecision(q.cfg.prec)}
	if !q.cfg.history {
		gopts = append(gopts, group.WithoutHistory())
	}
	q.mu.Lock()
	first := len(q.groups) == 0
	q.mu.Unlock()
	if q.mover != nil && first {
		// The first group's consumer joins the queue's promote calls:
		// their pipelines send its acknowledgements and read its new
		// entries (one group per process does).
		gopts = append(gopts, group.WithPromoteCalls(q.mover))
	}
	if gc.hooks != nil {
		gopts = append(gopts, group.WithHooks(gc.hooks.internal()))
	}
	mw := gc.middleware
	if gc.keyLimit != nil { // outermost: a snoozed delivery reaches no middleware
		mw = append([]Middleware{q.keyLimited(name, gc.keyLimit)}, mw...)
	}
	c, err := group.New(q.rdb, q.name, name, internalHandler(chain(h, mw, gc.timeout)), append(gopts, gc.opts...)...)
	if err != nil {
		return nil, fmt.Errorf("group %q: %w", name, errs.Invalid(err))
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.running:
		return nil, fmt.Errorf("handle %s: %w (add groups before Run)", name, ErrRunning)
	case slices.ContainsFunc(q.groups, func(g *Group) bool { return g.name == name }):
		return nil, fmt.Errorf("%w: group %s added twice (one consumer runs many workers: WithWorkers)", ErrInvalidOption, name)
	}
	g := &Group{name: name, c: c, handler: h, opts: slices.Clone(opts)}
	q.groups = append(q.groups, g)
	return g, nil
}

// Run runs the promotion of due messages (unless [WithoutPromotion]) and one consumer
// of every group added with [Queue.Handle], until ctx is cancelled or one
// of them fails. With promotion it also tops up the queue's recurring
// schedules (see [Queue.DefineRecurring]): every promoting process does,
// with no leader. It first creates every group (see it waits while Redis
// is unreachable), so that each group gets every message the mover then
// promotes. On cancellation every group stops reading at once and
// lets its in-flight handlers finish within the drain timeout (see
// [WithDrainTimeout]); Run then returns nil. It returns the first real
// failure of a part (the others are stopped and drained first), and
// [ErrRunning] if the Queue is already running. Shutdown takes at most
// the longest drain timeout plus about 1 s (a read in flight, a lease
// release). A Queue with neither a mover nor a group returns at once
// with an error wrapping [ErrInvalidOption]. A stopped Queue may run
// again; groups are added before Run ([Queue.Handle] refuses them while it
// runs). To stop once the work is done, cancel Run's ctx from a handler or
// from another goroutine. Run never closes the client and never handles OS
// signals. Run reads the memory settings of the queue's servers at start
// and every [MemoryCheckInterval], and logs a policy that can evict its
// keys; under [WithNoEvictionRequired] it returns an error wrapping
// [ErrEvictionPolicy] instead of starting.
//
// A deadline on ctx (context.WithTimeout) ends Run like a cancellation:
// its calls to Redis are not cut short at the deadline, and a clean stop
// logs nothing at Warn or above, whatever kind of context ends it.
func (q *Queue) Run(ctx context.Context) error {
	q.mu.Lock()
	if q.running {
		q.mu.Unlock()
		return ErrRunning
	}
	groups := slices.Clone(q.groups)
	if q.mover == nil && len(groups) == 0 {
		q.mu.Unlock()
		return fmt.Errorf("%w: queue %s has nothing to run (no groups, and built WithoutPromotion)", ErrInvalidOption, q.name)
	}
	q.running = true
	q.mu.Unlock()
	defer func() {
		q.mu.Lock()
		q.running = false
		q.mu.Unlock()
	}()
	// go-redis puts a deadline of ctx on its sockets, and a call cut by it
	// fails before ctx reports its end: the parts would log a shutdown as a
	// Redis failure. They run under a context that only gets cancelled.
	ctx, release := runctx.WithoutDeadline(ctx)
	defer release()

	if st, _ := q.mem.check(ctx); st != nil && st.refusal != nil {
		return st.refusal
	}
	// Every group exists (and is recorded, so trimming keeps what it has
	// not read) before the mover promotes anything: a group whose consumer
	// started late would otherwise miss what the others had acknowledged
	// and trimmed. A key of the wrong type is left to the group's Run,
	// which logs it and reads the group's other streams.
	var create errgroup.Group
	for _, p := range groups {
		create.Go(func() error {
			if err := p.c.CreateGroup(ctx); err != nil && !errors.Is(err, ErrWrongType) && ctx.Err() == nil {
				return wrapPart("group "+p.name, err)
			}
			return nil
		})
	}
	if err := create.Wait(); err != nil || ctx.Err() != nil {
		return err
	}
	q.reportPause(ctx)

	g, gctx := errgroup.WithContext(ctx)
	mctx, stopMem := context.WithCancel(gctx)
	var memLoop sync.WaitGroup
	memLoop.Go(func() { q.mem.loop(mctx) })
	defer func() {
		stopMem()
		memLoop.Wait()
	}()
	if q.mover != nil {
		g.Go(func() error { return q.recur.Serve(gctx) }) // every promoting process tops schedules up
		g.Go(func() error { return wrapPart("mover", q.mover.Run(gctx)) })
	}
	for _, p := range groups {
		g.Go(func() error { return wrapPart("group "+p.name, p.c.Run(gctx)) })
	}
	return g.Wait()
}

func wrapPart(part string, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %w", part, err)
	}
	return nil
}
