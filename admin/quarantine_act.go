package admin

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/codec"
	"github.com/delaystream/delaystream/internal/delay"
	"github.com/delaystream/delaystream/internal/stream"
	"github.com/delaystream/delaystream/internal/wire"
)

// quarantined is one quarantine entry found by id.
type quarantined struct {
	id   string // as given
	lane stream.Lane
	main bool // the queue's own lane, not a group's retry lane
	msg  redis.XMessage
}

// DeleteQuarantined deletes the quarantine entries of queue given by entry
// id (as [Operator.Quarantine] lists them: "<ms>-<seq>", with "@<shard>"
// on a sharded queue), from whichever lane's quarantine holds them. A
// malformed id wraps delaystream.ErrInvalidOption and nothing is deleted.
func (in *Operator) DeleteQuarantined(ctx context.Context, queue string, entryIDs ...string) (ActionResult, error) {
	res := ActionResult{Queue: queue, Action: "delete"}
	found, err := in.findQuarantined(ctx, queue, entryIDs, &res)
	if err != nil {
		return res, err
	}
	for _, q := range found {
		n, err := in.rdb.XDel(ctx, q.lane.Quarantine, q.msg.ID).Result()
		if err != nil {
			return res, fmt.Errorf("delete quarantined %s: %w", q.id, err)
		}
		if n == 0 {
			res.NotFound = append(res.NotFound, q.id)
			continue
		}
		res.Done++
	}
	return res, nil
}

// RestoreQuarantined puts the quarantine entries of queue given by entry
// id back where they were set aside from, once what made them unreadable
// is fixed (a newer release reads their envelope, say): an entry of the
// queue's own lane is scheduled again (its message id, payload, headers
// and deadline; attempt 1) for delay after the call, or at its recorded
// due time if that is later; an entry of a group's retry lane waits
// there again, for that group only. The entry is then deleted. Entries
// without a message id or a readable envelope are left in place and
// reported Unrecoverable. Scheduling and deleting are two calls: a
// restore cut between them leaves the entry quarantined while its
// message waits; restoring it again keeps the waiting one.
func (in *Operator) RestoreQuarantined(ctx context.Context, queue string, delay time.Duration, entryIDs ...string) (ActionResult, error) {
	res := ActionResult{Queue: queue, Action: "restore"}
	if delay < 0 {
		return res, fmt.Errorf("%w: negative restore delay %s", delaystream.ErrInvalidOption, delay)
	}
	h, err := in.open(ctx, queue)
	if err != nil {
		return res, err
	}
	found, err := in.findQuarantined(ctx, queue, entryIDs, &res)
	if err != nil {
		return res, err
	}
	for _, q := range found {
		ok, err := in.restore(ctx, h, q, delay)
		switch {
		case err != nil:
			return res, fmt.Errorf("restore quarantined %s: %w", q.id, err)
		case !ok:
			res.Unrecoverable = append(res.Unrecoverable, q.id)
			continue
		}
		if err := in.rdb.XDel(ctx, q.lane.Quarantine, q.msg.ID).Err(); err != nil {
			return res, fmt.Errorf("restore quarantined %s: %w", q.id, err)
		}
		res.Done++
	}
	return res, nil
}

// restore schedules q's message again, and reports false when q holds
// none that can be.
func (in *Operator) restore(ctx context.Context, h *handle, q quarantined, wait time.Duration) (bool, error) {
	str := func(k string) string { s, _ := q.msg.Values[k].(string); return s }
	id, raw := str(wire.FieldID), str(wire.FieldEnvelope)
	if mem := str(wire.FieldMember); id == "" && len(mem) > 17 && mem[0] == wire.PackedKind {
		if due, err := strconv.ParseInt(str(wire.FieldDue), 10, 64); err == nil && due >= 0 && due < 1<<48 {
			id, raw = wire.GeneratedID(due, mem[1:17]), mem[17:]
		}
	}
	var env codec.Envelope
	if id == "" || raw == "" || wire.UnmarshalEnvelope([]byte(raw), &env) != nil {
		return false, nil
	}
	due := time.Now().Add(wait)
	if ms, err := strconv.ParseInt(str(wire.FieldDue), 10, 64); err == nil && time.UnixMilli(ms).After(due) {
		due = time.UnixMilli(ms)
	}
	if !q.main { // a group's retry lane: its member and envelope, as retry.lua writes them
		pipe := in.rdb.TxPipeline()
		pipe.HSet(ctx, q.lane.Envelopes, id, raw)
		pipe.ZAdd(ctx, q.lane.Delayed, redis.Z{Score: float64(due.UnixMilli()), Member: id})
		_, err := pipe.Exec(ctx)
		return err == nil, err
	}
	msg := delay.Message{ID: strings.SplitN(id, wire.RetrySep, 2)[0], Payload: env.Payload, Headers: env.Headers,
		Deadline: env.Deadline, OnDuplicate: delay.Keep}
	_, err := h.producer.Schedule(ctx, msg, delay.At(due))
	if errors.Is(err, delaystream.ErrInvalidMessage) {
		return false, nil
	}
	return err == nil, err
}

// findQuarantined finds each entry id in the quarantines of its shard
// (the queue's lane, then each group's retry lane), one pipeline per id.
// Ids found nowhere go to res.NotFound.
func (in *Operator) findQuarantined(ctx context.Context, queue string, entryIDs []string, res *ActionResult) ([]quarantined, error) {
	h, err := in.open(ctx, queue)
	if err != nil {
		return nil, err
	}
	groups, err := in.groupNames(ctx, h)
	if err != nil {
		return nil, err
	}
	type ref struct {
		given, id string
		shard     int
	}
	refs := make([]ref, len(entryIDs))
	for i, e := range entryIDs {
		id, shard, err := parseEntryRef(e, h.layout.Shards())
		if err != nil {
			return nil, err
		}
		refs[i] = ref{e, id, shard}
	}
	var out []quarantined
	for _, r := range refs {
		k := h.layout.Shard(r.shard)
		lanes := []stream.Lane{k.Main()}
		for _, g := range groups {
			lanes = append(lanes, k.Retry(g))
		}
		pipe := in.rdb.Pipeline()
		cmds := make([]*redis.XMessageSliceCmd, len(lanes))
		for i, l := range lanes {
			cmds[i] = pipe.XRangeN(ctx, l.Quarantine, r.id, r.id, 1)
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("quarantine of %s: %w", queue, err)
		}
		hit := false
		for i, c := range cmds {
			if ms := c.Val(); len(ms) == 1 {
				out = append(out, quarantined{id: r.given, lane: lanes[i], main: i == 0, msg: ms[0]})
				hit = true
				break
			}
		}
		if !hit {
			res.NotFound = append(res.NotFound, r.given)
		}
	}
	return out, nil
}

// parseEntryRef splits an entry id as listings show it into the stream
// entry id and its shard.
func parseEntryRef(e string, shards int) (string, int, error) {
	id, sh, sharded := strings.Cut(e, "@")
	shard := 0
	if sharded {
		n, err := strconv.Atoi(sh)
		if err != nil || n < 0 || n >= shards {
			return "", 0, fmt.Errorf("%w: entry id %q: shard out of range (0 to %d)", delaystream.ErrInvalidOption, e, shards-1)
		}
		shard = n
	} else if shards > 1 {
		return "", 0, fmt.Errorf("%w: entry id %q: a sharded queue's entry ids end with @<shard>, as listed", delaystream.ErrInvalidOption, e)
	}
	ms, seq, ok := strings.Cut(id, "-")
	if _, err := strconv.ParseUint(ms, 10, 64); err != nil || !ok {
		return "", 0, fmt.Errorf("%w: entry id %q: want <ms>-<seq>", delaystream.ErrInvalidOption, e)
	}
	if _, err := strconv.ParseUint(seq, 10, 64); err != nil {
		return "", 0, fmt.Errorf("%w: entry id %q: want <ms>-<seq>", delaystream.ErrInvalidOption, e)
	}
	return id, shard, nil
}
