package delaystream

import (
	"context"
	"time"

	"github.com/delaystream/delaystream/internal/group"
	"github.com/delaystream/delaystream/internal/optcheck"
)

// GroupOption configures one consumer group, given to [Queue.Handle].
type GroupOption func(*groupConfig) error

type groupConfig struct {
	opts       []group.Option
	middleware []Middleware
	timeout    time.Duration
	hooks      *Hooks
	keyLimit   *keyLimit // WithKeyRateLimit (flow.go)
}

func groupOption(o group.Option) GroupOption {
	return func(c *groupConfig) error {
		c.opts = append(c.opts, o)
		return nil
	}
}

// WithWorkers sets how many handlers of the group run at once in this
// process (1 to 4096). Default 8.
func WithWorkers(n int) GroupOption { return groupOption(group.WithWorkers(n)) }

// WithPrefetch sets how many entries a consumer reads ahead of its free
// workers (0 to 100000). Default: adaptive, about what the workers handle
// in 100 ms, from 4 × workers to 256; none until the handlers' pace is
// measured, and none while handlers take 100 ms or more, so that slow work
// spreads over the group's consumers instead of waiting behind a busy one.
// Entries read ahead are held by this consumer until a worker takes them;
// 0 reads only for free workers. A group with flow limits reads none
// ahead.
func WithPrefetch(n int) GroupOption { return groupOption(group.WithPrefetch(n)) }

// WithMaxAttempts sets how many times a message is handled before a
// failure dead-letters it with [ReasonAttempts] (1 to 1000; 1 = never
// retry). Default 10.
func WithMaxAttempts(n int) GroupOption { return groupOption(group.WithMaxAttempts(n)) }

// WithMaxDeliveries sets how often one stream entry may be delivered (the
// first read plus reclaims after crashes) before it is dead-lettered as
// poison with [ReasonDeliveries] (1 to 1000). Default 5. It catches
// messages that crash their consumer. Entries handed back unstarted (a
// clean stop, a pause) keep their count: restarts do not bring a message
// nearer the limit.
func WithMaxDeliveries(n int) GroupOption { return groupOption(group.WithMaxDeliveries(n)) }

// WithBackoff sets the delay before each retry, by the Redis clock.
// Default ExponentialBackoff(1s, 10m).
func WithBackoff(b Backoff) GroupOption {
	return func(c *groupConfig) error {
		if b == nil {
			return optcheck.NotNil(ErrInvalidOption, "backoff", true)
		}
		c.opts = append(c.opts, group.WithBackoff(group.Backoff(b)))
		return nil
	}
}

// WithVisibilityTimeout sets how long an entry may sit unacknowledged with
// a consumer before another consumer of the group may take it over (100 ms
// to 1 h). Default 2 s. Running handlers extend their hold every third of
// it, so only the entries of crashed or stuck consumers are taken over.
func WithVisibilityTimeout(d time.Duration) GroupOption {
	return groupOption(group.WithVisibilityTimeout(d))
}

// WithHandlerTimeout bounds each attempt: the handler's ctx ends after d
// (1 ms to 24 h), and an attempt whose handler returns after that counts
// as failed, with an error saying it timed out, unless the handler asked
// for something else ([Drop], [DeadLetter], [RetryAfter], [Snooze]), which
// is still done. Default: no bound.
func WithHandlerTimeout(d time.Duration) GroupOption {
	return func(c *groupConfig) error {
		c.timeout = d
		return optcheck.Range(ErrInvalidOption, "handler timeout", d, time.Millisecond, 24*time.Hour)
	}
}

// WithMiddleware wraps the group's handler in mw, the first given
// outermost. Repeated, it appends. Middleware sees every delivery, also
// those of a typed handler whose payload does not decode.
func WithMiddleware(mw ...Middleware) GroupOption {
	return func(c *groupConfig) error {
		for _, m := range mw {
			if m == nil {
				return optcheck.NotNil(ErrInvalidOption, "middleware", true)
			}
		}
		c.middleware = append(c.middleware, mw...)
		return nil
	}
}

// WithDeadLetterCap caps the group's dead letters at n entries (1 to
// 10^9): when a new one would exceed it, the oldest are trimmed, counted
// in Counters.DeadLettersDropped and logged. Default: no cap.
func WithDeadLetterCap(n int64) GroupOption { return groupOption(group.WithDeadLetterCap(n)) }

// WithHandledRecords keeps a record of each message the group handled
// (its handler succeeded, or dropped it) for d (1 s to 90 days): when, by
// the Redis clock, the attempt, the outcome and the consumer. [Queue.Locate],
// `delaystream locate` and the web view then answer "handled by billing at
// 09:14:03, attempt 2" after the stream entry is gone. The record is
// written with the acknowledgement, in the same script call; records older
// than d are removed as new ones are written. A Redis at maxmemory with
// noeviction refuses records (they add memory) and the acknowledgements go
// on without them. Default: none kept. Memory and Redis CPU per record:
// docs/performance.md.
func WithHandledRecords(d time.Duration) GroupOption {
	return groupOption(group.WithHandledRecords(d))
}

// WithRetention keeps handled entries in the stream for at least d (1 ms
// to 30 days), e.g. so that a new group can replay recent history.
// Default 0: an entry is trimmed once every group has handled it.
func WithRetention(d time.Duration) GroupOption { return groupOption(group.WithRetention(d)) }

// WithConsumerName sets this process's consumer name within the group.
// Default: hostname-pid-random. Two running consumers must never share a
// name.
func WithConsumerName(name string) GroupOption { return groupOption(group.WithConsumerName(name)) }

// WithHooks sets callbacks for the group's delivery events, for metrics
// and tracing (see [Hooks]).
func WithHooks(h Hooks) GroupOption {
	return func(c *groupConfig) error {
		c.hooks = &h
		return nil
	}
}

// WithStartAtNew creates the group, when it does not exist yet, at the end
// of the stream: it sees only messages due from then on. Default: a new
// group starts at the beginning of the retained stream.
func WithStartAtNew() GroupOption { return groupOption(group.WithStartAtNew()) }

// WithReclaimInterval sets how often a consumer looks for entries of
// crashed consumers to take over (10 ms to 10 min). Default 1 s.
func WithReclaimInterval(d time.Duration) GroupOption {
	return groupOption(group.WithReclaimInterval(d))
}

// WithStaleConsumerAfter sets how long a consumer with nothing pending may
// stay idle before it is removed from the group (1 min to 30 days).
// Default 1 h.
func WithStaleConsumerAfter(d time.Duration) GroupOption {
	return groupOption(group.WithStaleConsumerAfter(d))
}

// WithTrimInterval sets how often a consumer trims the streams below what
// every group still needs (100 ms to 1 h). Default 5 s.
func WithTrimInterval(d time.Duration) GroupOption { return groupOption(group.WithTrimInterval(d)) }

// WithoutReclaim makes this process's consumer never take over other
// consumers' entries. Some consumer of the group must reclaim, or a crash
// leaves entries pending for ever.
func WithoutReclaim() GroupOption { return groupOption(group.WithoutReclaim()) }

// WithoutTrim makes this process's consumer never trim. If no consumer
// trims, the stream grows without bound.
func WithoutTrim() GroupOption { return groupOption(group.WithoutTrim()) }

// Backoff returns the delay before attempt (2 for the first retry).
type Backoff func(attempt int) time.Duration

// ExponentialBackoff returns a Backoff of base·2^(attempt-2) with ±20 %
// jitter, never more than limit: with base 1 s the first retry comes after
// about 1 s, the second after about 2 s. A base or limit <= 0 means no
// delay.
func ExponentialBackoff(base, limit time.Duration) Backoff {
	return Backoff(group.ExponentialBackoff(base, limit))
}

// ConstantBackoff returns a Backoff of d before every retry.
func ConstantBackoff(d time.Duration) Backoff { return Backoff(group.ConstantBackoff(d)) }

// Group is a consumer group added to a queue with [Queue.Handle]. Its
// methods are safe for concurrent use, also while the queue runs.
type Group struct {
	name    string
	c       *group.Consumer
	handler Handler       // as given to Handle (HandleTyped: its decoding wrapper)
	opts    []GroupOption // as given to Handle, for package dstest
}

// Name returns the group's name.
func (g *Group) Name() string { return g.name }

// Counters returns what this process's consumer of the group has done
// since it was built.
func (g *Group) Counters() Counters { return Counters(g.c.Counters()) }

// Stats returns the group's figures from Redis, over every process and
// shard.
func (g *Group) Stats(ctx context.Context) (GroupStats, error) {
	s, err := g.c.Stats(ctx)
	gs := groupStats(s)
	if err != nil {
		return gs, err
	}
	gs.PausedSince, err = g.c.PausedSince(ctx)
	return gs, err
}

// DeadLetters returns up to count of the group's dead letters, oldest
// first, after entry id after ("" for the beginning).
func (g *Group) DeadLetters(ctx context.Context, after string, count int64) ([]DeadLetterEntry, error) {
	es, err := g.c.DeadLetters().List(ctx, after, count)
	out := make([]DeadLetterEntry, len(es))
	for i, e := range es {
		out[i] = DeadLetterEntry(e.Letter())
	}
	return out, err
}

// Redrive schedules the dead letters entryIDs again, due after delay, with
// their attempts reset, and removes them from the dead letters; no ids
// redrives them all. It returns how many were redriven. Ids not found, and
// dead letters with no message to redrive, are named in the error.
func (g *Group) Redrive(ctx context.Context, delay time.Duration, entryIDs ...string) (int, error) {
	if len(entryIDs) == 0 {
		return g.c.DeadLetters().RedriveAll(ctx, delay)
	}
	return g.c.DeadLetters().Redrive(ctx, delay, entryIDs...)
}

// HandleTyped is [Queue.Handle] for payloads of type T, decoded with the
// queue's codec (see [WithCodec]). A payload that does not decode is
// dead-lettered with [ReasonUndecodable], without calling h.
func HandleTyped[T any](q *Queue, name string, h func(ctx context.Context, d *Delivery, v T) error, opts ...GroupOption) (*Group, error) {
	return q.handle(name, typed(q.cfg.codec, h), opts)
}
