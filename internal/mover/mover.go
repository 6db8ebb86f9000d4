package mover

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream/internal/engine"
)

// Mover promotes due messages of a queue into its stream. Create it with
// [New] and start it with [Mover.Run]. Its methods are safe for concurrent
// use.
type Mover struct {
	e *engine.Engine
}

// Counters are running totals since the Mover was created, counted from the
// promote script's replies: a call whose reply is lost (the connection dies
// after Redis ran it) has moved its batch but is not counted, so the totals
// can fall short of what the streams received, never exceed it.
type Counters struct {
	Promoted    uint64 // entries appended to streams
	Quarantined uint64 // entries set aside (see the package doc)
	Batches     uint64 // promote calls that moved or quarantined something
	Errors      uint64 // promote calls that failed
	// Stuck counts the failed promote calls (included in Errors) whose
	// error repeats until someone fixes the lane's keys or data: a key of
	// the wrong type, an error reply from the script. Network failures,
	// timeouts and a server that is loading or failing over are transient
	// and not counted here.
	Stuck uint64
}

// New returns a Mover for queue. It validates everything (errors wrap
// [ErrInvalidOption]), talks to no server and starts nothing: call Run. The
// client is borrowed and never closed.
func New(rdb redis.UniversalClient, queue string, opts ...Option) (*Mover, error) {
	eopts := make([]engine.Option, len(opts))
	for i, o := range opts {
		eopts[i] = engine.Option(o)
	}
	e, err := engine.New(rdb, queue, eopts...)
	if err != nil {
		return nil, err
	}
	return &Mover{e: e}, nil
}

// Counters returns the running totals.
func (m *Mover) Counters() Counters { return Counters(m.e.Counters()) }

// Prefix returns the key prefix the Mover was built with.
func (m *Mover) Prefix() string { return m.e.Prefix() }

// Shards returns the shard count the Mover was built with (see [WithShards]).
func (m *Mover) Shards() int { return m.e.Shards() }

// Owned returns the shards this mover currently promotes, sorted; nil when
// it promotes none (before Run, after it, and while a mover of a sharded
// queue has no share). The movers of a sharded queue divide its shards
// between them (see [WithShards]); the mover of an unsharded queue owns
// shard 0 while it runs, and the lease decides which of several promotes
// it. [Hooks].OnOwnership reports every change.
func (m *Mover) Owned() []int { return m.e.Owned() }

// Run promotes due entries until ctx is cancelled, then releases its leases
// (or leaves the registry of a sharded queue's movers) and returns nil. It
// returns [ErrRunning] if the Mover is already running.
//
// It first checks that the queue's shard count recorded in Redis is the
// one the Mover was built with (recording it when the queue is new): on a
// mismatch it returns an error wrapping stream.ErrShardCount at once,
// having written nothing; a failure to check is logged and retried with
// backoff until ctx ends.
//
// Each lane is promoted in batches while batches are full; otherwise the
// mover sleeps until the next due time (a Go timer), and is woken early
// through the lane's pub/sub channel when a producer schedules an earlier
// entry. With nothing due within the max idle, a lane is idle: the mover
// makes no promote calls for it and probes the heads of its idle lanes in
// turn, one probe per max idle in all. When several movers run, the one
// holding a lane's lease promotes it and the others check once per lease
// period; the movers of a sharded queue instead divide its shards (see the
// package doc).
//
// Failed calls are logged at a bounded rate and retried with backoff (see
// the package doc); Run does not return on them. Shutdown takes at most one
// in-flight promote call (bounded by a 5 s timeout) plus a lease release or
// registry leave of at most 1 s.
func (m *Mover) Run(ctx context.Context) error { return m.e.Run(ctx) }

// Join makes t, a consumer in this process on the Mover's client, take
// part in its promote calls (engine.Engine.Join): they send its
// acknowledgements and read its group's new entries for it.
func (m *Mover) Join(t engine.Taker) { m.e.Join(t) }

// Leave withdraws t (Join).
func (m *Mover) Leave(t engine.Taker) { m.e.Leave(t) }
