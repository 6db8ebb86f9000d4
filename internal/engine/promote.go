package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream/internal/errs"
	"github.com/delaystream/delaystream/internal/heal"
	"github.com/delaystream/delaystream/internal/logpace"
	"github.com/delaystream/delaystream/internal/memory"
	"github.com/delaystream/delaystream/internal/scripts"
	"github.com/delaystream/delaystream/internal/stream"
	"github.com/delaystream/delaystream/internal/wire"
)

// slowCall is how long a promote call runs before, on a Cluster, it is cut
// once its slot moves to another master (heal.CutIfMoved): a call takes
// milliseconds unless its master is dead or the server is very busy.
const slowCall = 200 * time.Millisecond

// result is the reply of one promote call.
type result struct {
	moved, quarantined int
	next               int64     // due ms of the earliest remaining entry, -1 if none
	nowUs              int64     // Redis TIME in µs
	leaseTTL           int64     // -1: we hold the lease (or need none); -2: nobody does, nothing was due; else ms left on another mover's lease
	local              time.Time // local clock when the reply arrived
}

// redisAhead is how far the Redis clock was ahead of the local clock when
// the reply arrived (negative when behind), round trip included.
func (r result) redisAhead() time.Duration {
	return time.UnixMicro(r.nowUs).Sub(r.local)
}

// runOnce runs the promote script once.
func (l *lane) runOnce(ctx context.Context) (result, error) {
	parent := ctx
	node := heal.MasterOf(ctx, l.m.rdb, l.keys.Delayed)
	if !l.failing.Load() {
		release, err := l.m.acquireCall(ctx, node)
		if err != nil {
			return result{}, err
		}
		defer release()
	}
	ctx, cancel := context.WithTimeout(ctx, l.m.cfg.callLimit)
	defer cancel()
	defer heal.CutIfMoved(ctx, cancel, l.m.rdb, l.keys.Delayed, node, slowCall)()
	start := time.Now()
	renew := time.Duration(start.UnixNano()-l.renewed.Load()) >= l.m.cfg.leaseTTL/3
	var take *Take
	t := takerOf(&l.m.taker)
	if t != nil {
		// A read only where the call likely appends: not on a wake-up
		// for a time not come yet.
		if take = t.Offer(l.keys.Stream, l.expects()); take != nil {
			defer t.Took(take)
		}
	}
	v, err := l.promote(ctx, renew, take)
	if err != nil {
		return result{}, l.callFailed(ctx, parent, err)
	}
	r := result{moved: int(v[0]), quarantined: int(v[1]), next: v[2], nowUs: v[3], leaseTTL: v[4], local: time.Now()}
	l.record(r, start, renew)
	l.lastNext.Store(r.next)
	if r.moved+r.quarantined >= l.m.cfg.batch {
		l.lastNext.Store(0) // a full batch: more is due now
	}
	l.lastAhead.Store(int64(r.redisAhead()))
	return r, nil
}

// promote runs the promote script and returns its reply's five integers.
// With take, the script's call goes in one pipeline with take's
// acknowledgements before it and its read after it, and take is filled in.
func (l *lane) promote(ctx context.Context, renew bool, take *Take) ([]int64, error) {
	var reply any
	var err error
	if take != nil && (take.Count > 0 || len(take.Acks) > 0) {
		reply, err = l.promoteTaking(ctx, renew, take)
	} else {
		reply, err = scripts.Promote.Run(ctx, l.m.rdb, l.scriptKeys(time.Now()), l.promoteArgs(renew)...).Result()
	}
	if err != nil {
		return nil, err
	}
	v, err := scripts.Ints(reply)
	if err != nil {
		return nil, err
	}
	if len(v) != 5 {
		return nil, errors.New("delaystream: unexpected promote reply")
	}
	return v, nil
}

// promoteTaking sends take's acknowledgements, the promote script (by its
// hash) and take's read in one pipeline, and returns the script's reply.
// A server that does not have the script yet (NOSCRIPT) gets it in a call
// of its own, without take's announcement: the read went out all the same.
func (l *lane) promoteTaking(ctx context.Context, renew bool, take *Take) (any, error) {
	pipe := l.m.rdb.Pipeline()
	var ack *redis.Cmd
	var ackKeys []string
	var ackArgs []any
	if len(take.Acks) > 0 {
		ackKeys, ackArgs = take.ackCall()
		ack = scripts.Ack.EvalSha(ctx, pipe, ackKeys, ackArgs...)
	}
	args := l.promoteArgs(renew)
	if take.Count > 0 {
		args = append(args, take.Group, take.Consumer) // its announcement names the consumer that reads
	}
	keys := l.scriptKeys(time.Now())
	ev := scripts.Promote.EvalSha(ctx, pipe, keys, args...)
	var read *redis.XStreamSliceCmd
	if take.Count > 0 {
		read = pipe.XReadGroup(ctx, &redis.XReadGroupArgs{Group: take.Group, Consumer: take.Consumer,
			Streams: []string{take.Stream, ">"}, Count: take.Count, Block: -1})
	}
	_, _ = pipe.Exec(ctx) // errors are per command
	if ack != nil && redis.HasErrorPrefix(ack.Err(), "NOSCRIPT") {
		// Not run: sent again on its own, which loads the script.
		ack = scripts.Ack.Run(ctx, l.m.rdb, ackKeys, ackArgs...)
	}
	take.fill(ack, read)
	reply, err := ev.Result()
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		return scripts.Promote.Run(ctx, l.m.rdb, keys, l.promoteArgs(renew)...).Result()
	}
	return reply, err
}

// callFailed explains, classifies and counts err, the failure of a promote
// call made under ctx (parent: the context runOnce was given), reports it
// to the OnError hook and returns it as a *callError.
func (l *lane) callFailed(ctx, parent context.Context, err error) error {
	err = memory.Explain(ctx, l.m.rdb, scripts.Explain(err))
	if errors.Is(err, context.Canceled) && parent.Err() == nil {
		// Cut by heal.CutIfMoved.
		err = fmt.Errorf("%w: cut once its slot had another master", err)
	}
	heal.After(l.m.rdb, err)
	stuck := persistent(err) && !errors.Is(err, errs.ErrOutOfMemory) // memory is freed, or evicted
	if stuck {
		// A WRONGTYPE reply (or a script error wrapping one) does not
		// say which key: ask, so that the log names it. A failure of
		// the check itself (its TYPE refused by the user's ACL, say)
		// must not hide the call's own error.
		var kte *stream.KeyTypeError
		if terr := stream.CheckTypes(ctx, l.m.rdb, l.keyTypes()...); errors.As(terr, &kte) {
			err = terr
		}
	}
	err = fmt.Errorf("promote %s: %w", l.keys.Delayed, err)
	l.m.failures.Add(1)
	if stuck {
		l.m.stuck.Add(1)
	}
	if h := l.m.cfg.hooks.OnError; h != nil {
		h(l.keys.Stream, err, stuck)
	}
	return &callError{err: err, stuck: stuck}
}

// record notes the lease renewal of a successful call's reply r (sent at
// start, asking to renew if renew) and counts what it moved.
func (l *lane) record(r result, start time.Time, renew bool) {
	switch {
	case r.leaseTTL != -1:
		l.renewed.Store(0) // another mover holds it, or nobody: set at the next call with work
	case renew && r.moved+r.quarantined > 0:
		l.renewed.Store(start.UnixNano()) // the script set it, after start
	}
	if n := r.moved + r.quarantined; n > 0 {
		l.m.promoted.Add(uint64(r.moved))
		l.m.quarant.Add(uint64(r.quarantined))
		l.m.batches.Add(1)
		if h := l.m.cfg.hooks.OnPromote; h != nil {
			h(l.keys.Stream, r.moved, r.quarantined, time.Since(start))
		}
	}
}

// promoteArgs returns the promote script's ARGV for the lane, with its
// arrivals channel (a shard channel in a sharded queue) and shard number,
// and whether a call that finds this mover holding the lease renews it:
// only when the last renewal this mover knows of is a third of the lease
// TTL old, so that a busy lane sets its lease a few times per TTL rather
// than at every call, and the lease never gets near lapsing while its
// holder promotes.
func (l *lane) promoteArgs(renew bool) []any {
	keep := "0"
	if renew {
		keep = "1"
	}
	return []any{l.m.cfg.batch, l.token, l.m.cfg.leaseTTL.Milliseconds(), wire.Header, l.arrivals, l.shardArg, keep}
}

// keyTypes lists the lane's keys with the types the promote script expects.
func (l *lane) keyTypes() []stream.KeyType {
	kt := []stream.KeyType{
		{Key: l.keys.Delayed, Want: "zset"}, {Key: l.keys.Envelopes, Want: "hash"},
		{Key: l.keys.Stream, Want: "stream"}, {Key: l.keys.Quarantine, Want: "stream"},
		{Key: l.keys.Lease, Want: "string"},
	}
	if l.keys.Pause != "" {
		kt = append(kt, stream.KeyType{Key: l.keys.Pause, Want: "hash"})
	}
	return kt
}

// lanePromoteKeys returns the promote script's KEYS for keys: the pause
// record last, for a main lane only.
func lanePromoteKeys(keys stream.Lane) []string {
	ks := []string{keys.Delayed, keys.Envelopes, keys.Stream, keys.Quarantine, keys.Lease}
	if keys.Pause != "" {
		ks = append(ks, keys.Pause)
		if keys.Occurrences != "" {
			ks = append(ks, keys.Occurrences)
		}
	}
	return ks
}

// callError is a failed promote call, classified.
type callError struct {
	err   error
	stuck bool // the failure repeats until the lane's keys or data are fixed
}

func (e *callError) Error() string { return e.err.Error() }
func (e *callError) Unwrap() error { return e.err }

// persistent reports whether err will repeat until someone fixes the lane's
// keys or data: an error reply from Redis (a script error, a key of the
// wrong type) that is not one of the transient ones (heal.Transient).
// Network errors and timeouts pass by themselves.
func persistent(err error) bool {
	return err != nil && !heal.Transient(err)
}

// stuckLogEvery is how often a stuck lane (one that fails until its keys
// or data are fixed) logs at Error. Other failures are logged at once, then
// at intervals that rise (logpace).
const stuckLogEvery = time.Minute

// failing tracks a lane's consecutive failed calls, so that a lane that
// keeps failing logs a bounded number of lines and says so differently
// from a passing error.
type failing struct {
	n      int       // consecutive failed calls
	since  time.Time // the first of them
	logged time.Time // the last line logged about them
	stuck  bool      // whether they were reported as a stuck lane
	pace   logpace.Pace
	// watch follows, on a Cluster, the lane's slot from the master the
	// calls failed on: a retry, or a call still trying the failed master,
	// goes to a promoted replica as soon as the slot map names it.
	watch heal.Watch
}

// failed records a failed call and logs it if due.
func (f *failing) failed(ctx context.Context, log *slog.Logger, err error, retryIn time.Duration) {
	now := time.Now()
	if f.n == 0 {
		f.since = now
	}
	f.n++
	var ce *callError
	stuck := errors.As(err, &ce) && ce.stuck
	switch {
	case stuck && (!f.stuck || now.Sub(f.logged) >= stuckLogEvery):
		log.ErrorContext(ctx, "lane stuck: promotion fails until its keys or data are fixed",
			slog.Any("err", err), slog.Int("failures", f.n), slog.Time("since", f.since))
		f.stuck, f.logged = true, now
	case !stuck && f.pace.Due(now):
		log.WarnContext(ctx, "promote failed", slog.Any("err", err), slog.Int("failures", f.n),
			slog.Duration("retry_in", retryIn))
		f.logged = now
	}
}

// succeeded ends a run of failures, saying so if any was logged after the first.
func (f *failing) succeeded(ctx context.Context, log *slog.Logger) {
	if f.n > 1 || f.stuck {
		log.InfoContext(ctx, "promote recovered", slog.Int("failures", f.n),
			slog.Duration("after", time.Since(f.since)))
	}
	f.watch.End()
	*f = failing{}
}

// expects reports whether a call now would likely append entries: the
// lane's last reply (or a wake-up since) named a due time (or a full
// batch) that has come by the Redis clock, as estimated from that reply.
// A call made to check an idle lane does not.
func (l *lane) expects() bool {
	next := l.lastNext.Load()
	return next >= 0 && time.Now().Add(time.Duration(l.lastAhead.Load())).UnixMilli() >= next
}
