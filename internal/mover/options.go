package mover

import (
	"log/slog"
	"time"

	"github.com/delaystream/delaystream/internal/engine"
)

// ErrInvalidOption is wrapped by every error an Option or New returns.
var ErrInvalidOption = engine.ErrInvalidOption

// ErrRunning is returned by Run when the Mover is already running.
var ErrRunning = engine.ErrRunning

// Option configures a Mover.
type Option func(*engine.Config) error

// Defaults and bounds of the options.
const (
	DefaultBatchSize = engine.DefaultBatchSize // entries per promote call (256)
	MaxBatchSize     = engine.MaxBatchSize     // WithBatchSize upper bound (1000)
	DefaultMaxIdle   = engine.DefaultMaxIdle   // idle probe interval; longest sleep without a check (1 s)
	DefaultLeaseTTL  = engine.DefaultLeaseTTL  // how long a lease outlives its last renewal (1.25 s)
	MaxPrecision     = engine.MaxPrecision     // WithPrecision upper bound (1 s)
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
	// OnOwnership is called with the shards this mover promotes (sorted)
	// whenever that set changes; it is the new value of [Mover.Owned]. The
	// movers of a sharded queue divide its shards between them (see
	// [WithShards]) and report every rebalance; the mover of an unsharded
	// queue reports shard 0 when Run starts. Every mover reports an empty
	// set when Run returns.
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

// WithPrefix sets the key prefix. Default stream.DefaultPrefix ("ds").
func WithPrefix(p string) Option { return Option(engine.WithPrefix(p)) }

// WithoutHistory makes the mover count nothing in the queue's history.
func WithoutHistory() Option { return Option(engine.WithoutHistory()) }

// WithBatchSize sets the most entries one promote call moves (1 to
// [MaxBatchSize]). Default [DefaultBatchSize]. Larger batches raise
// throughput and make each call, which blocks Redis, longer.
func WithBatchSize(n int) Option { return Option(engine.WithBatchSize(n)) }

// WithMaxIdle sets how often an idle mover (nothing due within this long)
// probes the head of a lane's delayed set (10 ms to 1 min). Default
// [DefaultMaxIdle] (1 s). It bounds lateness when a wake-up is lost and is
// the idle cost: a mover's idle lanes share one probe (a ZRANGE) per
// interval, so with one lane that is one probe per interval, and each of n
// idle shards is probed every n intervals, but at least every 30 s (or
// every interval, when that is longer). It must be shorter than the lease
// TTL.
func WithMaxIdle(d time.Duration) Option { return Option(engine.WithMaxIdle(d)) }

// WithLeaseTTL sets how long a mover's lease on a lane outlives its last
// renewal (20 ms to 10 min). Default [DefaultLeaseTTL] (1.25 s). When the
// lease holder dies, a standby mover takes over after at most this long, so
// it bounds the extra lateness a crash causes. It must exceed the max idle.
func WithLeaseTTL(d time.Duration) Option { return Option(engine.WithLeaseTTL(d)) }

// WithoutLease makes the mover promote without taking the lane's lease: every
// mover so configured runs the promote script on its own schedule. Promotion
// stays exactly-once (the script is atomic), but Redis load grows with the
// number of movers. Meant for tests and for a single mover that must not wait
// out a dead predecessor's lease. On a sharded queue it also keeps the mover
// out of the registry of movers: it promotes every shard.
func WithoutLease() Option { return Option(engine.WithoutLease()) }

// WithShards sets the queue's shard count (1 to stream.MaxShards). Default
// 1, an unsharded queue. The count is part of the queue: it is recorded in
// Redis when the queue is first used, and every part of the queue
// (producers, movers, consumers) must use the same count; Run returns an
// error wrapping stream.ErrShardCount, having written nothing, when the
// recorded count differs.
//
// The movers of a sharded queue divide its shards between them through a
// registry of live movers in Redis and promote their shares without
// leases; see the package doc and docs/sharding.md ("Promotion over
// shards").
func WithShards(n int) Option { return Option(engine.WithShards(n)) }

// WithPrecision sets how late promotion may be, to gather the messages
// due within d into one promote call (0 to [MaxPrecision], whole
// milliseconds; default 0, every due time its own call). A message is
// never promoted before its due time, and at most about d after it. See
// engine.WithPrecision.
func WithPrecision(d time.Duration) Option { return Option(engine.WithPrecision(d)) }

// WithLogger sets the logger for background failures. Default slog.Default().
func WithLogger(l *slog.Logger) Option { return Option(engine.WithLogger(l)) }

// WithHooks sets callbacks for promotion, lease and failure events.
func WithHooks(h Hooks) Option { return Option(engine.WithHooks(engine.Hooks(h))) }
