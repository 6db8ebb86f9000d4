package delaystream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/delaystream/delaystream/codec"
	"github.com/delaystream/delaystream/internal/delay"
	"github.com/delaystream/delaystream/internal/group"
	"github.com/delaystream/delaystream/internal/mover"
	"github.com/delaystream/delaystream/internal/optcheck"
	"github.com/delaystream/delaystream/internal/stream"
)

// Queue is the front door to one queue: its producer, its mover and its
// consumer groups, built from one Redis client and one set of options, so
// that the parts cannot disagree on the prefix or the codec. Schedule,
// Cancel, Reschedule and Get work at once; [Queue.Handle] adds consumer
// groups, and [Queue.Run] runs the mover and every group until its ctx is
// cancelled. Its methods are safe for concurrent use.
//
// The parts stay available ([Queue.Producer], [Queue.Mover],
// [Queue.Consumer]) and usable on their own (packages delay, mover and
// group) for programs that want to wire them themselves.
type Queue struct {
	rdb      redis.UniversalClient
	name     string
	layout   *stream.Layout
	cfg      config
	producer *delay.Queue
	mover    *mover.Mover // nil with WithoutPromotion

	mu      sync.Mutex
	running bool
	groups  []part // consumer groups, in the order of Handle
}

// New returns the Queue named queue. It validates its arguments and
// options (errors wrap [ErrInvalidOption]), talks to no server and starts
// nothing: call [Queue.Handle] for each consumer group, then [Queue.Run].
// The client is borrowed and never closed. queue must satisfy
// stream.ValidateName.
func New(rdb redis.UniversalClient, queue string, opts ...Option) (*Queue, error) {
	if rdb == nil {
		return nil, fmt.Errorf("%w: nil redis client", ErrInvalidOption)
	}
	cfg := config{prefix: stream.DefaultPrefix, shards: 1, codec: codec.Msgpack, drain: DefaultDrain, promote: true}
	if err := optcheck.Apply(ErrInvalidOption, &cfg, opts); err != nil {
		return nil, err
	}
	layout, err := stream.NewLayout(cfg.prefix, queue, cfg.shards)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOption, err)
	}
	q := &Queue{rdb: rdb, name: queue, layout: layout, cfg: cfg}
	// Every part gets the queue's prefix, shard count and codec first and
	// the caller's part options after them; a part option that set another
	// prefix, count or codec would make the parts disagree, so it is refused.
	popts := append([]delay.Option{delay.WithPrefix(cfg.prefix), delay.WithShards(cfg.shards), delay.WithCodec(cfg.codec)}, cfg.producer...)
	if q.producer, err = delay.New(rdb, queue, popts...); err != nil {
		return nil, fmt.Errorf("%w: producer: %w", ErrInvalidOption, err)
	}
	if q.producer.Shards() != cfg.shards {
		return nil, fmt.Errorf("%w: producer options set a shard count: use delaystream.WithShards", ErrInvalidOption)
	}
	if q.producer.Keys() != layout.Shard(0) {
		return nil, fmt.Errorf("%w: producer options set a prefix: use delaystream.WithPrefix", ErrInvalidOption)
	}
	if reflect.TypeOf(q.producer.Codec()) != reflect.TypeOf(cfg.codec) {
		return nil, fmt.Errorf("%w: producer options set a codec: use delaystream.WithCodec", ErrInvalidOption)
	}
	if cfg.promote {
		mopts := append([]mover.Option{mover.WithLogger(q.logger()), mover.WithPrefix(cfg.prefix), mover.WithShards(cfg.shards)}, cfg.moverOpts...)
		if q.mover, err = mover.New(rdb, queue, mopts...); err != nil {
			return nil, fmt.Errorf("%w: mover: %w", ErrInvalidOption, err)
		}
		if q.mover.Prefix() != cfg.prefix {
			return nil, fmt.Errorf("%w: mover options set a prefix: use delaystream.WithPrefix", ErrInvalidOption)
		}
		if q.mover.Shards() != cfg.shards {
			return nil, fmt.Errorf("%w: mover options set a shard count: use delaystream.WithShards", ErrInvalidOption)
		}
	}
	return q, nil
}

// part is a consumer group of the Queue.
type part struct {
	name string
	c    *group.Consumer
}

// Name returns the queue's name.
func (q *Queue) Name() string { return q.name }

// Keys returns the queue's key layout: the names of its Redis keys, for
// tools and for reading with package stream. On a sharded queue they are
// shard 0's; see [Queue.Layout].
func (q *Queue) Keys() stream.Keys { return q.layout.Shard(0) }

// Layout returns the names of every key of the queue, shard by shard.
func (q *Queue) Layout() *stream.Layout { return q.layout }

// Len returns how many messages are waiting; see delay.Queue.Len.
func (q *Queue) Len(ctx context.Context) (int64, error) { return q.producer.Len(ctx) }

// Stats returns figures about the waiting messages (waiting, overdue, next
// due, by the Redis clock); see delay.Queue.Stats. Each group's figures
// come from [Queue.Consumer]'s Stats.
func (q *Queue) Stats(ctx context.Context) (delay.Stats, error) { return q.producer.Stats(ctx) }

// Quarantine returns up to count entries of the queue's quarantine, oldest
// first, after entry id after ("" for the beginning): the waiting-set
// members the mover could not read, with their bytes and a reason; see
// stream.ReadQuarantine. A sharded queue's quarantine is read shard by
// shard, and its entry ids carry their shard, "<ms>-<seq>@<shard>".
func (q *Queue) Quarantine(ctx context.Context, after string, count int64) ([]stream.Quarantined, error) {
	n := q.layout.Shards()
	if n == 1 {
		return stream.ReadQuarantine(ctx, q.rdb, q.layout.Shard(0).Main().Quarantine, after, count)
	}
	if count < 1 {
		return nil, fmt.Errorf("%w: count must be >= 1, got %d", ErrInvalidOption, count)
	}
	shard, id := 0, ""
	if after != "" {
		var sh string
		var ok bool
		id, sh, ok = strings.Cut(after, "@")
		var err error
		if shard, err = strconv.Atoi(sh); !ok || err != nil || shard < 0 || shard >= n {
			return nil, fmt.Errorf("%w: quarantine cursor %q: want <ms>-<seq>@<shard>, as returned", ErrInvalidOption, after)
		}
	}
	var out []stream.Quarantined
	for ; shard < n && int64(len(out)) < count; shard, id = shard+1, "" {
		page, err := stream.ReadQuarantine(ctx, q.rdb, q.layout.Shard(shard).Main().Quarantine, id, count-int64(len(out)))
		if err != nil {
			return out, err
		}
		for _, e := range page {
			e.EntryID += "@" + strconv.Itoa(shard)
			out = append(out, e)
		}
	}
	return out, nil
}

// Producer returns the queue's producer, for what the Queue does not
// forward (Typed wrappers with headers, delay.NewTyped).
func (q *Queue) Producer() *delay.Queue { return q.producer }

// Mover returns the queue's mover (its Counters), nil when the Queue was
// built [WithoutPromotion].
func (q *Queue) Mover() *mover.Mover { return q.mover }

// Consumer returns the consumer of the group name added with [Queue.Handle], nil if
// none.
func (q *Queue) Consumer(name string) *group.Consumer {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, p := range q.groups {
		if p.name == name {
			return p.c
		}
	}
	return nil
}

func (q *Queue) logger() *slog.Logger {
	if q.cfg.logger != nil {
		return q.cfg.logger
	}
	return slog.Default()
}

// Schedule stores msg until when; see delay.Queue.Schedule.
func (q *Queue) Schedule(ctx context.Context, msg Message, when When) (Result, error) {
	return q.producer.Schedule(ctx, msg, when)
}

// ScheduleBatch schedules many messages with one round trip per chunk;
// see delay.Queue.ScheduleBatch.
func (q *Queue) ScheduleBatch(ctx context.Context, items []Item) ([]Result, error) {
	return q.producer.ScheduleBatch(ctx, items)
}

// Cancel removes the waiting message id and reports whether it was
// waiting; see delay.Queue.Cancel.
func (q *Queue) Cancel(ctx context.Context, id string) (bool, error) {
	return q.producer.Cancel(ctx, id)
}

// Reschedule changes the due time of the waiting message id; see
// delay.Queue.Reschedule.
func (q *Queue) Reschedule(ctx context.Context, id string, when When) (time.Time, error) {
	return q.producer.Reschedule(ctx, id, when)
}

// Get returns the waiting message id; see delay.Queue.Get.
func (q *Queue) Get(ctx context.Context, id string) (codec.Envelope, error) {
	return q.producer.Get(ctx, id)
}

// Handle adds consumer group name to the queue: [Queue.Run] will run one
// member of it, with h as its handler. Every group gets every message and
// retries and dead-letters on its own. opts tune the group (workers,
// attempts, backoff, ...); the queue's prefix, logger and drain timeout
// are its defaults, and a group.WithPrefix among opts that disagrees is refused, as is a
// group added twice or after Run started (wrapping [ErrRunning]). It
// returns the group's consumer, for its Counters, Stats and dead letters.
func (q *Queue) Handle(name string, h group.Handler, opts ...group.Option) (*group.Consumer, error) {
	// The Queue runs the queue's mover itself (unless WithoutPromotion), with
	// the mover options it was given: its consumers do not run their own.
	base := []group.Option{group.WithLogger(q.logger()), group.WithDrainTimeout(q.cfg.drain), group.WithPrefix(q.cfg.prefix), group.WithShards(q.cfg.shards),
		group.WithoutPromotion()}
	c, err := group.New(q.rdb, q.name, name, h, append(base, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("%w: group %s: %w", ErrInvalidOption, name, err)
	}
	if c.Shards() != q.cfg.shards {
		return nil, fmt.Errorf("%w: group %s: options set a shard count: use delaystream.WithShards", ErrInvalidOption, name)
	}
	if c.DeadLetters().Key() != q.layout.Shard(0).DeadLetters(name) {
		return nil, fmt.Errorf("%w: group %s: options set a prefix: use delaystream.WithPrefix", ErrInvalidOption, name)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.running:
		return nil, fmt.Errorf("handle %s: %w (add groups before Run)", name, ErrRunning)
	case slices.ContainsFunc(q.groups, func(p part) bool { return p.name == name }):
		return nil, fmt.Errorf("%w: group %s added twice (one consumer runs many workers: group.WithWorkers)", ErrInvalidOption, name)
	}
	q.groups = append(q.groups, part{name: name, c: c})
	return c, nil
}

// HandleTyped is [Queue.Handle] for payloads of type T, decoded with the
// queue's codec (see [WithCodec]); an undecodable payload is dead-lettered.
func HandleTyped[T any](q *Queue, name string, h func(ctx context.Context, m *group.Message, v T) error, opts ...group.Option) (*group.Consumer, error) {
	return q.Handle(name, group.Typed(q.cfg.codec, h), opts...)
}

// Schedule is [Queue.Schedule] for a payload of type T, encoded with the
// queue's codec (see [WithCodec]). id may be empty for a generated one.
func Schedule[T any](ctx context.Context, q *Queue, id string, v T, when When) (Result, error) {
	return delay.NewTyped[T](q.producer).Schedule(ctx, id, v, when)
}

// Run runs the queue's mover (unless [WithoutPromotion]) and one consumer
// of every group added with [Queue.Handle], until ctx is cancelled or one
// of them fails. It first creates every group (see
// [group.Consumer.CreateGroup]; it waits while Redis is unreachable), so
// that each group gets every message the mover then promotes. On cancellation every group stops reading at once and
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
// signals.
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

	// Every group exists (and is recorded, so trimming keeps what it has
	// not read) before the mover promotes anything: a group whose consumer
	// started late would otherwise miss what the others had acknowledged
	// and trimmed. A key of the wrong type is left to the group's Run,
	// which logs it and reads the group's other streams.
	var create errgroup.Group
	for _, p := range groups {
		create.Go(func() error {
			if err := p.c.CreateGroup(ctx); err != nil && !errors.Is(err, stream.ErrWrongType) && ctx.Err() == nil {
				return wrapPart("group "+p.name, err)
			}
			return nil
		})
	}
	if err := create.Wait(); err != nil || ctx.Err() != nil {
		return err
	}

	g, gctx := errgroup.WithContext(ctx)
	if q.mover != nil {
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
