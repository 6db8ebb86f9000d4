package delay

import (
	"fmt"
	"time"

	"github.com/delaystream/delaystream/internal/errs"

	"github.com/delaystream/delaystream/codec"
	"github.com/delaystream/delaystream/internal/optcheck"
	"github.com/delaystream/delaystream/internal/stream"
)

// ErrInvalidOption is wrapped by every error an Option or New returns.
var ErrInvalidOption = errs.ErrInvalidOption

// Option configures a Queue.
type Option func(*config) error

type config struct {
	prefix     string
	codec      codec.Codec
	maxPayload int
	policy     Policy
	batchSize  int
	shards     int
	ack        ackConfig     // WithReplicaAck; zero: writes do not wait for replicas
	expire     time.Duration // WithExpireAfter; 0: messages never expire by default
	alone      bool          // WithoutGroupCommit: every Schedule makes its own script call
	readRecord bool          // WithRecordReadOnly: reads check the queue's record without writing it
}

// WithRecordReadOnly makes the producer's reads (Stats, ShardStats) check
// the queue's record without ever writing it, as Peek does: an operator's
// read must not re-create the record of a queue whose keys were deleted or
// evicted. Its writes still record the queue as every part does.
func WithRecordReadOnly() Option {
	return func(c *config) error {
		c.readRecord = true
		return nil
	}
}

// Limits on what a producer accepts. They keep every script call bounded.
const (
	// DefaultMaxPayload is the default payload size limit (1 MiB).
	DefaultMaxPayload = 1 << 20
	// MaxIDLen is the longest message id accepted, in bytes.
	MaxIDLen = 256
	// MaxHeaders is the most headers a message may carry.
	MaxHeaders = 64
	// MaxHeaderLen bounds a header key and a header value, each, in bytes.
	MaxHeaderLen = 4096
	// ReservedHeaderPrefix starts the header keys delaystream reserves for
	// itself (a recurring occurrence's schedule and occurrence); messages
	// may not set them.
	ReservedHeaderPrefix = "ds."
	// DefaultBatchSize is how many messages ScheduleBatch sends per script
	// call. Larger chunks save little Redis CPU per message, and a short
	// call keeps the server free for other clients.
	DefaultBatchSize = 500
	// MaxBatchSize bounds WithBatchSize: one script call never takes more.
	MaxBatchSize = 5000
)

// WithPrefix sets the key prefix. Default [stream.DefaultPrefix] ("ds").
// Producers, movers and consumers of one queue must use the same prefix.
func WithPrefix(p string) Option {
	return func(c *config) error {
		c.prefix = p
		return optcheck.Prefix(ErrInvalidOption, p)
	}
}

// WithCodec sets the codec [Typed] uses to encode values. Default
// codec.Msgpack. It does not affect Schedule, which takes bytes.
func WithCodec(cd codec.Codec) Option {
	return func(c *config) error {
		c.codec = cd
		return optcheck.NotNil(ErrInvalidOption, "codec", cd == nil)
	}
}

// WithMaxPayload sets the largest payload accepted, in bytes (1 to 64 MiB).
// Default [DefaultMaxPayload] (1 MiB). Larger payloads are refused with
// [ErrInvalidMessage] and nothing is written.
func WithMaxPayload(n int) Option {
	return func(c *config) error {
		c.maxPayload = n
		return optcheck.Range(ErrInvalidOption, "max payload (bytes)", n, 1, 64<<20)
	}
}

// WithDuplicatePolicy sets what Schedule does when a message with the same id
// is already waiting. Default [Keep]; see [Policy]. A message's own
// OnDuplicate overrides it.
func WithDuplicatePolicy(p Policy) Option {
	return func(c *config) error {
		if p < Keep || p > Reject {
			return fmt.Errorf("%w: unknown duplicate policy %d", ErrInvalidOption, p)
		}
		c.policy = p
		return nil
	}
}

// WithBatchSize sets how many messages ScheduleBatch sends per script call
// (1 to [MaxBatchSize]). Default [DefaultBatchSize]. Chunks are pipelined.
func WithBatchSize(n int) Option {
	return func(c *config) error {
		c.batchSize = n
		return optcheck.Range(ErrInvalidOption, "batch size", n, 1, MaxBatchSize)
	}
}

// WithExpireAfter gives every message scheduled without a Deadline the
// deadline d after its due time (for After, as the producer's clock
// estimates the due time): a consumer that gets it later dead-letters it
// with the reason "expired" instead of handling it (see
// [Message].Deadline). d must be positive. Default: messages never expire.
func WithExpireAfter(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: expire after %s: must be positive", ErrInvalidOption, d)
		}
		c.expire = d
		return nil
	}
}

// WithShards spreads the queue over n shards (1 to stream.MaxShards),
// each a copy of the queue's keys under its own hash tag, so that on Redis
// Cluster the queue's work spreads over the masters. Default 1, the
// unsharded layout. A message goes to the shard of its id (a stable hash;
// for a generated id, of its random part), so Cancel, Reschedule and Get
// still take one round trip.
//
// The count is part of the queue: it is recorded in Redis when the queue
// is first used, and every part of the queue (producer, mover, consumer)
// must be built with the same count. A part built with another count gets,
// from its first call, an error wrapping stream.ErrShardCount and writes
// nothing; so does a sharded part on a queue that was used unsharded
// before its count was recorded.
func WithShards(n int) Option {
	return func(c *config) error {
		c.shards = n
		return optcheck.Range(ErrInvalidOption, "shard count", n, 1, stream.MaxShards)
	}
}

// WithoutGroupCommit turns off group commit (see [Queue.Schedule]): every
// Schedule call then makes its own script call, however many run at once,
// as ScheduleBatch with one item does. Default: on.
//
// Group commit costs a caller nothing while no other call of its group is
// in flight, and under concurrency it multiplies the rate and divides the
// Redis CPU per message. Turn it off when each call must stand alone:
// when go-redis hooks (tracing, metrics) must see one command per
// Schedule, when a caller's ctx deadline must bound the socket I/O of its
// own call (redis.Options.ContextTimeoutEnabled; a grouped call's
// messages are sent under the latest deadline among its callers), or when
// a handful of concurrent callers on an idle server should each pay one
// round trip rather than wait for the call in flight.
func WithoutGroupCommit() Option {
	return func(c *config) error {
		c.alone = true
		return nil
	}
}
