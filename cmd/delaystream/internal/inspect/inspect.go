package inspect

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream/internal/delay"
	"github.com/delaystream/delaystream/internal/group"
	"github.com/delaystream/delaystream/internal/stream"
)

var (
	// ErrNotFound is wrapped when a queue, group, message or dead letter
	// does not exist.
	ErrNotFound = errors.New("inspect: not found")
	// ErrInvalid is wrapped when an argument is malformed (a name, an id,
	// a time range, a count).
	ErrInvalid = errors.New("inspect: invalid argument")
)

// Inspector reads and acts on the queues under one key prefix. Build it
// with [New]; it is safe for concurrent use.
type Inspector struct {
	rdb    redis.UniversalClient
	prefix string
}

// Option configures an Inspector.
type Option func(*Inspector) error

// WithPrefix sets the key prefix of the queues. Default
// stream.DefaultPrefix ("ds"). It must satisfy stream.ValidateName.
func WithPrefix(p string) Option {
	return func(in *Inspector) error {
		if err := stream.ValidateName("prefix", p); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		in.prefix = p
		return nil
	}
}

// New returns an Inspector over rdb, which it borrows and never closes.
// It talks to no server. Errors wrap [ErrInvalid].
func New(rdb redis.UniversalClient, opts ...Option) (*Inspector, error) {
	if rdb == nil {
		return nil, fmt.Errorf("%w: nil redis client", ErrInvalid)
	}
	in := &Inspector{rdb: rdb, prefix: stream.DefaultPrefix}
	for _, o := range opts {
		if err := o(in); err != nil {
			return nil, err
		}
	}
	return in, nil
}

// Prefix returns the key prefix the Inspector reads.
func (in *Inspector) Prefix() string { return in.prefix }

// Client returns the Redis client the Inspector reads with.
func (in *Inspector) Client() redis.UniversalClient { return in.rdb }

// QueueInfo is a queue found under the prefix.
type QueueInfo struct {
	Name   string `json:"name"`   // the queue's name
	Shards int    `json:"shards"` // its shard count (1: unsharded); 0 when its record holds no valid count
	Meta   string `json:"meta"`   // the key of its record
}

// Queues discovers the queues under the prefix, on a single server or on
// every master of a Cluster, sorted by name (see stream.Discover).
func (in *Inspector) Queues(ctx context.Context) ([]QueueInfo, error) {
	found, err := stream.Discover(ctx, in.rdb, in.prefix)
	if err != nil {
		return nil, err
	}
	out := make([]QueueInfo, len(found))
	for i, f := range found {
		out[i] = QueueInfo{Name: f.Queue, Shards: f.Shards, Meta: f.Meta}
	}
	return out, nil
}

// Queue resolves the queue named name: its shard count, from its record.
// It returns an error wrapping [ErrNotFound] when the queue has no record
// (and is not an unsharded queue from before records), and [ErrInvalid]
// for a malformed name or a record without a valid count.
func (in *Inspector) Queue(ctx context.Context, name string) (QueueInfo, error) {
	l, err := stream.NewLayout(in.prefix, name, 1)
	if err != nil {
		return QueueInfo{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	info := QueueInfo{Name: name, Meta: l.Meta()}
	v, err := in.rdb.HGet(ctx, l.Meta(), "shards").Result()
	switch {
	case errors.Is(err, redis.Nil):
		main := l.Shard(0).Main()
		n, err := in.rdb.Exists(ctx, main.Delayed).Result()
		if err == nil && n == 0 {
			n, err = in.rdb.Exists(ctx, main.Stream).Result()
		}
		if err != nil {
			return QueueInfo{}, fmt.Errorf("queue %s: %w", name, err)
		}
		if n == 0 {
			return QueueInfo{}, fmt.Errorf("queue %s under prefix %s: %w", name, in.prefix, ErrNotFound)
		}
		info.Shards = 1
		return info, nil
	case err != nil:
		return QueueInfo{}, fmt.Errorf("queue %s: %w", name, err)
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > stream.MaxShards {
		return QueueInfo{}, fmt.Errorf("%w: queue %s: record %s holds shard count %q", ErrInvalid, name, l.Meta(), v)
	}
	info.Shards = n
	return info, nil
}

// handle is a resolved queue: its layout and producer.
type handle struct {
	info     QueueInfo
	layout   *stream.Layout
	producer *delay.Queue
}

// open resolves queue and builds its layout and producer.
func (in *Inspector) open(ctx context.Context, queue string) (*handle, error) {
	info, err := in.Queue(ctx, queue)
	if err != nil {
		return nil, err
	}
	l, err := stream.NewLayout(in.prefix, queue, info.Shards)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	p, err := delay.New(in.rdb, queue, delay.WithPrefix(in.prefix), delay.WithShards(info.Shards))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return &handle{info: info, layout: l, producer: p}, nil
}

// groupOpts are the options every group read of h takes.
func (in *Inspector) groupOpts(h *handle) []group.Option {
	return []group.Option{group.WithPrefix(in.prefix), group.WithShards(h.info.Shards)}
}
