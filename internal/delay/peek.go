package delay

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream/codec"
	"github.com/delaystream/delaystream/internal/scripts"
	"github.com/delaystream/delaystream/internal/stream"
	"github.com/delaystream/delaystream/internal/wire"
)

// MaxPeek bounds the count of one [Queue.Peek] call.
const MaxPeek = 10000

// Waiting is one message waiting in a queue's delayed set, as [Queue.Peek]
// reports it.
type Waiting struct {
	ID    string    // the message id ("" when the member is of no kind this version knows)
	Due   time.Time // its due time (the member's score); zero when the score is not a due time
	Shard int       // the queue shard that holds it
	// Overdue reports that the message was due by the Redis clock when it
	// was peeked: a mover is late, absent, or cannot promote it.
	Overdue bool
	// Envelope is the message (Payload, Headers, Attempt, Created,
	// Deadline; ID and Due filled in); zero when Problem is set.
	Envelope codec.Envelope
	// Problem says why the message cannot be read, "" when it can: one of
	// the stream.Reason constants (stream.ReasonMissingEnvelope, ...),
	// which the mover will quarantine it with when it is due. A message
	// promoted or cancelled between Peek's two reads also shows as
	// stream.ReasonMissingEnvelope.
	Problem string
	// Member is the raw delayed-set member when it is not a plain id
	// (nil for plain members, whose member is ID); [Queue.PeekCut] cuts it
	// as it cuts the envelope.
	Member []byte
	// Size is the length in bytes of the message's payload, whole even
	// when Envelope.Payload holds only its first bytes ([Queue.PeekCut]);
	// 0 when Problem is set.
	Size int
}

// Peek returns up to count of the earliest waiting messages of the queue,
// in due order across every shard: the overdue ones (due, not yet promoted)
// come first, then the upcoming ones. count must be 1 to [MaxPeek].
//
// Peek only reads, with plain commands (TIME; ZRANGE WITHSCORES on each
// shard's delayed set; HMGET of the plain members' envelopes), so a
// read-only ACL user may call it and it never records the queue's shard
// count, unlike the other methods: it reads the record and returns an error
// wrapping stream.ErrShardCount when it holds another count than the
// Queue's. The reads are not one atomic snapshot: a message promoted or
// cancelled between them shows with Problem stream.ReasonMissingEnvelope,
// and Overdue is judged by the clock of the server that answered TIME.
// Members the mover would quarantine are reported with their Problem, not
// as errors.
func (q *Queue) Peek(ctx context.Context, count int) ([]Waiting, error) {
	if count < 1 || count > MaxPeek {
		return nil, fmt.Errorf("peek %s: %w: count must be 1 to %d, got %d", q.name, ErrInvalidOption, MaxPeek, count)
	}
	if err := q.set.checkRecord(ctx); err != nil {
		return nil, fmt.Errorf("peek %s: %w", q.name, err)
	}
	now, err := q.set.rdb.Time(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("peek %s: time: %w", q.name, err)
	}
	n := q.set.layout.Shards()
	pipe := q.set.rdb.Pipeline()
	heads := make([]*redis.ZSliceCmd, n)
	for i := range n {
		heads[i] = pipe.ZRangeWithScores(ctx, q.set.lanes[i].lane.Delayed, 0, int64(count-1))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("peek %s: %w", q.name, err)
	}
	var out []Waiting
	for i, cmd := range heads {
		for _, z := range cmd.Val() {
			out = append(out, classify(i, z))
		}
	}
	slices.SortStableFunc(out, func(a, b Waiting) int {
		return cmp.Or(a.Due.Compare(b.Due), cmp.Compare(a.Shard, b.Shard))
	})
	out = out[:min(len(out), count)]
	if err := q.set.readEnvelopes(ctx, out); err != nil {
		return nil, fmt.Errorf("peek %s: %w", q.name, err)
	}
	for i := range out {
		if out[i].Problem == "" {
			out[i].Size = len(out[i].Envelope.Payload)
		}
	}
	finishPeek(out, now)
	return out, nil
}

// finishPeek marks the overdue messages of ws as of now and fills in the
// envelopes' ID and Due.
func finishPeek(ws []Waiting, now time.Time) {
	for i := range ws {
		w := &ws[i]
		w.Overdue = !w.Due.IsZero() && !w.Due.After(now)
		if w.Problem == "" {
			w.Envelope.ID, w.Envelope.Due = w.ID, w.Due
		}
	}
}

// PeekCut is [Queue.Peek] for listings that show a preview of each
// payload: each message's Envelope.Payload holds at most its first
// maxPayload bytes (Size says how long it is), and Member at most as many
// after its envelope's headers. The cut is made in Redis by a read-only
// script (peek_cut.lua: ZRANGE and HGET, per shard, in one pipeline), so
// neither the network nor this process ever carries a whole payload: a
// listing of count 1 MiB messages costs count times maxPayload bytes, not
// count MiB. The script needs EVALSHA and EVAL besides Peek's commands
// (the operator's rules in docs/acl.md have them). maxPayload must be at
// least 1; count as for Peek. A message is reported exactly as Peek
// reports it, but for the bytes cut, and a plain member longer than
// [MaxIDLen] (no id this version writes) shows only its first MaxIDLen
// bytes as ID.
func (q *Queue) PeekCut(ctx context.Context, count, maxPayload int) ([]Waiting, error) {
	switch {
	case count < 1 || count > MaxPeek:
		return nil, fmt.Errorf("peek %s: %w: count must be 1 to %d, got %d", q.name, ErrInvalidOption, MaxPeek, count)
	case maxPayload < 1:
		return nil, fmt.Errorf("peek %s: %w: max payload bytes must be >= 1, got %d", q.name, ErrInvalidOption, maxPayload)
	}
	if err := q.set.checkRecord(ctx); err != nil {
		return nil, fmt.Errorf("peek %s: %w", q.name, err)
	}
	now, err := q.set.rdb.Time(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("peek %s: time: %w", q.name, err)
	}
	calls := make([]scripts.Call, q.set.layout.Shards())
	for i := range calls {
		calls[i] = scripts.Call{Keys: q.set.lanes[i].lookup, Args: []any{count, maxPayload, MaxIDLen}}
	}
	cmds, err := scripts.RunPipelined(ctx, q.set.rdb, scripts.PeekCut, calls)
	if err != nil {
		return nil, fmt.Errorf("peek %s: %w", q.name, err)
	}
	var out []Waiting
	for i, cmd := range cmds {
		items, err := cmd.Slice()
		if err != nil {
			return nil, fmt.Errorf("peek %s: %w", q.name, err)
		}
		if len(items)%5 != 0 {
			return nil, fmt.Errorf("peek %s: peek_cut.lua replied %d items, not 5 per member", q.name, len(items))
		}
		for k := 0; k < len(items); k += 5 {
			out = append(out, classifyCut(i, items[k:k+5]))
		}
	}
	slices.SortStableFunc(out, func(a, b Waiting) int {
		return cmp.Or(a.Due.Compare(b.Due), cmp.Compare(a.Shard, b.Shard))
	})
	out = out[:min(len(out), count)]
	finishPeek(out, now)
	return out, nil
}

// classifyCut reads one member of shard's delayed set as peek_cut.lua
// replies it: member (cut), score, member length, envelope (cut) or nil,
// envelope length. A cut envelope decodes whole but for its payload
// (internal/wire: the payload is its last field), so the payload's length
// is the stored length less the bytes cut.
func classifyCut(shard int, item []any) Waiting {
	member, _ := item[0].(string)
	score := -1.0 // not a due time
	if s, ok := item[1].(string); ok {
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			score = f
		}
	}
	memberLen, _ := item[2].(int64)
	w := classify(shard, redis.Z{Score: score, Member: member})
	switch {
	case w.Problem != "":
	case w.Member != nil: // packed: its envelope was decoded from the cut member
		w.Size = int(memberLen) - len(member) + len(w.Envelope.Payload)
	default:
		env, ok := item[3].(string)
		if !ok {
			w.Problem = stream.ReasonMissingEnvelope
			break
		}
		if err := wire.UnmarshalEnvelope([]byte(env), &w.Envelope); err != nil {
			w.Envelope, w.Problem = codec.Envelope{}, stream.ReasonUnknownEnvelope
			break
		}
		envLen, _ := item[4].(int64)
		w.Size = int(envLen) - len(env) + len(w.Envelope.Payload)
	}
	return w
}

// classify reads one member of shard's delayed set: its kind, id and due
// time, and for a packed member its envelope. Plain members' envelopes
// are read later, all at once.
func classify(shard int, z redis.Z) Waiting {
	member, _ := z.Member.(string)
	w := Waiting{Shard: shard}
	due, ok := dueOf(z.Score)
	if ok {
		w.Due = time.UnixMilli(due)
	}
	switch {
	case member == "" || (member[0] < 0x20 && member[0] != wire.PackedKind):
		w.Member, w.Problem = []byte(member), stream.ReasonUnknownMember
	case member[0] == wire.PackedKind:
		w.Member = []byte(member)
		if !ok {
			w.Problem = stream.ReasonInvalidDue
			return w
		}
		id, env, err := wire.Unpack(due, member)
		if err != nil {
			w.Problem = stream.ReasonMalformedPacked
			return w
		}
		w.ID = id
		if err := wire.UnmarshalEnvelope([]byte(env), &w.Envelope); err != nil {
			w.Envelope, w.Problem = codec.Envelope{}, stream.ReasonMalformedPacked
		}
	default:
		w.ID = member
		if !ok {
			w.Problem = stream.ReasonInvalidDue
		}
	}
	return w
}

// dueOf returns the due time in Unix ms of a delayed-set score, and
// whether the score is one: a whole number of ms in [0, 2^48).
func dueOf(score float64) (int64, bool) {
	if score < 0 || score >= 1<<48 || score != math.Trunc(score) {
		return 0, false
	}
	return int64(score), true
}

// readEnvelopes reads the envelopes of the plain members among ws, one
// HMGET per shard, all in one pipeline.
func (s *shardSet) readEnvelopes(ctx context.Context, ws []Waiting) error {
	byShard := map[int][]int{} // shard -> indexes into ws
	for i, w := range ws {
		if w.Member == nil && w.Problem == "" {
			byShard[w.Shard] = append(byShard[w.Shard], i)
		}
	}
	if len(byShard) == 0 {
		return nil
	}
	pipe := s.rdb.Pipeline()
	cmds := map[int]*redis.SliceCmd{}
	for shard, idx := range byShard {
		fields := make([]string, len(idx))
		for k, i := range idx {
			fields[k] = ws[i].ID
		}
		cmds[shard] = pipe.HMGet(ctx, s.lanes[shard].lane.Envelopes, fields...)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return err
	}
	for shard, idx := range byShard {
		vals := cmds[shard].Val()
		for k, i := range idx {
			raw, ok := vals[k].(string)
			if !ok {
				ws[i].Problem = stream.ReasonMissingEnvelope
				continue
			}
			if err := wire.UnmarshalEnvelope([]byte(raw), &ws[i].Envelope); err != nil {
				ws[i].Envelope, ws[i].Problem = codec.Envelope{}, stream.ReasonUnknownEnvelope
			}
		}
	}
	return nil
}

// checkRecord compares the queue's record with the Queue's shard count
// without writing anything: a queue with no record yet passes.
func (s *shardSet) checkRecord(ctx context.Context) error {
	v, err := s.rdb.HGet(ctx, s.layout.Meta(), "shards").Result()
	switch {
	case errors.Is(err, redis.Nil):
		return nil
	case err != nil:
		return fmt.Errorf("read %s: %w", s.layout.Meta(), err)
	}
	if n, err := strconv.Atoi(v); err != nil || n != s.layout.Shards() {
		return fmt.Errorf("%w: the queue's record %s holds %q, this producer has %d", stream.ErrShardCount, s.layout.Meta(), v, s.layout.Shards())
	}
	return nil
}
