package group

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/delaystream/delaystream/codec"
	"github.com/delaystream/delaystream/internal/heal"
	"github.com/delaystream/delaystream/internal/history"
	"github.com/delaystream/delaystream/internal/scripts"
	"github.com/delaystream/delaystream/internal/wire"
)

// settler settles the outcome of an entry: acknowledge (batched by the
// acker), retry in the group's retry lane, dead-letter, drop, or hand back
// to the group.
type settler struct {
	r    *runState
	ack  *acker
	trim *trimmer // told which streams had entries settled
}

// acked settles an entry whose handler succeeded: its XACK is queued and
// OnAcked is told how long it took since start.
func (s *settler) acked(f *flight, m *Message, start time.Time) {
	s.ack.add(ackReq{stream: f.b.stream, id: f.x.ID, success: true, msg: m.ID, attempt: m.Attempt}) // Counters.Acked moves when the XACK succeeds
	if h := s.r.c.cfg.hooks.OnAcked; h != nil {
		h(m, time.Since(start))
	}
}

// failed settles an entry whose handler returned herr and returns the
// outcome.
func (s *settler) failed(hctx context.Context, f *flight, m *Message, env *codec.Envelope, herr error) Outcome {
	r, c := s.r, s.r.c
	var drop *DropError
	var dl *DeadLetterError
	var ud *UndecodableError
	var re *RetryError
	switch {
	case errors.As(herr, &drop):
		s.ack.add(ackReq{stream: f.b.stream, id: f.x.ID, msg: m.ID, attempt: m.Attempt})
		c.ctr.dropped.Add(1)
		if h := c.cfg.hooks.OnDropped; h != nil {
			h(m, herr)
		}
		return OutcomeDropped
	case errors.Is(context.Cause(hctx), errOwnershipLost):
		c.ctr.lost.Add(1)
		r.log.Warn("handler lost its entry to another consumer", slog.String("id", m.ID), slog.String("entry", m.EntryID))
		return OutcomeReclaimed
	case errors.As(herr, &dl):
		c.ctr.failed.Add(1)
		return s.lastFailure(hctx, m, env, ReasonHandler, herr)
	case errors.As(herr, &ud):
		c.ctr.failed.Add(1)
		return s.lastFailure(hctx, m, env, ReasonUndecodable, herr)
	case errors.As(herr, &re) && !re.Counted:
		return s.retry(hctx, m, env, herr, max(re.Delay, 0), m.Attempt)
	case m.Attempt >= c.cfg.maxAttempts:
		c.ctr.failed.Add(1)
		return s.lastFailure(hctx, m, env, ReasonAttempts, herr)
	default:
		c.ctr.failed.Add(1)
		wait := c.cfg.backoff(m.Attempt + 1)
		if re != nil {
			wait = re.Delay
		}
		return s.retry(hctx, m, env, herr, max(wait, 0), m.Attempt+1)
	}
}

// retry acknowledges the entry and schedules attempt in the retry lane,
// due after wait. While Redis refuses the write for memory, it holds the
// entry and tries again (see store) until hold ends.
func (s *settler) retry(hold context.Context, m *Message, env *codec.Envelope, herr error, wait time.Duration, attempt int) Outcome {
	r, c := s.r, s.r.c
	next := *env
	next.Attempt = attempt
	sh := c.shardOf(m.Stream)
	lane := sh.retry
	keys := []string{m.Stream, lane.Delayed, lane.Envelopes}
	if !c.cfg.noHistory {
		keys = history.Append(keys, sh.keys, time.Now())
	}
	args := []any{c.group, m.EntryID, wire.RetryMember(m.ID, m.EntryID), wire.MarshalEnvelope(&next),
		wait.Milliseconds(), scripts.Channel(lane.Wake, lane.Sharded)}
	var due int64
	err := s.store(hold, sh, func(ctx context.Context) (err error) {
		due, err = scripts.Retry.Run(ctx, c.rdb, keys, args...).Int64()
		return err
	})
	if err != nil {
		// The entry stays pending; it is reclaimed after the visibility timeout.
		heal.After(c.rdb, err)
		r.log.ErrorContext(r.opCtx, "scheduling retry failed", slog.String("id", m.ID), slog.Any("err", c.explain(r.opCtx, err, sh)))
		return OutcomeUnsettled
	}
	if due < 0 {
		return OutcomeReclaimed // no longer ours: another consumer reclaimed and settled it
	}
	s.trim.settled(m.Stream, 1)
	c.ctr.retried.Add(1)
	if h := c.cfg.hooks.OnFailed; h != nil {
		h(m, herr, wait)
	}
	return OutcomeRetried
}

// lastFailure dead-letters an entry whose handler failed for the last time
// (its last attempt, or it asked for the dead letters) with herr, as
// deadLetter does; once it is dead-lettered, OnFailed gets herr (with
// retryIn 0: there is no next attempt) before OnDeadLettered, so that
// every failure's error reaches the hook, the last one included.
func (s *settler) lastFailure(hold context.Context, m *Message, env *codec.Envelope, reason string, herr error) Outcome {
	return s.deadLetterAfter(hold, m, env, reason, herr, true)
}

// deadLetter acknowledges the entry and appends it to the dead letters.
// While Redis refuses the write for memory, it holds the entry and tries
// again (see store) until hold ends.
func (s *settler) deadLetter(hold context.Context, m *Message, env *codec.Envelope, reason string, cause error) Outcome {
	return s.deadLetterAfter(hold, m, env, reason, cause, false)
}

// deadLetterAfter is deadLetter; failed reports a handler's failure, told
// to OnFailed (see lastFailure).
func (s *settler) deadLetterAfter(hold context.Context, m *Message, env *codec.Envelope, reason string, cause error, failed bool) Outcome {
	fields := []any{
		wire.FieldID, m.ID,
		wire.FieldDue, strconv.FormatInt(m.Due.UnixMilli(), 10),
		wire.FieldEnvelope, wire.MarshalEnvelope(env),
		wire.FieldReason, reason,
		fieldError, errString(cause),
		fieldAttempt, m.Attempt,
		fieldDeliveries, m.Deliveries,
		fieldSource, m.Stream,
		fieldEntry, m.EntryID,
	}
	o := s.settleDead(hold, m.Stream, m.EntryID, fields)
	if o == OutcomeDeadLettered {
		hooks := &s.r.c.cfg.hooks
		if h := hooks.OnFailed; h != nil && failed {
			h(m, cause, 0)
		}
		if h := hooks.OnDeadLettered; h != nil {
			h(m, reason)
		}
	}
	return o
}

// deadLetterRaw dead-letters an entry that could not be decoded, keeping
// whatever fields it had; hold as for deadLetter.
func (s *settler) deadLetterRaw(hold context.Context, f *flight, cause error) {
	streamKey, id := f.b.stream, f.x.ID
	fields := []any{wire.FieldReason, ReasonUndecodable, fieldError, cause.Error(),
		fieldDeliveries, f.deliveries, fieldSource, streamKey, fieldEntry, id}
	vals := f.x.Values
	// A packed entry whose member splits (only its envelope is bad) is
	// written with id and envelope fields, so the dead letter reads and
	// redrives like any other; one that does not split keeps its bytes.
	if p, ok := vals[wire.FieldPacked].(string); ok {
		d, _ := vals[wire.FieldDue].(string)
		due, err := strconv.ParseInt(d, 10, 64)
		var mid, env string
		if err == nil {
			mid, env, err = wire.Unpack(due, p)
		}
		if err == nil {
			vals = map[string]any{wire.FieldID: mid, wire.FieldDue: d, wire.FieldEnvelope: env}
		} else {
			fields = append(fields, wire.FieldPacked, p)
		}
	}
	for _, k := range []string{wire.FieldID, wire.FieldDue, wire.FieldEnvelope} {
		if v, ok := vals[k].(string); ok {
			fields = append(fields, k, v)
		}
	}
	s.r.log.Warn("undecodable entry dead-lettered", slog.String("stream", streamKey), slog.String("entry", id), slog.Any("err", cause))
	if s.settleDead(hold, streamKey, id, fields) == OutcomeDeadLettered {
		if h := s.r.c.cfg.hooks.OnDeadLettered; h != nil {
			h(nil, ReasonUndecodable)
		}
	}
}

// settleDead acknowledges entry id of streamKey and appends fields to the
// dead letters, in one script (tried again while Redis refuses it for
// memory, until hold ends: see store). It returns OutcomeDeadLettered when
// the entry was still pending with the group (and so was dead-lettered),
// OutcomeReclaimed when it was not, OutcomeUnsettled when the script failed.
func (s *settler) settleDead(hold context.Context, streamKey, id string, fields []any) Outcome {
	r, c := s.r, s.r.c
	sh := c.shardOf(streamKey)
	keys := []string{streamKey, sh.dead}
	if !c.cfg.noHistory {
		keys = history.Append(keys, sh.keys, time.Now())
	}
	args := append([]any{c.group, id, c.cfg.deadCap}, fields...)
	var v []int64
	err := s.store(hold, sh, func(ctx context.Context) (err error) {
		v, err = scripts.Dead.Run(ctx, c.rdb, keys, args...).Int64Slice()
		return err
	})
	if err != nil || len(v) != 2 {
		heal.After(c.rdb, err)
		r.log.ErrorContext(r.opCtx, "dead-lettering failed", slog.String("entry", id), slog.Any("err", c.explain(r.opCtx, err, sh)))
		return OutcomeUnsettled
	}
	if v[0] == 0 {
		return OutcomeReclaimed
	}
	s.trim.settled(streamKey, 1)
	c.ctr.deadLettered.Add(1)
	if v[1] > 0 {
		c.ctr.deadDropped.Add(uint64(v[1]))
		r.log.WarnContext(r.opCtx, "dead-letter cap reached; oldest dead letters trimmed", slog.Int64("dropped", v[1]), slog.Int64("cap", c.cfg.deadCap))
	}
	return OutcomeDeadLettered
}

// handBack makes entries immediately reclaimable by any consumer of the
// group: it sets their idle time far past the visibility timeout. Ownership
// stays with this consumer until another one claims them. retries >= 0
// sets their delivery counts (which the claim then raises by one).
func (s *settler) handBack(ctx context.Context, streamKey string, ids []string, retries int64) {
	if len(ids) == 0 {
		return
	}
	r, c := s.r, s.r.c
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	args := []any{"XCLAIM", streamKey, c.group, c.cfg.consumer, 0}
	for _, id := range ids {
		args = append(args, id)
	}
	idle := (c.cfg.visibility + 24*time.Hour).Milliseconds()
	args = append(args, "IDLE", idle)
	if retries >= 0 {
		args = append(args, "RETRYCOUNT", retries)
	}
	args = append(args, "JUSTID")
	if err := c.rdb.Do(ctx, args...).Err(); err != nil {
		heal.After(c.rdb, err)
		r.log.WarnContext(ctx, "handing entries back failed; they are reclaimed after the visibility timeout",
			slog.String("stream", streamKey), slog.Any("err", err))
		return
	}
	c.ctr.handedBack.Add(uint64(len(ids)))
}

// handBackKept hands back fs, entries of streamKey never started, with
// their delivery counts set back by one (one call per count), so that the
// claim that takes each next leaves its count as it was.
func (s *settler) handBackKept(ctx context.Context, streamKey string, fs []*flight) {
	byCount := map[int64][]string{}
	for _, f := range fs {
		n := max(f.deliveries-1, 0)
		byCount[n] = append(byCount[n], f.x.ID)
	}
	for n, ids := range byCount {
		s.handBack(ctx, streamKey, ids, n)
	}
}

// handBackAll hands back every entry still held, at drain timeout: those
// whose handler started as they are (the claim that takes one next counts
// a delivery), those still queued with their counts kept (handBackKept).
func (s *settler) handBackAll() int {
	c := s.r.c
	started := map[string][]string{}
	queued := map[string][]*flight{}
	c.held.mu.Lock()
	for b := range c.held.batches {
		for i := range b.flights {
			f := &b.flights[i]
			if f.settled.Load() || !f.takeBack() {
				continue
			}
			f.mu.Lock()
			running := f.cancel != nil
			f.mu.Unlock()
			if running {
				started[b.stream] = append(started[b.stream], f.x.ID)
			} else {
				queued[b.stream] = append(queued[b.stream], f)
			}
		}
	}
	c.held.mu.Unlock()
	n := 0
	for st, ids := range started {
		s.handBack(s.r.opCtx, st, ids, -1)
		n += len(ids)
	}
	for st, fs := range queued {
		s.handBackKept(s.r.opCtx, st, fs)
		n += len(fs)
	}
	return n
}
