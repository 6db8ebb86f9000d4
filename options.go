package delaystream

import (
	"log/slog"
	"time"

	"github.com/delaystream/delaystream/codec"
	"github.com/delaystream/delaystream/internal/delay"
	"github.com/delaystream/delaystream/internal/mover"
	"github.com/delaystream/delaystream/internal/optcheck"
	"github.com/delaystream/delaystream/internal/stream"
)

// Option configures a Queue.
type Option func(*config) error

type config struct {
	prefix    string
	shards    int
	codec     codec.Codec
	logger    *slog.Logger
	drain     time.Duration
	promote   bool
	producer  []delay.Option
	moverOpts []mover.Option
}

// DefaultDrain is how long, by default, in-flight handlers may run on after
// Run's ctx is cancelled (see [WithDrainTimeout]).
const DefaultDrain = 10 * time.Second

// WithPrefix sets the key prefix of every key of the queue. Default
// stream.DefaultPrefix ("ds"). It is given to the producer, the mover and
// every consumer group of the Queue, so the parts cannot disagree.
func WithPrefix(p string) Option {
	return func(c *config) error {
		c.prefix = p
		return optcheck.Prefix(ErrInvalidOption, p)
	}
}

// WithShards splits the queue into n shards (1 to stream.MaxShards;
// default 1), each under its own Redis Cluster hash tag, so that one queue
// spreads over the masters of a cluster. The count is part of the queue:
// it is recorded in Redis at first use, and every part of the Queue (the
// producer, the mover, every group) and every other process using the
// queue must use the same count; one built with another count fails at its
// first call with an error wrapping stream.ErrShardCount and writes
// nothing. Changing a live queue's count is refused; see "Sharded queues"
// in the README for the procedure.
func WithShards(n int) Option {
	return func(c *config) error {
		c.shards = n
		return optcheck.Range(ErrInvalidOption, "shard count", n, 1, stream.MaxShards)
	}
}

// WithCodec sets the codec of typed payloads ([Schedule], [HandleTyped],
// delay.NewTyped on [Queue.Producer]). Default codec.Msgpack. Producer and
// consumers of the Queue share it, so they cannot disagree.
func WithCodec(cd codec.Codec) Option {
	return func(c *config) error {
		c.codec = cd
		return optcheck.NotNil(ErrInvalidOption, "codec", cd == nil)
	}
}

// WithLogger sets the logger of the mover and of every consumer group for
// background failures. Default slog.Default(). A group's own
// group.WithLogger, given to [Queue.Handle], takes precedence for it.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		c.logger = l
		return optcheck.NotNil(ErrInvalidOption, "logger", l == nil)
	}
}

// WithDrainTimeout sets how long in-flight handlers of every group may run
// on after Run's ctx is cancelled, before their contexts are cancelled
// (100 ms to 10 min). Default [DefaultDrain]. A group's own
// group.WithDrainTimeout takes precedence for it.
func WithDrainTimeout(d time.Duration) Option {
	return func(c *config) error {
		c.drain = d
		return optcheck.Range(ErrInvalidOption, "drain timeout", d, 100*time.Millisecond, 10*time.Minute)
	}
}

// WithoutPromotion makes Run run only the consumer groups, not the queue's
// mover: for processes that must not promote (another deployment runs the
// mover). By default Run promotes: any number of processes may, and the
// mover's lease makes one of them do the work. Without a mover somewhere,
// nothing is ever delivered. (Each group's retry lane is promoted by its
// consumers either way.)
func WithoutPromotion() Option {
	return func(c *config) error {
		c.promote = false
		return nil
	}
}

// WithProducerOptions passes options to the queue's producer (delay.New):
// duplicate policy, payload limit, batch size. A delay.WithPrefix or
// delay.WithCodec (a codec of another type) that disagrees with the queue's
// is refused with an error: use [WithPrefix] and [WithCodec], which every
// part shares.
func WithProducerOptions(opts ...delay.Option) Option {
	return func(c *config) error {
		c.producer = append(c.producer, opts...)
		return nil
	}
}

// WithMoverOptions passes options to the queue's mover (mover.New): batch
// size, max idle, lease TTL, hooks. A mover.WithPrefix that disagrees
// with the queue's is refused with an error: use [WithPrefix]. A mover.WithLogger takes precedence over
// [WithLogger] for the mover.
func WithMoverOptions(opts ...mover.Option) Option {
	return func(c *config) error {
		c.moverOpts = append(c.moverOpts, opts...)
		return nil
	}
}
