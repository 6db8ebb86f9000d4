package dstest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/internal/bridge"
	"github.com/delaystream/delaystream/internal/mover"
)

// Handled is what [Queue.Work] did with one delivery.
type Handled struct {
	ID      string                     // the message id; "" for an entry that could not be read
	Attempt int                        // the delivery's attempt: 1, then +1 per counted retry
	Outcome delaystream.HandlerOutcome // HandlerAcked, HandlerRetried, HandlerDeadLettered, ...
	// Err is the error the handler (with the group's middleware and
	// timeout) returned; nil when it returned nil or did not run.
	Err error
	// RetryAt is when the next attempt is due, by the server's clock,
	// when Outcome is Retried (a [delaystream.Snooze] too); zero otherwise.
	RetryAt time.Time
	// Reason is the dead letter's reason (delaystream.ReasonAttempts, ...)
	// when Outcome is DeadLettered; "" otherwise. A message dead-lettered
	// before the handler could run (expired, or its entry unreadable) has a
	// Reason and no Err.
	Reason string
}

// workConsumer is the consumer name of Work's consumer in every group.
const workConsumer = "dstest"

// maxRuns bounds how often one Work runs the handler on one message: more
// than the most attempts a group allows means the message keeps coming
// back without delay (a [delaystream.Snooze] of 0, say) and would never
// stop being due.
const maxRuns = 1000

// pollEvery is how often Work looks whether anything due is left.
const pollEvery = 2 * time.Millisecond

// Work runs consumer group group of the queue, as the application added
// it with [delaystream.Queue.Handle] or [delaystream.HandleTyped] on the
// embedded Queue (its handler and options, not repeated here), over every
// message due by the server's clock, until none is left, and returns what
// happened to each delivery, in the order they were settled. Messages due
// meanwhile are handled in the same call: a retry due at once (no
// backoff) is delivered again, until the group's attempts are used up; a
// message the handler schedules due now is delivered too. Nothing runs
// once Work has returned, so a test asserts on the result,
// [Queue.Scheduled] and the group's dead letters without waiting. A retry
// after a backoff or a snooze is delivered by a Work after [Queue.Advance]
// reaches it, or by [Queue.Settle].
//
// The group runs with its own options (attempts, backoff, middleware,
// timeout, flow limits), handled by the same code as in production, and
// message deadlines are judged by the server's clock. Work runs one
// handler at a time, whatever WithWorkers says, so that the outcomes come
// in a fixed order. It records outcomes through the group's Hooks, so the
// group's own Hooks are not called; and it never trims the streams, so a
// group first run later still gets every message promoted before.
//
// Work returns an error wrapping delaystream.ErrInvalidOption for a group
// the queue was not given, an error when one message has been handled
// 1000 times in the call (it comes back without delay for ever), and
// ctx's error when ctx ends first; with each, what was handled until
// then.
func (q *Queue) Work(ctx context.Context, group string) ([]Handled, error) {
	h, opts, err := q.group(group)
	if err != nil {
		return nil, err
	}
	return q.run(ctx, group, h, opts)
}

// Settle runs group as [Queue.Work] does, then moves the server's clock
// to the group's next retry (after a backoff or a snooze) and runs it
// again, until no retry of the group waits: every message that was due is
// then acknowledged, dropped or dead-lettered. It returns each message's
// deliveries, by message id, in order. Messages waiting in the queue to
// be due (and those the handler schedules for later) keep waiting: Settle
// moves the clock only to the group's retries. It fails after 1000 rounds
// (a message snoozed for ever), with what was handled until then.
func (q *Queue) Settle(ctx context.Context, group string) (map[string][]Handled, error) {
	out := map[string][]Handled{}
	for range maxRuns {
		done, err := q.Work(ctx, group)
		for _, h := range done {
			out[h.ID] = append(out[h.ID], h)
		}
		if err != nil {
			return out, err
		}
		next, ok, err := q.nextRetry(ctx, group)
		if err != nil {
			return out, fmt.Errorf("dstest: settle %s: %w", group, err)
		}
		if !ok {
			return out, nil
		}
		if d := next.Sub(q.Now()); d > 0 {
			q.Advance(d)
		}
	}
	return out, fmt.Errorf("dstest: settle %s: retries still waiting after %d rounds", group, maxRuns)
}

// group returns the handler and options the embedded Queue was given for
// group name.
func (q *Queue) group(name string) (delaystream.Handler, []delaystream.GroupOption, error) {
	h, opts, ok := bridge.GroupOf(q.Queue, name)
	if !ok {
		return nil, nil, fmt.Errorf("%w: dstest: the queue has no group %q: add it with Handle or HandleTyped first",
			delaystream.ErrInvalidOption, name)
	}
	return h.(delaystream.Handler), opts.([]delaystream.GroupOption), nil
}

// nextRetry returns when the group's earliest waiting retry is due, over
// every shard, and whether one waits.
func (q *Queue) nextRetry(ctx context.Context, group string) (time.Time, bool, error) {
	pipe := q.rdb.Pipeline()
	cmds := make([]*redis.ZSliceCmd, q.layout.Shards())
	for i := range cmds {
		cmds[i] = pipe.ZRangeWithScores(ctx, q.layout.Shard(i).Retry(group).Delayed, 0, 0)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return time.Time{}, false, err
	}
	var next time.Time
	for _, c := range cmds {
		for _, z := range c.Val() {
			if t := time.UnixMilli(int64(z.Score)); next.IsZero() || t.Before(next) {
				next = t
			}
		}
	}
	return next, !next.IsZero(), nil
}

// run is Work: a queue of its own, with the group added with h and opts
// and without promotion, which a mover of its own does (without a lease,
// so that nothing a previous run held stands in its way), runs until the
// group is settled.
func (q *Queue) run(ctx context.Context, group string, h delaystream.Handler, opts []delaystream.GroupOption) ([]Handled, error) {
	q.working.Lock()
	defer q.working.Unlock()
	wq, err := delaystream.New(q.rdb, q.Name(), append(slices.Clip(q.opts), delaystream.WithoutPromotion())...)
	if err != nil {
		return nil, err
	}
	rec := newRecorder(q.Now())
	gopts := append([]delaystream.GroupOption{delaystream.WithConsumerName(workConsumer), delaystream.WithoutTrim(),
		delaystream.WithMiddleware(rec.middleware)}, opts...)
	gopts = append(gopts, delaystream.WithWorkers(1), delaystream.WithHooks(rec.hooks()), bridge.Clock(q.Now).(delaystream.GroupOption))
	if _, err := wq.Handle(group, h, gopts...); err != nil {
		return nil, fmt.Errorf("dstest: work %s: %w", group, err)
	}
	mv, err := mover.New(q.rdb, q.Name(), mover.WithPrefix(q.layout.Prefix()), mover.WithShards(q.layout.Shards()),
		mover.WithoutLease(), mover.WithMaxIdle(100*time.Millisecond))
	if err != nil {
		return nil, err
	}

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	g, gctx := errgroup.WithContext(runCtx)
	g.Go(func() error { return wq.Run(gctx) })
	err = q.await(gctx, group, rec, func() { g.Go(func() error { return mv.Run(gctx) }) })
	stop()
	if werr := g.Wait(); err == nil {
		err = werr
	}
	if err == nil {
		err = ctx.Err()
	}
	return rec.results(), err
}

// await returns once the group is settled: it exists on every stream, and
// nothing is due, unread by it or pending with it. It calls promote once
// the group exists, so that no promoted message precedes the group. It
// returns nil when gctx ends (Work's ctx, or a failure of the queue's
// run) and an error when a message keeps coming back.
func (q *Queue) await(gctx context.Context, group string, rec *recorder, promote func()) error {
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	promoting := false
	for {
		select {
		case <-gctx.Done():
			return nil
		case <-rec.runaway:
			return fmt.Errorf("dstest: work %s: message %q handled %d times: it comes back without delay", group, rec.runawayID(), maxRuns)
		case <-tick.C:
		}
		created, settled, err := q.settled(gctx, group)
		switch {
		case err != nil && gctx.Err() == nil:
			return fmt.Errorf("dstest: work %s: %w", group, err)
		case created && !promoting:
			promote()
			promoting = true
		case promoting && settled:
			return nil
		}
	}
}

// settled reports whether group exists on every stream of the queue, and
// whether it is settled: no message of the queue or of the group's retry
// lane is due, and on every stream the group has read every entry and has
// none pending. The figures are one snapshot (MULTI): a message is always
// in one of those places until it is settled.
func (q *Queue) settled(ctx context.Context, group string) (created, settled bool, err error) {
	// The scripts' now: TIME, rounded down to the ms.
	now := strconv.FormatInt(q.Now().UnixMilli(), 10)
	type streamCmds struct {
		info   *redis.XInfoStreamCmd
		groups *redis.XInfoGroupsCmd
	}
	var due []*redis.IntCmd
	var streams []streamCmds
	pipe := q.rdb.TxPipeline()
	for i := range q.layout.Shards() {
		k := q.layout.Shard(i)
		main, retry := k.Main(), k.Retry(group)
		due = append(due, pipe.ZCount(ctx, main.Delayed, "-inf", now), pipe.ZCount(ctx, retry.Delayed, "-inf", now))
		for _, key := range []string{main.Stream, retry.Stream} {
			streams = append(streams, streamCmds{pipe.XInfoStream(ctx, key), pipe.XInfoGroups(ctx, key)})
		}
	}
	_, _ = pipe.Exec(ctx) // errors are read per command
	settled = true
	for _, c := range due {
		n, err := c.Result()
		if err != nil {
			return false, false, err
		}
		settled = settled && n == 0
	}
	for _, s := range streams {
		info, err := s.info.Result()
		if redis.HasErrorPrefix(err, "no such key") {
			return false, false, nil // the group is not created yet
		}
		if err != nil {
			return false, false, err
		}
		gs, err := s.groups.Result()
		if err != nil {
			return false, false, err
		}
		found := false
		for _, g := range gs {
			if g.Name == group {
				found = true
				settled = settled && g.Pending == 0 && sameID(g.LastDeliveredID, info.LastGeneratedID)
			}
		}
		if !found {
			return false, false, nil
		}
	}
	return true, settled, nil
}

// sameID reports whether stream entry ids a and b are the same, the id of
// no entry spelled "0-0", "0" or "" (miniredis's empty stream).
func sameID(a, b string) bool {
	zero := func(s string) string {
		if s == "" || s == "0" {
			return "0-0"
		}
		return s
	}
	return zero(a) == zero(b)
}
