package admin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/internal/delay"
	"github.com/delaystream/delaystream/internal/errs"
	"github.com/delaystream/delaystream/internal/group"
	"github.com/delaystream/delaystream/internal/stream"
)

// Limits and defaults.
const (
	// MaxPeek bounds ListOptions.Limit of [Operator.Peek].
	MaxPeek = 10000
	// MaxReportedIDs bounds ActionResult.IDs.
	MaxReportedIDs = 1000
)

// Operator reads and acts on the queues under one key prefix, naming
// them as it goes. Build it with [New]; it is safe for concurrent use,
// starts no goroutines and never closes its client.
type Operator struct {
	rdb        redis.UniversalClient
	prefix     string
	liveWithin time.Duration // LiveWithin; shorter in tests

	mu       sync.Mutex
	locators map[locatorKey]*delaystream.Queue // Locate's, by queue and shard count
}

// New returns an Operator of the queues under prefix ("" means
// [delaystream.DefaultPrefix]) on rdb (a single server, Sentinel or Cluster client),
// which it borrows and never closes. It talks to no server. It returns an
// error wrapping delaystream.ErrInvalidOption for a nil client or a
// prefix that cannot name Redis keys.
func New(rdb redis.UniversalClient, prefix string) (*Operator, error) {
	if rdb == nil {
		return nil, fmt.Errorf("%w: nil redis client", delaystream.ErrInvalidOption)
	}
	if prefix == "" {
		prefix = delaystream.DefaultPrefix
	}
	if err := stream.ValidateName("prefix", prefix); err != nil {
		return nil, invalid(err)
	}
	return &Operator{rdb: rdb, prefix: prefix, liveWithin: LiveWithin, locators: map[locatorKey]*delaystream.Queue{}}, nil
}

// QueueInfo is a queue found under the prefix.
type QueueInfo struct {
	Name   string `json:"name"`   // the queue's name
	Shards int    `json:"shards"` // its shard count (1: unsharded); 0 when its record holds no valid count
	Meta   string `json:"meta"`   // the key of its record
}

// Queues returns the queues under the prefix, sorted by name. Without
// names it discovers them, on a single server or on every master of a
// Cluster (SCAN for the queues' records); with names it resolves those
// only (one HGET each), in the order given. A named queue without a
// record fails the call with an error wrapping delaystream.ErrNotFound,
// except an unsharded queue used before records existed, recognised by its
// delayed set or stream; a malformed name or a record without a valid
// shard count wraps delaystream.ErrInvalidOption.
func (in *Operator) Queues(ctx context.Context, names ...string) ([]QueueInfo, error) {
	if len(names) > 0 {
		out := make([]QueueInfo, len(names))
		for i, n := range names {
			info, err := in.queue(ctx, n)
			if err != nil {
				return nil, err
			}
			out[i] = info
		}
		return out, nil
	}
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

// queue resolves the queue named name: its shard count, from its record.
func (in *Operator) queue(ctx context.Context, name string) (QueueInfo, error) {
	l, err := stream.NewLayout(in.prefix, name, 1)
	if err != nil {
		return QueueInfo{}, invalid(err)
	}
	info := QueueInfo{Name: name, Meta: l.Meta()}
	v, err := in.rdb.HGet(ctx, l.Meta(), "shards").Result()
	switch {
	case errors.Is(err, redis.Nil):
		return in.recordless(ctx, info, l)
	case err != nil:
		return QueueInfo{}, fmt.Errorf("queue %s: %w", name, err)
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > stream.MaxShards {
		return QueueInfo{}, fmt.Errorf("%w: queue %s: record %s holds shard count %q",
			delaystream.ErrInvalidOption, name, l.Meta(), v)
	}
	info.Shards = n
	return info, nil
}

// recordless resolves a queue without a record: an unsharded queue used
// before records existed has a delayed set or a stream.
func (in *Operator) recordless(ctx context.Context, info QueueInfo, l *stream.Layout) (QueueInfo, error) {
	main := l.Shard(0).Main()
	n, err := in.rdb.Exists(ctx, main.Delayed).Result()
	if err == nil && n == 0 {
		n, err = in.rdb.Exists(ctx, main.Stream).Result()
	}
	if err != nil {
		return QueueInfo{}, fmt.Errorf("queue %s: %w", info.Name, err)
	}
	if n == 0 {
		return QueueInfo{}, fmt.Errorf("queue %s under prefix %s: %w", info.Name, in.prefix, delaystream.ErrNotFound)
	}
	info.Shards = 1
	return info, nil
}

// handle is a resolved queue: its layout and producer.
type handle struct {
	info     QueueInfo
	layout   *stream.Layout
	producer *delay.Queue
}

// open resolves queue and builds its layout and producer.
func (in *Operator) open(ctx context.Context, queue string) (*handle, error) {
	info, err := in.queue(ctx, queue)
	if err != nil {
		return nil, err
	}
	l, err := stream.NewLayout(in.prefix, queue, info.Shards)
	if err != nil {
		return nil, invalid(err)
	}
	p, err := delay.New(in.rdb, queue, delay.WithPrefix(in.prefix), delay.WithShards(info.Shards), delay.WithRecordReadOnly())
	if err != nil {
		return nil, invalid(err)
	}
	return &handle{info: info, layout: l, producer: p}, nil
}

// groupOpts are the options every group read of h takes.
func (in *Operator) groupOpts(h *handle) []group.Option {
	return []group.Option{group.WithPrefix(in.prefix), group.WithShards(h.info.Shards)}
}

// groupNames returns the union of the groups of every shard's stream,
// sorted.
func (in *Operator) groupNames(ctx context.Context, h *handle) ([]string, error) {
	infos, err := in.groupInfos(ctx, h)
	if err != nil {
		return nil, err
	}
	return namesOf(infos), nil
}

// groupInfos reads the consumer groups of every shard's queue stream, by
// shard (XINFO GROUPS: not XINFO STREAM, whose reply carries the stream's
// first and last entries, whatever their size).
func (in *Operator) groupInfos(ctx context.Context, h *handle) ([][]stream.GroupInfo, error) {
	infos := make([][]stream.GroupInfo, h.layout.Shards())
	for i := range infos {
		gs, err := stream.ReadGroups(ctx, in.rdb, h.layout.Shard(i).Main().Stream)
		if err != nil {
			return nil, fmt.Errorf("groups of %s: %w", h.info.Name, err)
		}
		infos[i] = gs
	}
	return infos, nil
}

// namesOf returns the union of the groups of infos, sorted.
func namesOf(infos [][]stream.GroupInfo) []string {
	var names []string
	for _, gs := range infos {
		for _, g := range gs {
			names = append(names, g.Name)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// invalid makes err, a complaint about an argument, match
// delaystream.ErrInvalidOption, with one "delaystream: " prefix.
func invalid(err error) error { return errs.Invalid(err) }

func isNil(err error) bool { return errors.Is(err, redis.Nil) }
