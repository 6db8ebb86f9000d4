package delaystream

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/delaystream/delaystream/codec"
	"github.com/delaystream/delaystream/internal/delay"
	"github.com/delaystream/delaystream/internal/errs"
	"github.com/delaystream/delaystream/internal/mover"
	"github.com/delaystream/delaystream/internal/optcheck"
	"github.com/delaystream/delaystream/internal/recur"
)

// Option configures a [Queue]: its keys, its codec, how it schedules and
// how it promotes. Options for a consumer group are [GroupOption]s.
type Option func(*config) error

// config is the one configuration every part of a Queue is built from.
type config struct {
	prefix   string
	shards   int
	codec    codec.Codec
	logger   *slog.Logger
	drain    time.Duration
	promote  bool
	history  bool                    // counted in Redis (not WithoutHistory)
	prec     time.Duration           // the promotion precision: WithPrecision
	producer []delay.Option          // scheduling options, after prefix, shards and codec
	mover    []mover.Option          // promotion options, after prefix, shards and logger
	parsers  map[string]recur.Parser // recurring spec kinds besides "every"
	horizon  time.Duration           // recurring schedules' horizon; 0: the default

	noEviction   bool                // WithNoEvictionRequired
	evictionHook func([]RedisMemory) // WithEvictionHook
	memEvery     time.Duration       // how often Run checks memory settings
}

// The defaults of the queue options.
const (
	// DefaultPrefix is the key prefix of a queue built without [WithPrefix].
	DefaultPrefix = "ds"
	// DefaultDrain is how long, by default, in-flight handlers may run on
	// after Run's ctx is cancelled (see [WithDrainTimeout]).
	DefaultDrain = 10 * time.Second
	// DefaultMaxPayload is the largest payload accepted by default, in bytes
	// (see [WithMaxPayload]).
	DefaultMaxPayload = 1 << 20
	// MaxShards is the largest shard count [WithShards] takes.
	MaxShards = 1024
	// MaxHeaders is the most headers a [Message] may carry.
	MaxHeaders = 64
	// ReservedHeaderPrefix starts the header keys the library reserves:
	// a message's own headers must not use it.
	ReservedHeaderPrefix = "ds."
)

func newConfig(opts []Option) (config, error) {
	cfg := config{prefix: DefaultPrefix, shards: 1, codec: codec.Msgpack, drain: DefaultDrain, promote: true, history: true, logger: slog.Default(), memEvery: MemoryCheckInterval}
	return cfg, optcheck.Apply(ErrInvalidOption, &cfg, opts)
}

// WithPrefix sets the prefix of every key of the queue. Default
// [DefaultPrefix] ("ds"). Every process using the queue must use the same
// prefix; queues with different prefixes are unrelated.
func WithPrefix(p string) Option {
	return func(c *config) error {
		c.prefix = p
		return optcheck.Prefix(ErrInvalidOption, p)
	}
}

// WithShards splits the queue into n shards (1 to [MaxShards]; default 1),
// each under its own Redis Cluster hash tag, so that one queue spreads over
// the masters of a cluster. A message goes to the shard of its id. The
// count is part of the queue: it is recorded in Redis at first use, and a
// process using the queue with another count fails at its first call with
// an error wrapping [ErrShardCount] and writes nothing. See
// docs/sharding.md for changing a live queue's count.
func WithShards(n int) Option {
	return func(c *config) error {
		c.shards = n
		return optcheck.Range(ErrInvalidOption, "shard count", n, 1, MaxShards)
	}
}

// WithCodec sets the codec of typed payloads ([Schedule], [Get],
// [HandleTyped]). Default codec.Msgpack. Producers and consumers of a
// queue must use the same codec.
func WithCodec(cd codec.Codec) Option {
	return func(c *config) error {
		c.codec = cd
		return optcheck.NotNil(ErrInvalidOption, "codec", cd == nil)
	}
}

// WithLogger sets the logger of background failures (promotion and every
// consumer group). Default slog.Default().
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		c.logger = l
		return optcheck.NotNil(ErrInvalidOption, "logger", l == nil)
	}
}

// WithDrainTimeout sets how long in-flight handlers may run on after Run's
// ctx is cancelled, before their contexts are cancelled (100 ms to 10 min).
// Default [DefaultDrain]. An entry whose handler is cancelled is handed
// back to its group at once.
func WithDrainTimeout(d time.Duration) Option {
	return func(c *config) error {
		c.drain = d
		return optcheck.Range(ErrInvalidOption, "drain timeout", d, 100*time.Millisecond, 10*time.Minute)
	}
}

// WithoutPromotion makes [Queue.Run] run only the consumer groups, not
// the promotion of due messages: for processes that must not promote. By
// default Run promotes; any number of processes may, and a lease makes one
// of them do the work at a time. Without promotion somewhere, nothing is
// ever delivered. (Each group's retries are promoted by its consumers
// either way.)
func WithoutPromotion() Option {
	return func(c *config) error {
		c.promote = false
		return nil
	}
}

// WithoutHistory makes this process count nothing of its work in the
// queue's history in Redis (promoted and quarantined, and each group's
// handled, dropped, retried and dead-lettered), which `delaystream stats`,
// `history` and `watch`, the web view and the exporter show. Counting
// costs no round trip: three HINCRBY in the script of each transition;
// what it costs in Redis CPU per message is in docs/performance.md
// ("History counters"). Every process of a queue should agree: counts of
// processes built with it are missing from the history. Handled records
// (WithHandledRecords) are not affected.
func WithoutHistory() Option {
	return func(c *config) error {
		c.history = false
		return nil
	}
}

// WithDuplicatePolicy sets what scheduling does when a message with the
// same id is already waiting. Default [PolicyKeep]. A message's own
// OnDuplicate overrides it.
func WithDuplicatePolicy(p Policy) Option {
	return producerOption(delay.WithDuplicatePolicy(delay.Policy(p)))
}

// WithMaxPayload sets the largest payload accepted, in bytes (1 to
// 64 MiB). Default [DefaultMaxPayload] (1 MiB). A larger payload is
// refused with [ErrInvalidMessage] and nothing is written.
func WithMaxPayload(n int) Option { return producerOption(delay.WithMaxPayload(n)) }

// WithExpireAfter gives every message scheduled without a Deadline the
// deadline d after its due time: a group that gets it later dead-letters it
// with the reason [ReasonExpired] instead of handling it. d must be
// positive. Default: messages never expire.
func WithExpireAfter(d time.Duration) Option { return producerOption(delay.WithExpireAfter(d)) }

// WithReplicaAck makes every write of a message (Schedule, ScheduleBatch,
// Cancel, Reschedule) wait until at least replicas replicas of its master
// have it (Redis WAIT), for at most timeout. A write fewer replicas
// confirmed returns an error wrapping [ErrNotReplicated]: it was made on
// the master and may or may not survive a failover. The client must be a
// *redis.Client or a *redis.ClusterClient; any other is refused with
// [ErrInvalidOption]. See docs/reliability.md.
func WithReplicaAck(replicas int, timeout time.Duration) Option {
	return producerOption(delay.WithReplicaAck(replicas, timeout))
}

// WithoutGroupCommit makes every Schedule call its own script call.
// Default: concurrent Schedule calls of a process share script calls
// (group commit), which multiplies the rate under concurrency and costs a
// lone caller nothing. Turn it off when go-redis hooks must see one command
// per Schedule, or when a caller's ctx deadline must bound its own call's
// socket I/O (a shared call runs under the latest deadline of its callers).
func WithoutGroupCommit() Option { return producerOption(delay.WithoutGroupCommit()) }

// WithMoverHooks sets callbacks for promotion events, for metrics and
// tracing (see [MoverHooks]).
func WithMoverHooks(h MoverHooks) Option {
	return func(c *config) error {
		c.mover = append(c.mover, mover.WithHooks(mover.Hooks(h)))
		return nil
	}
}

func producerOption(o delay.Option) Option {
	return func(c *config) error {
		c.producer = append(c.producer, o)
		return nil
	}
}

// partError wraps the error of building a part from the queue's options:
// an invalid option's error says what is wrong by itself; any other is
// named by its part.
func partError(part string, err error) error {
	if errors.Is(err, ErrInvalidOption) {
		return err
	}
	return fmt.Errorf("%s: %w", part, errs.Invalid(err))
}
