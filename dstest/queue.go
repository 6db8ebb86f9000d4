package dstest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/codec"
	"github.com/delaystream/delaystream/internal/delay"
	"github.com/delaystream/delaystream/internal/stream"
)

// Queue is a [delaystream.Queue] on an embedded Redis server of its own,
// whose clock stands still until [Queue.Advance] moves it. Hand the
// embedded Queue to the code under test; read what it scheduled with
// [Queue.Scheduled] and run a handler over what is due with [Queue.Work].
// Its methods are safe for concurrent use; Work calls run one at a time.
type Queue struct {
	*delaystream.Queue

	mr     *miniredis.Miniredis
	rdb    *redis.Client
	opts   []delaystream.Option // as given to New, for the queues of Work
	layout *stream.Layout       // the queue's keys, as its options made them
	peek   *delay.Queue         // reads the waiting messages

	mu  sync.Mutex
	now time.Time // the server's clock

	working sync.Mutex // held by Work: one at a time
}

// New returns the queue name, built with opts as [delaystream.New] builds
// it, on a new embedded Redis server (miniredis) whose clock is set to the
// current time, to the millisecond, and stands still from then on. The
// server and the client are closed when t's test ends. New fails t
// (t.Fatalf) when opts or name are invalid or the server cannot start.
//
// The queue's options apply to [Queue.Work] too, but for promotion, which
// Work does itself.
func New(t testing.TB, name string, opts ...delaystream.Option) *Queue {
	t.Helper()
	mr := miniredis.NewMiniRedis()
	now := time.Now().Truncate(time.Millisecond)
	mr.SetTime(now)
	mr.ClockTTL(true) // keys' TTLs run by the server clock, so by Advance
	if err := mr.Start(); err != nil {
		t.Fatalf("dstest: start the embedded Redis: %v", err)
	}
	t.Cleanup(mr.Close)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	q, err := newQueue(mr, rdb, name, opts, now)
	if err != nil {
		t.Fatalf("dstest: %v", err)
	}
	return q
}

func newQueue(mr *miniredis.Miniredis, rdb *redis.Client, name string, opts []delaystream.Option, now time.Time) (*Queue, error) {
	dq, err := delaystream.New(rdb, name, opts...)
	if err != nil {
		return nil, err
	}
	// The queue's first call records it in Redis, under its prefix and with
	// its shard count, which the options set and the Queue keeps to
	// itself: the record tells them.
	ctx := context.Background()
	if _, err := dq.Len(ctx); err != nil {
		return nil, fmt.Errorf("queue %s: %w", name, err)
	}
	layout, err := recordedLayout(ctx, rdb, name)
	if err != nil {
		return nil, fmt.Errorf("queue %s: %w", name, err)
	}
	peek, err := delay.New(rdb, name, delay.WithPrefix(layout.Prefix()), delay.WithShards(layout.Shards()))
	if err != nil {
		return nil, fmt.Errorf("queue %s: %w", name, err)
	}
	return &Queue{Queue: dq, mr: mr, rdb: rdb, opts: opts, layout: layout, peek: peek, now: now}, nil
}

// recordedLayout returns the layout of queue name from its record, the
// only one on the server: "<prefix>:<version>:{<name>}:q".
func recordedLayout(ctx context.Context, rdb *redis.Client, name string) (*stream.Layout, error) {
	suffix := ":" + stream.LayoutVersion + ":{" + name + "}:q"
	keys, err := rdb.Keys(ctx, "*"+stream.EscapeGlob(suffix)).Result()
	if err != nil {
		return nil, err
	}
	if len(keys) != 1 {
		return nil, fmt.Errorf("dstest: want one record of the queue, found %d", len(keys))
	}
	n, err := rdb.HGet(ctx, keys[0], "shards").Int()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", keys[0], err)
	}
	return stream.NewLayout(strings.TrimSuffix(keys[0], suffix), name, n)
}

// Client returns the client of the embedded server, for code under test
// that needs one (package admin, its own keys). The Queue closes it when
// the test ends.
func (q *Queue) Client() *redis.Client { return q.rdb }

// Now returns the server's clock: what the queue's scripts read as the
// time, by which messages are due.
func (q *Queue) Now() time.Time {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.now
}

// Advance moves the server's clock by d and returns the new time. Messages
// whose due time it reaches are due: [Queue.Work] delivers them, and the
// embedded Queue, if it runs, promotes them when it next looks (within a
// second). Keys' TTLs run down by d too. A negative d sets the clock back,
// as a server's clock may be. Deadlines ([delaystream.Message].Deadline,
// [delaystream.WithExpireAfter]) are judged by the host's clock, which
// Advance does not move.
func (q *Queue) Advance(d time.Duration) time.Time {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.now = q.now.Add(d)
	q.mr.SetTime(q.now)
	return q.now
}

// Scheduled returns the messages waiting in the queue, in due order: what
// was scheduled and is not yet due and delivered ([Queue.Work]) or
// cancelled. Each has its ID, Due, Payload, Headers, Attempt (1),
// Created and Deadline. A group's retries wait apart, in the group's
// retry lane: [Queue.Work] reports them ([Handled].RetryAt). Scheduled
// returns at most the first 10000; entries the queue could not deliver
// (written by something else) are left out.
func (q *Queue) Scheduled(ctx context.Context) ([]codec.Envelope, error) {
	ws, err := q.peek.Peek(ctx, delay.MaxPeek)
	if err != nil {
		return nil, err
	}
	out := make([]codec.Envelope, 0, len(ws))
	for _, w := range ws {
		if w.Problem == "" {
			out = append(out, w.Envelope)
		}
	}
	return out, nil
}
