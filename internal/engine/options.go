package engine

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/delaystream/delaystream/internal/errs"

	"github.com/delaystream/delaystream/internal/optcheck"
	"github.com/delaystream/delaystream/internal/stream"
)

// ErrInvalidOption is wrapped by every error an Option or New returns.
var ErrInvalidOption = errs.ErrInvalidOption

// ErrRunning is returned by Run when the Engine is already running.
var ErrRunning = errs.ErrRunning

// Option configures an Engine.
type Option func(*Config) error

// Config is what the options set; its zero value is not usable (New sets
// the defaults).
type Config struct {
	prefix    string
	batch     int
	maxIdle   time.Duration
	probe     time.Duration // idle probe interval; 0 = maxIdle
	leaseTTL  time.Duration
	noLease   bool
	logger    *slog.Logger
	hooks     Hooks
	callLimit time.Duration
	retryOf   string // "" = main lane; else the group whose retry lane to promote
	noHistory bool   // WithoutHistory: promote calls count nothing
	shards    int    // the queue's shard count; one lane per shard
	precision int64  // bucket width in ms; 0 or 1 = every due ms its own target
}

// Defaults and bounds of the options.
const (
	DefaultBatchSize = 256                     // entries per promote call
	MaxBatchSize     = 1000                    // WithBatchSize upper bound
	DefaultMaxIdle   = time.Second             // idle probe interval; longest sleep without a check
	DefaultLeaseTTL  = 1250 * time.Millisecond // how long a lease outlives its last renewal
	MaxPrecision     = time.Second             // WithPrecision upper bound
)

// Hooks are optional callbacks. They run on the mover's goroutines and must
// not block; nil hooks are skipped.
type Hooks struct {
	// OnPromote is called after every promote call that moved or quarantined
	// anything: lane is the lane's stream key, moved the entries appended to
	// the stream, quarantined those set aside, took the call's duration.
	OnPromote func(lane string, moved, quarantined int, took time.Duration)
	// OnLease is called when this mover gains (true) or loses (false) the
	// lease of a lane. The lease is taken only for work: a lane that fell
	// idle reports the loss at the mover's next promote call. The main
	// lanes of a sharded queue take no lease (see OnOwnership).
	OnLease func(lane string, owner bool)
	// OnError is called after every failed promote call. stuck reports an
	// error that repeats until someone fixes the lane's keys or data (see
	// [Counters].Stuck); a key of the wrong type arrives as an error
	// wrapping a *stream.KeyTypeError that names it.
	//
	// The movers of a sharded queue also report here every failed beat of
	// the registry of live movers, with lane set to the registry's key
	// (stream.Layout.Movers): a mover that cannot beat keeps promoting the
	// shards of its last view (every shard if it never had one) until a
	// beat succeeds.
	OnError func(lane string, err error, stuck bool)
	// OnOwnership is called with the shards this engine promotes (sorted)
	// whenever that set changes; it is the new value of [Engine.Owned].
	// The movers of a sharded queue's main lanes divide its shards between
	// them (see [WithShards]) and report every rebalance; any other engine
	// reports all of its shards when Run starts. Every engine reports an
	// empty set when Run returns.
	OnOwnership func(owned []int)
	// OnDataLoss is called, once per loss, when this mover finds that Redis
	// lost the queue's data: the queue's record (stream.Layout.Meta) is
	// gone or was recreated since the mover last saw it (Redis restarted
	// without persistence, FLUSHALL, a failover to a replica that had none
	// of it). Messages that waited, and entries pending in the streams, may
	// be lost. err wraps stream.ErrDataLost. The mover checks every 30 s and
	// whenever its calls work again after failing; it also logs the loss at
	// error level.
	OnDataLoss func(err error)
}

// WithoutHistory makes the promote calls count nothing in the queue's
// history (internal/history): promoted and quarantined are then missing
// from stats, history, watch, the web view and the exporter.
func WithoutHistory() Option {
	return func(c *Config) error {
		c.noHistory = true
		return nil
	}
}

// WithPrefix sets the key prefix. Default stream.DefaultPrefix ("ds").
func WithPrefix(p string) Option {
	return func(c *Config) error {
		c.prefix = p
		return optcheck.Prefix(ErrInvalidOption, p)
	}
}

// WithBatchSize sets the most entries one promote call moves (1 to
// [MaxBatchSize]). Default [DefaultBatchSize]. Larger batches raise
// throughput and make each call, which blocks Redis, longer.
func WithBatchSize(n int) Option {
	return func(c *Config) error {
		c.batch = n
		return optcheck.Range(ErrInvalidOption, "batch size", n, 1, MaxBatchSize)
	}
}

// WithMaxIdle sets how often an idle mover (nothing due within this long)
// probes the head of a lane's delayed set (10 ms to 1 min). Default
// [DefaultMaxIdle] (1 s). It bounds lateness when a wake-up is lost and is
// the idle cost: the probes of an engine share one budget of one ZRANGE
// per interval, taken in turn by its idle lanes, so each of n idle lanes
// is probed every n intervals, but at least every 30 s (or every interval
// when that is longer). With one lane that is one probe per interval. It
// must be shorter than the lease TTL.
func WithMaxIdle(d time.Duration) Option {
	return func(c *Config) error {
		c.maxIdle = d
		return optcheck.Range(ErrInvalidOption, "max idle", d, 10*time.Millisecond, maxInterval)
	}
}

// WithIdleProbe sets how often an idle lane probes its head when that is
// to differ from the max idle (10 ms to 1 min): the probe only catches a
// wake-up that was lost, and a wake-up is lost only while the pub/sub
// connection is broken, after which the engine looks at every lane at
// once (and a silent connection is pinged after 30 s). A consumer's
// movers use 30 s; a mover.Mover keeps one probe per max idle. The probes
// still share one budget per engine (see [WithMaxIdle]), each lane probed
// at least every 30 s (or every interval, when that is longer).
func WithIdleProbe(d time.Duration) Option {
	return func(c *Config) error {
		c.probe = d
		return optcheck.Range(ErrInvalidOption, "idle probe", d, 10*time.Millisecond, maxInterval)
	}
}

// WithLeaseTTL sets how long a mover's lease on a lane outlives its last
// renewal (20 ms to 10 min). Default [DefaultLeaseTTL] (1.25 s). When the
// lease holder dies, a standby mover takes over after at most this long, so
// it bounds the extra lateness a crash causes. It must exceed the max idle.
func WithLeaseTTL(d time.Duration) Option {
	return func(c *Config) error {
		c.leaseTTL = d
		return optcheck.Range(ErrInvalidOption, "lease TTL", d, 20*time.Millisecond, 10*time.Minute)
	}
}

// WithoutLease makes the mover promote without taking the lane's lease: every
// mover so configured runs the promote script on its own schedule. Promotion
// stays exactly-once (the script is atomic), but Redis load grows with the
// number of movers. Meant for tests and for a single mover that must not wait
// out a dead predecessor's lease. On a sharded queue it also keeps the mover
// out of the registry of movers: it promotes every shard.
func WithoutLease() Option {
	return func(c *Config) error {
		c.noLease = true
		return nil
	}
}

// WithRetryLaneOf makes the engine promote group's retry lane instead of the
// queue's main lane. Package group runs such an engine inside every
// Consumer; the lane's lease makes one consumer of the group do the work.
func WithRetryLaneOf(group string) Option {
	return func(c *Config) error {
		if err := stream.ValidateName("group", group); err != nil {
			return errs.Invalid(err)
		}
		c.retryOf = group
		return nil
	}
}

// WithShards sets the queue's shard count (1 to stream.MaxShards). Default
// 1, an unsharded queue. The count is part of the queue: it is recorded in
// Redis when the queue is first used, every part of the queue (producers,
// movers, consumers) must use the same count, and Run returns an error
// wrapping stream.ErrShardCount, having written nothing, when it differs.
//
// The engine builds one lane per shard: the main lanes, or with
// [WithRetryLaneOf] the group's retry lane of every shard. The movers of
// a sharded queue's main lanes divide the shards between them through a
// registry of live movers in Redis, each promoting its share without
// leases; retry lanes keep a lease per lane. See [Engine.Run].
func WithShards(n int) Option {
	return func(c *Config) error {
		c.shards = n
		return optcheck.Range(ErrInvalidOption, "shard count", n, 1, stream.MaxShards)
	}
}

// WithPrecision sets how late promotion may be, to gather messages into
// fewer promote calls (0 to [MaxPrecision], whole milliseconds). Default 0:
// every due time is its own target. With d > 0 due times fall in buckets d
// wide on the Redis clock (aligned to multiples of d since the Unix epoch,
// so every engine and shard shares them); a lane sleeps until the end of
// the bucket of its next due time and then promotes everything due, so a
// message is never early and at most about d late, and the messages of one
// bucket cost one call. A wake-up for a due time in the bucket the lane
// already sleeps for wakes nothing.
func WithPrecision(d time.Duration) Option {
	return func(c *Config) error {
		c.precision = d.Milliseconds()
		return CheckPrecision(d)
	}
}

// CheckPrecision returns an error wrapping [ErrInvalidOption] unless d is
// a valid precision: 0 to [MaxPrecision], whole milliseconds.
func CheckPrecision(d time.Duration) error {
	if err := optcheck.Range(ErrInvalidOption, "precision", d, 0, MaxPrecision); err != nil {
		return err
	}
	if d%time.Millisecond != 0 {
		return fmt.Errorf("%w: precision must be whole milliseconds, got %s", ErrInvalidOption, d)
	}
	return nil
}

// WithLogger sets the logger for background failures. Default slog.Default().
func WithLogger(l *slog.Logger) Option {
	return func(c *Config) error {
		c.logger = l
		return optcheck.NotNil(ErrInvalidOption, "logger", l == nil)
	}
}

// WithHooks sets callbacks for promotion and lease events.
func WithHooks(h Hooks) Option {
	return func(c *Config) error {
		c.hooks = h
		return nil
	}
}
