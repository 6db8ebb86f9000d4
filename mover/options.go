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
	// idle reports the loss at the mover's next promote call.
	OnLease func(lane string, owner bool)
	// OnError is called after every failed promote call. stuck reports an
	// error that repeats until someone fixes the lane's keys or data (see
	// [Counters].Stuck); a key of the wrong type arrives as an error
	// wrapping a *stream.KeyTypeError that names it.
	OnError func(lane string, err error, stuck bool)
}

// WithPrefix sets the key prefix. Default stream.DefaultPrefix ("ds").
func WithPrefix(p string) Option { return Option(engine.WithPrefix(p)) }

// WithBatchSize sets the most entries one promote call moves (1 to
// [MaxBatchSize]). Default [DefaultBatchSize]. Larger batches raise
// throughput and make each call, which blocks Redis, longer.
func WithBatchSize(n int) Option { return Option(engine.WithBatchSize(n)) }

// WithMaxIdle sets how often an idle mover (nothing due within this long)
// probes the head of each lane's delayed set (10 ms to 1 min). Default
// [DefaultMaxIdle] (1 s). It bounds lateness when a wake-up is lost and is
// the idle cost: one ZRANGE per lane per interval. It must be shorter than
// the lease TTL.
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
// out a dead predecessor's lease.
func WithoutLease() Option { return Option(engine.WithoutLease()) }

// WithLogger sets the logger for background failures. Default slog.Default().
func WithLogger(l *slog.Logger) Option { return Option(engine.WithLogger(l)) }

// WithHooks sets callbacks for promotion, lease and failure events.
func WithHooks(h Hooks) Option { return Option(engine.WithHooks(engine.Hooks(h))) }
