package group

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"time"

	"github.com/delaystream/delaystream/internal/errs"
	"github.com/delaystream/delaystream/internal/flow"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream/internal/engine"
	"github.com/delaystream/delaystream/internal/optcheck"
	"github.com/delaystream/delaystream/internal/stream"
)

// ErrInvalidOption is wrapped by every error an Option or a constructor returns.
var ErrInvalidOption = errs.ErrInvalidOption

// ErrRunning is returned by Run when the Consumer is already running.
var ErrRunning = errs.ErrRunning

// Option configures a Consumer (and, for the options that apply, DeadLetters).
type Option func(*config) error

// Backoff returns how long to wait before attempt (2 for the first retry).
// It must be safe for concurrent use.
type Backoff func(attempt int) time.Duration

type config struct {
	prefix           string
	shards           int
	consumer         string
	workers          int
	prefetch         int // entries read ahead of free workers; -1: adaptive (the default)
	visibility       time.Duration
	reclaimEvery     time.Duration
	noReclaim        bool
	noPromote        bool
	joinCalls        PromoteCalls // with noPromote: the process's promotion whose calls the consumer joins; nil = none
	drain            time.Duration
	maxAttempts      int
	maxDeliveries    int64
	backoff          Backoff
	fromNew          bool
	deadCap          int64
	handledRetention time.Duration // how long records of handled messages are kept; 0: none
	noHistory        bool          // WithoutHistory: nothing counted in the queue's history
	trimEvery        time.Duration
	noTrim           bool
	retention        time.Duration
	staleConsumer    time.Duration
	membersEvery     time.Duration // read affinity's membership period; 0: membersEvery (tests shorten it)
	ackDelay         time.Duration // the ack delay, at most a quarter of the visibility timeout; 0: ackDelayFor (tests lengthen it)
	logger           *slog.Logger
	hooks            Hooks
	precision        time.Duration    // the promotion precision of the retry lanes and of the group's mover
	limits           flow.Limits      // the group's flow limits (limit.go); zero: none
	now              func() time.Time // the clock judging message deadlines; nil: time.Now

	// loopTick, when set (by tests only), is called at the end of every
	// iteration of the reclaim and trim loops with "reclaim" or "trim":
	// the event a test waits for to see intervals pass in which nothing
	// was done.
	loopTick func(loop string)
}

// Defaults of the options.
const (
	DefaultWorkers       = 8
	DefaultVisibility    = 2 * time.Second
	DefaultReclaimEvery  = time.Second
	DefaultDrain         = 10 * time.Second
	DefaultMaxAttempts   = 10
	DefaultMaxDeliveries = 5
	DefaultTrimEvery     = 5 * time.Second
	DefaultStaleConsumer = time.Hour
	// ackFlushDelay is the longest an ack waits for a read to ride with
	// (or to be batched) at precision 0, capped at a quarter of the
	// visibility timeout (ackDelayFor). It is long enough that on a
	// sharded queue, where each node sees a fraction of the reads, most
	// acks still find one.
	ackFlushDelay = 50 * time.Millisecond
)

// ackDelayFor is the ack delay under visibility timeout vis and precision
// prec: an entry whose handler returned waits at most this before its
// XACK, on top of up to a third of vis since its last extension (the
// extender), so it is never reclaimable while its ack waits. At a precision
// of d, reads come once per bucket, d apart: acks wait up to 2d, so that
// they ride with the next bucket's read rather than cost a call of their
// own. What a crash leaves handled but unacknowledged stays bounded by
// ackBatch.
func ackDelayFor(vis, prec time.Duration) time.Duration {
	return min(max(ackFlushDelay, 2*prec), vis/4)
}

func defaultConfig() config {
	return config{
		prefix:        stream.DefaultPrefix,
		shards:        1,
		consumer:      defaultConsumerName(),
		workers:       DefaultWorkers,
		prefetch:      -1,
		visibility:    DefaultVisibility,
		reclaimEvery:  DefaultReclaimEvery,
		drain:         DefaultDrain,
		maxAttempts:   DefaultMaxAttempts,
		maxDeliveries: DefaultMaxDeliveries,
		backoff:       ExponentialBackoff(time.Second, 10*time.Minute),
		trimEvery:     DefaultTrimEvery,
		staleConsumer: DefaultStaleConsumer,
		logger:        slog.Default(),
	}
}

func defaultConsumerName() string {
	host, _ := os.Hostname()
	if host == "" {
		host = "consumer"
	}
	return host + "-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatUint(rand.Uint64()&0xffffff, 36)
}

// resolve validates group and opts and returns the layout of queue, for
// the constructors of tools that run no Consumer (only WithPrefix and
// WithShards matter).
func resolve(rdb redis.UniversalClient, queue, group string, opts []Option) (*stream.Layout, error) {
	if rdb == nil {
		return nil, fmt.Errorf("%w: nil redis client", ErrInvalidOption)
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
	return layout, nil
}

func checkDur(name string, d, lo, hi time.Duration) error {
	return optcheck.Range(ErrInvalidOption, name, d, lo, hi)
}

// WithShards sets the queue's shard count (1 to stream.MaxShards; default
// 1, an unsharded queue). It must be the count the queue's producers and
// movers use: it is recorded in Redis when the queue is first used, and a
// Consumer built with another count returns an error wrapping
// stream.ErrShardCount from Run before it reads anything.
//
// A Consumer of a sharded queue reads every shard: it waits for the
// movers' announcements of new entries (one pub/sub connection per node)
// and reads the shards that have some, fairly, without blocking reads (as
// it reads an unsharded queue's one shard); so its connections do not
// grow with the shard count. It reclaims, retries,
// dead-letters and trims per shard.
func WithShards(n int) Option {
	return func(c *config) error {
		if err := optcheck.Range(ErrInvalidOption, "shard count", n, 1, stream.MaxShards); err != nil {
			return err
		}
		c.shards = n
		return nil
	}
}

// WithPrefix sets the key prefix. Default stream.DefaultPrefix ("ds"). It
// must match the producers' and movers' prefix.
func WithPrefix(p string) Option {
	return func(c *config) error {
		if err := optcheck.Prefix(ErrInvalidOption, p); err != nil {
			return err
		}
		c.prefix = p
		return nil
	}
}

// WithConsumerName sets this consumer's name within the group. Default:
// hostname-pid-random, unique per process. Two running consumers must never
// share a name.
func WithConsumerName(name string) Option {
	return func(c *config) error {
		if err := stream.ValidateName("consumer", name); err != nil {
			return errs.Invalid(err)
		}
		c.consumer = name
		return nil
	}
}

// WithWorkers sets how many handlers run at once (1 to 4096). Default 8.
func WithWorkers(n int) Option {
	return func(c *config) error {
		if err := optcheck.Range(ErrInvalidOption, "workers", n, 1, 4096); err != nil {
			return err
		}
		c.workers = n
		return nil
	}
}

// WithPrefetch sets how many entries a consumer reads ahead of its free
// workers (0 to 100000), fixing what is adaptive by default. Read-ahead lets
// one XREADGROUP fetch many entries, which is what makes bursts fast and
// cheap: the per-call cost of XREADGROUP is shared by all it returns.
// Entries waiting in the read-ahead queue are held by this consumer (and
// kept from reclaim) until a worker takes them, so with slow handlers and
// several consumers a large value makes the load less even, and a crash
// strands more entries until they are reclaimed. At shutdown, queued entries
// are handed back at once. 0 reads only as many as there are free workers.
//
// Default: adaptive. The queue holds about what the workers handle in
// 100 ms at the pace measured while running, at least 4 × workers and at
// most 256 (or 4 × workers if that is more) entries: fast handlers get reads
// of a few hundred entries. It holds none until the pace is measured (the
// workers handled one entry each), and none while handlers take 100 ms or
// more: a slow entry read ahead would wait for this consumer's workers
// while another consumer of the group may have one free. A group with
// flow limits (WithConcurrencyLimit, WithRateLimit) reads none ahead.
func WithPrefetch(n int) Option {
	return func(c *config) error {
		if n < 0 || n > 100000 {
			return fmt.Errorf("%w: prefetch must be 0..100000, got %d", ErrInvalidOption, n)
		}
		c.prefetch = n
		return nil
	}
}

// WithVisibilityTimeout sets how long an entry may sit unacknowledged with a
// consumer before another consumer of the group may reclaim it (100 ms to
// 1 h). Default 2 s. Running handlers extend their hold every third of it,
// so only entries of crashed or stuck consumers are reclaimed. With the
// default reclaim interval (1 s), a killed consumer's entries are handled
// elsewhere within about 3 s.
func WithVisibilityTimeout(d time.Duration) Option {
	return func(c *config) error {
		if err := checkDur("visibility timeout", d, 100*time.Millisecond, time.Hour); err != nil {
			return err
		}
		c.visibility = d
		return nil
	}
}

// WithReclaimInterval sets how often the consumer looks for entries to
// reclaim with XAUTOCLAIM (10 ms to 10 min), on the streams where entries
// may be pending (see the package doc: an idle group makes no reclaim
// calls). Default 1 s.
func WithReclaimInterval(d time.Duration) Option {
	return func(c *config) error {
		if err := checkDur("reclaim interval", d, 10*time.Millisecond, 10*time.Minute); err != nil {
			return err
		}
		c.reclaimEvery = d
		return nil
	}
}

// WithoutReclaim turns off reclaiming: this consumer never takes over other
// consumers' pending entries. Some consumer of the group must reclaim, or a
// crash leaves entries pending for ever.
func WithoutReclaim() Option {
	return func(c *config) error {
		c.noReclaim = true
		return nil
	}
}

// WithoutPromotion makes the consumer leave its queue's promotion to
// others: dedicated mover.Mover processes, or the consumers of other
// processes. By default a running consumer keeps its queue promoted: its
// process runs one mover of the queue's main lanes, shared by all its
// consumers of that queue on the same client, which shares the work with
// every other mover (a lease, or the movers' registry of a sharded queue).
// Use it for consumers that must not write to the delayed set, or to put
// promotion in processes of their own (with their own options and hooks).
// If nothing promotes the queue, nothing is ever delivered. The group's
// retry lane is promoted by its consumers either way.
func WithoutPromotion() Option {
	return func(c *config) error {
		c.noPromote = true
		return nil
	}
}

// PromoteCalls is a queue's promotion running in the consumer's process
// (an engine or a mover.Mover on the consumer's client), whose promote calls
// a running consumer joins (see WithPromoteCalls).
type PromoteCalls interface {
	Join(t engine.Taker)
	Leave(t engine.Taker)
}

// WithPromoteCalls makes a consumer built WithoutPromotion join the promote
// calls of p, the queue's promotion run by the same process on the same
// client: those calls then send the consumer's acknowledgements and read
// its group's new entries for it, as a consumer's own promotion does (see
// the Consumer's doc). p must promote the consumer's queue (same prefix,
// name and shards). Without it such a consumer reads everything itself.
func WithPromoteCalls(p PromoteCalls) Option {
	return func(c *config) error {
		if p == nil {
			return fmt.Errorf("%w: nil promotion", ErrInvalidOption)
		}
		c.joinCalls = p
		return nil
	}
}

// WithDrainTimeout sets how long in-flight handlers may run after Run's ctx
// is cancelled before their contexts are cancelled (0 to 1 h). Default 10 s.
func WithDrainTimeout(d time.Duration) Option {
	return func(c *config) error {
		if err := checkDur("drain timeout", d, 0, time.Hour); err != nil {
			return err
		}
		c.drain = d
		return nil
	}
}

// WithMaxAttempts sets how many times a message is handled before a failure
// sends it to the dead letters (1 to 1000; 1 = never retry). Default 10.
func WithMaxAttempts(n int) Option {
	return func(c *config) error {
		if err := optcheck.Range(ErrInvalidOption, "max attempts", n, 1, 1000); err != nil {
			return err
		}
		c.maxAttempts = n
		return nil
	}
}

// WithMaxDeliveries sets how often one stream entry may be delivered (first
// read plus reclaims after crashes) before it is dead-lettered as poison
// (1 to 1000). Default 5. It catches messages that crash their consumer.
func WithMaxDeliveries(n int) Option {
	return func(c *config) error {
		if err := optcheck.Range(ErrInvalidOption, "max deliveries", n, 1, 1000); err != nil {
			return err
		}
		c.maxDeliveries = int64(n)
		return nil
	}
}

// WithBackoff sets the delay before each retry. Default
// ExponentialBackoff(1s, 10m). The delay is measured by the Redis clock.
func WithBackoff(b Backoff) Option {
	return func(c *config) error {
		if b == nil {
			return fmt.Errorf("%w: nil backoff", ErrInvalidOption)
		}
		c.backoff = b
		return nil
	}
}

// WithStartAtNew creates the group (when it does not exist yet) at the end
// of the stream, so it sees only messages promoted from then on. Default:
// a new group starts at the beginning of the retained stream, so no message
// promoted before the first consumer started is missed.
func WithStartAtNew() Option {
	return func(c *config) error {
		c.fromNew = true
		return nil
	}
}

// WithDeadLetterCap caps the group's dead-letter stream at n entries
// (1 to 10^9): when a new dead letter would exceed it, the oldest are
// trimmed, counted in Counters.DeadLettersDropped and logged. Default: no
// cap, nothing is ever dropped.
func WithDeadLetterCap(n int64) Option {
	return func(c *config) error {
		if n < 1 || n > 1e9 {
			return fmt.Errorf("%w: dead-letter cap must be 1..1e9, got %d", ErrInvalidOption, n)
		}
		c.deadCap = n
		return nil
	}
}

// WithClock makes now the clock by which a message's deadline is judged
// (the default is the host's): a test's fake clock (package dstest).
func WithClock(now func() time.Time) Option {
	return func(c *config) error {
		c.now = now
		return nil
	}
}

// clock returns the time by c's clock.
func (c *config) clock() time.Time {
	if c.now != nil {
		return c.now()
	}
	return time.Now()
}

// WithoutHistory makes the consumer count nothing in the queue's history
// (internal/history): its acknowledgements, retries and dead letters are
// not counted in stats, history, watch, the web view or the exporter.
func WithoutHistory() Option {
	return func(c *config) error {
		c.noHistory = true
		return nil
	}
}

// MaxHandledRecords bounds WithHandledRecords.
const MaxHandledRecords = 90 * 24 * time.Hour

// WithHandledRecords keeps a record of each message the group handled
// (acknowledged after its handler succeeded, or dropped) for d (1 s to
// [MaxHandledRecords]): when, by the Redis clock, the attempt, the
// outcome and the consumer, by message id, in the message's shard
// (stream.Keys.Handled). Locate then answers "handled by this group at …"
// long after the stream was trimmed. A record is written with the
// acknowledgement, in the same script (no round trip of its own); records
// older than d are removed as new ones are written, so a queue that goes
// idle keeps its last records until its next acknowledgements. A Redis at
// maxmemory with noeviction refuses the records (they would add memory)
// and the acknowledgements go on without them. Default: none kept. What a
// record costs in memory and Redis CPU is in docs/performance.md.
func WithHandledRecords(d time.Duration) Option {
	return func(c *config) error {
		if d < time.Second || d > MaxHandledRecords {
			return fmt.Errorf("%w: handled records retention must be 1s..%s, got %s", ErrInvalidOption, MaxHandledRecords, d)
		}
		c.handledRetention = d
		return nil
	}
}

// WithTrimInterval sets how often the consumer trims the queue stream and
// its retry lane below the oldest entry some group still needs (100 ms to
// 1 h), when it has acknowledged (or retried, dead-lettered, dropped)
// entries of that stream since its last trim of it. Default 5 s. A stream
// of which it settled 10,000 entries since is trimmed at once, so that
// under a heavy load the stream stays short. An idle consumer trims only
// once every 10 minutes (or once per interval, if longer).
func WithTrimInterval(d time.Duration) Option {
	return func(c *config) error {
		if err := checkDur("trim interval", d, 100*time.Millisecond, time.Hour); err != nil {
			return err
		}
		c.trimEvery = d
		return nil
	}
}

// WithRetention keeps acknowledged entries for at least d (1 ms to 30 days)
// before trimming, e.g. to let a new group created with the default start
// position replay recent history. Default 0: trim as soon as every group
// has acknowledged.
func WithRetention(d time.Duration) Option {
	return func(c *config) error {
		if err := checkDur("retention", d, time.Millisecond, 30*24*time.Hour); err != nil {
			return err
		}
		c.retention = d
		return nil
	}
}

// WithoutTrim turns trimming off for this consumer. If no consumer trims,
// the stream grows without bound.
func WithoutTrim() Option {
	return func(c *config) error {
		c.noTrim = true
		return nil
	}
}

// WithStaleConsumerAfter sets how long a consumer with no pending entries
// may stay idle before it is removed from the group (1 min to 30 days).
// Default 1 h. Consumers with pending entries are never removed.
func WithStaleConsumerAfter(d time.Duration) Option {
	return func(c *config) error {
		if err := checkDur("stale consumer age", d, time.Minute, 30*24*time.Hour); err != nil {
			return err
		}
		c.staleConsumer = d
		return nil
	}
}

// WithPrecision sets the promotion precision of the group's retry lanes
// and, unless [WithoutPromotion], of the mover its consumers run (0 to
// engine.MaxPrecision, whole milliseconds; default 0): messages due within
// d share a promote call, never early and at most about d late (see
// engine.WithPrecision).
func WithPrecision(d time.Duration) Option {
	return func(c *config) error {
		c.precision = d
		return engine.CheckPrecision(d)
	}
}

// WithLogger sets the logger for background failures. Default slog.Default().
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if err := optcheck.NotNil(ErrInvalidOption, "logger", l == nil); err != nil {
			return err
		}
		c.logger = l
		return nil
	}
}

// WithHooks sets callbacks for delivery events.
func WithHooks(h Hooks) Option {
	return func(c *config) error {
		c.hooks = h
		return nil
	}
}

// ExponentialBackoff returns a Backoff of base·2^(attempt-2) with ±20 %
// jitter, so retries of a burst spread out, and never more than limit: with
// base 1 s the first retry comes after about 1 s, the second after about
// 2 s. A base or limit <= 0 means no delay.
func ExponentialBackoff(base, limit time.Duration) Backoff {
	return func(attempt int) time.Duration {
		d := min(base, limit)
		if d <= 0 {
			return 0
		}
		for i := 2; i < attempt && d < limit; i++ {
			if d > limit/2 {
				d = limit // doubling would pass the cap (or overflow)
			} else {
				d *= 2
			}
		}
		lo := d - d/5
		return lo + time.Duration(rand.Int64N(int64(min(d/5*2, limit-lo))+1))
	}
}

// ConstantBackoff returns a Backoff that always waits d.
func ConstantBackoff(d time.Duration) Backoff {
	return func(int) time.Duration { return d }
}

// WithConcurrencyLimit caps how many entries of the group are handled at
// once by all its consumers together, in every process (1 to 1000000): a
// consumer reads only for the slots it gets (see limit.go). Default: no
// cap.
func WithConcurrencyLimit(m int) Option {
	return func(c *config) error {
		if err := optcheck.Range(ErrInvalidOption, "concurrency limit", m, 1, 1000000); err != nil {
			return err
		}
		c.limits.Concurrency = m
		return nil
	}
}

// WithRateLimit limits the group to n entries started per interval per by
// all its consumers together, in every process, with up to burst started
// at once (n and burst 1 to 1000000, per 1 ms to 24 h, per/n at least
// 1 µs). Default: no limit.
func WithRateLimit(n int, per time.Duration, burst int) Option {
	return func(c *config) error {
		switch {
		case n < 1 || n > 1000000:
			return fmt.Errorf("%w: rate limit must be 1 to 1000000 per interval, got %d", ErrInvalidOption, n)
		case per < time.Millisecond || per > 24*time.Hour:
			return fmt.Errorf("%w: rate limit interval must be 1ms to 24h, got %s", ErrInvalidOption, per)
		case per/time.Duration(n) < time.Microsecond:
			return fmt.Errorf("%w: rate limit %d per %s is over 1 per µs", ErrInvalidOption, n, per)
		case burst < 1 || burst > 1000000:
			return fmt.Errorf("%w: rate limit burst must be 1 to 1000000, got %d", ErrInvalidOption, burst)
		}
		c.limits.Rate, c.limits.Per, c.limits.Burst = n, per, burst
		return nil
	}
}
