package stream

import (
	"fmt"

	"github.com/delaystream/delaystream/internal/errs"

	"github.com/delaystream/delaystream/internal/wire"
)

// Layout names every key of a queue: its shards' keys (see [Keys]) and the
// queue-wide keys that live under the queue's own hash tag, "{<queue>}",
// which is also the tag of an unsharded queue's only shard. Build it with
// [NewLayout]; it is immutable and safe for concurrent use.
type Layout struct {
	prefix, queue string
	shards        []Keys
	home          Keys // keys under "{<queue>}"
}

// NewLayout returns the layout of queue split into n shards (1 to
// [MaxShards]; 1 is the unsharded layout). It validates prefix and queue
// with [ValidateName].
func NewLayout(prefix, queue string, n int) (*Layout, error) {
	if n < 1 || n > MaxShards {
		return nil, fmt.Errorf("%w: %d shards (1 to %d)", ErrInvalidName, n, MaxShards)
	}
	home, err := NewKeys(prefix, queue, 0, 1)
	if err != nil {
		return nil, err
	}
	l := &Layout{prefix: prefix, queue: queue, shards: make([]Keys, n), home: home}
	if n == 1 {
		l.shards[0] = home
		return l, nil
	}
	for i := range n {
		l.shards[i] = newKeys(prefix, shardTag(queue, i, n), true)
	}
	return l, nil
}

// Prefix returns the key prefix.
func (l *Layout) Prefix() string { return l.prefix }

// Queue returns the queue's name.
func (l *Layout) Queue() string { return l.queue }

// Shards returns the number of shards.
func (l *Layout) Shards() int { return len(l.shards) }

// Shard returns the keys of shard i (0 <= i < Shards()).
func (l *Layout) Shard(i int) Keys { return l.shards[i] }

// ShardOf returns the shard that holds message id: a stable hash of the id
// (for generated ids, of their random part), the same in every process and
// release.
func (l *Layout) ShardOf(id string) int { return wire.ShardOf(id, len(l.shards)) }

// Meta returns the key of the queue's record: a HASH whose field "shards"
// holds the shard count every part of the queue checks before it writes.
func (l *Layout) Meta() string { return l.home.base + ":q" }

// Movers returns the key of the registry of live movers of a sharded
// queue: a ZSET of mover tokens scored by the Unix ms at which each
// mover's registration lapses unless renewed.
func (l *Layout) Movers() string { return l.home.base + ":o" }

// MoversChannel returns the pub/sub channel on which movers of a sharded
// queue announce that they joined or left, so that the others rebalance at
// once.
func (l *Layout) MoversChannel() string { return l.home.base + ":o:w" }

// ErrDataLost is wrapped by the error that movers and consumers report
// (through their logger and their OnDataLoss hook) when they find that
// Redis lost a queue's data while they ran: the queue's record
// ([Layout.Meta]) is gone or was recreated (Redis restarted without
// persistence, FLUSHALL, a failover to a replica that had none of it).
var ErrDataLost = errs.ErrDataLost

// ErrShardCount is wrapped by the error a part of a queue returns at its
// first call when the shard count it was built with differs from the one
// recorded for the queue in Redis. Nothing is written.
var ErrShardCount = errs.ErrShardCount
