package recur

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream/codec"
	"github.com/delaystream/delaystream/internal/memory"
	"github.com/delaystream/delaystream/internal/scripts"
	"github.com/delaystream/delaystream/internal/stream"
	"github.com/delaystream/delaystream/internal/wire"
)

// DefaultHorizon is how far ahead occurrences are added by default.
const DefaultHorizon = time.Minute

// Config is what a [Store] is built from.
type Config struct {
	Horizon time.Duration               // how far ahead occurrences are added; 0: DefaultHorizon
	Parsers map[string]Parser           // spec kinds this process computes, besides "every"
	Logger  *slog.Logger                // background failures; nil: slog.Default()
	Check   func(context.Context) error // the queue's shard-count check, before any write; may be nil
}

// Store is a queue's recurring schedules. It is safe for concurrent use.
type Store struct {
	rdb    redis.UniversalClient
	layout *stream.Layout
	cfg    Config
	warned sync.Map // kind or schedule id -> struct{}: warned once
	defs   sync.Map // schedule id -> cachedDef: definitions already read
}

// The outcomes of [Store.Define] and [Store.Change].
const (
	NotFound  = 0
	Created   = 1
	Changed   = 2
	Unchanged = 3
	Older     = 4 // Define: the stored definition has a higher version; nothing written
)

// New returns the store of the queue with layout l.
func New(rdb redis.UniversalClient, l *stream.Layout, cfg Config) *Store {
	if cfg.Horizon <= 0 {
		cfg.Horizon = DefaultHorizon
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	p := map[string]Parser{KindEvery: ParseEvery}
	maps.Copy(p, cfg.Parsers)
	cfg.Parsers = p
	if cfg.Check == nil {
		cfg.Check = func(context.Context) error { return nil }
	}
	return &Store{rdb: rdb, layout: l, cfg: cfg}
}

// Horizon returns how far ahead occurrences are added.
func (s *Store) Horizon() time.Duration { return s.cfg.Horizon }

func (s *Store) homeKeys() []string {
	return []string{s.layout.Recurring(), s.layout.RecurringProgress()}
}

// Define stores schedule sid's definition and adds its first
// occurrences. It returns Created, Changed (a new revision: the old one's
// waiting occurrences are fenced), Unchanged (the same definition) or
// Older (the stored definition has a higher version: nothing written).
func (s *Store) Define(ctx context.Context, sid string, d Def) (int, error) {
	body, err := d.body()
	if err != nil {
		return NotFound, err
	}
	return s.op(ctx, sid, "d", body, strconv.FormatUint(d.Version, 10))
}

// Change pauses ("p"), resumes ("r") or deletes ("x") schedule sid and
// fences its shards. It returns NotFound, Changed or Unchanged.
func (s *Store) Change(ctx context.Context, sid, op string) (int, error) {
	return s.op(ctx, sid, op, "", "0")
}

func (s *Store) op(ctx context.Context, sid, op, body, version string) (int, error) {
	if err := s.cfg.Check(ctx); err != nil {
		return NotFound, err
	}
	r, err := scripts.RecurDefine.Run(ctx, s.rdb, s.homeKeys(), sid, op, body, version).Result()
	if err != nil {
		return NotFound, fmt.Errorf("schedule %s: %w", sid, memory.Explain(ctx, s.rdb, scripts.Explain(err)))
	}
	v, err := scripts.Ints(r)
	if err != nil || len(v) != 3 {
		return NotFound, fmt.Errorf("schedule %s: reply %v: %w", sid, r, err)
	}
	if v[0] == NotFound || v[0] == Older {
		return int(v[0]), nil
	}
	// The caller fences the shards and adds the first occurrences itself;
	// if it fails here, any process's next top-up does it.
	return int(v[0]), s.TopUp(ctx, sid)
}

// read returns schedule sid's definition body ("" when none), its
// progress (ok false when none) and the Redis clock.
func (s *Store) read(ctx context.Context, sid string) (string, progress, bool, int64, error) {
	r, err := scripts.RecurRead.Run(ctx, s.rdb, s.homeKeys(), sid).Result()
	if err != nil {
		return "", progress{}, false, 0, fmt.Errorf("schedule %s: %w", sid, memory.Explain(ctx, s.rdb, scripts.Explain(err)))
	}
	a, _ := r.([]any)
	if len(a) != 3 {
		return "", progress{}, false, 0, fmt.Errorf("schedule %s: reply %v", sid, r)
	}
	body, _ := a[0].(string)
	ps, _ := a[1].(string)
	now, _ := a[2].(int64)
	p, ok := parseProgress(ps)
	return body, p, ok, now, nil
}

// TopUp fences schedule sid's shards if its last change left them
// unfenced, and adds its occurrences up to the horizon. A process that
// cannot compute the schedule's spec kind warns once and leaves it to
// others.
func (s *Store) TopUp(ctx context.Context, sid string) error {
	if err := s.cfg.Check(ctx); err != nil {
		return err
	}
	body, p, ok, now, err := s.read(ctx, sid)
	if err != nil || !ok {
		return err
	}
	return s.topUp(ctx, sid, p, now, func(context.Context) (string, error) { return body, nil })
}

// topUp is TopUp with schedule sid's progress p read at now (Redis clock,
// ms) and its definition from body ("" when none).
func (s *Store) topUp(ctx context.Context, sid string, p progress, now int64, body func(context.Context) (string, error)) error {
	if !p.fenced {
		if done, err := s.fence(ctx, sid, p); err != nil || !done {
			return err
		}
	}
	if p.state != stateActive {
		s.defs.Delete(sid)
		return nil
	}
	b, err := body(ctx)
	if err != nil || b == "" {
		return err
	}
	d, sp, ok := s.spec(sid, b)
	if !ok {
		return nil
	}
	occ, through := plan(sp, d.Missed, p.through, now, s.cfg.Horizon)
	next := nextTopUp(sp, max(through, p.through), s.cfg.Horizon)
	if through <= p.through {
		if next == p.next {
			return nil
		}
		return s.advance(ctx, sid, p.rev, p.through, next)
	}
	if done, err := s.add(ctx, sid, p.rev, d, occ); err != nil || !done {
		return err
	}
	return s.advance(ctx, sid, p.rev, through, next)
}

// cachedDef is a schedule's definition as of a revision.
type cachedDef struct {
	rev  int64
	body string
}

// bodyOf returns schedule sid's definition for revision rev: from the
// cache, or read (and cached) when the revision is new to this process.
// The definition and the revision are written together, so a definition
// read after its revision was seen is of that revision or a later one,
// whose occurrences the shards then refuse or fence.
func (s *Store) bodyOf(ctx context.Context, sid string, rev int64) (string, error) {
	if c, ok := s.defs.Load(sid); ok && c.(cachedDef).rev == rev {
		return c.(cachedDef).body, nil
	}
	b, err := s.rdb.HGet(ctx, s.layout.Recurring(), sid).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("schedule %s: %w", sid, err)
	}
	s.defs.Store(sid, cachedDef{rev: rev, body: b})
	return b, nil
}

// spec decodes a definition and its spec; it warns once (per kind, or per
// schedule for a definition that does not decode) when it cannot.
func (s *Store) spec(sid, body string) (Def, Spec, bool) {
	d, err := parseDef(body)
	if err != nil {
		s.warnOnce("schedule:"+sid, "recurring schedule unreadable; left as it is",
			slog.String("schedule", sid), slog.Any("err", err))
		return Def{}, nil, false
	}
	parse, ok := s.cfg.Parsers[d.Kind]
	if !ok {
		s.warnOnce("kind:"+d.Kind, "recurring schedule of a spec kind this process cannot compute; left to the processes that can (register it with WithSpecParser)",
			slog.String("schedule", sid), slog.String("kind", d.Kind))
		return Def{}, nil, false
	}
	sp, err := parse(d.Spec)
	if err != nil {
		s.warnOnce("schedule:"+sid, "recurring schedule's spec does not parse; left as it is",
			slog.String("schedule", sid), slog.Any("err", err))
		return Def{}, nil, false
	}
	return d, sp, true
}

func (s *Store) warnOnce(key, msg string, attrs ...any) {
	if _, loaded := s.warned.LoadOrStore(key, struct{}{}); !loaded {
		s.cfg.Logger.Warn(msg, attrs...)
	}
}

// fence runs recur_add.lua without occurrences on every shard for p's
// revision, then records the fence. done is false when a shard holds a
// later revision (the definition changed again meanwhile).
func (s *Store) fence(ctx context.Context, sid string, p progress) (bool, error) {
	for i := range s.layout.Shards() {
		refused, _, err := s.addShard(ctx, i, sid, p.rev, nil)
		if err != nil || refused {
			return false, err
		}
	}
	r, err := scripts.RecurAdvance.Run(ctx, s.rdb, []string{s.layout.RecurringProgress()}, sid, p.rev, p.through, "1", 0).Int()
	if err != nil {
		return false, fmt.Errorf("schedule %s: fence: %w", sid, memory.Explain(ctx, s.rdb, scripts.Explain(err)))
	}
	return r == 1, nil
}

// add writes occurrences occ (ascending ms) of revision rev, shard by
// shard. done is false when a shard refused them (a later revision).
func (s *Store) add(ctx context.Context, sid string, rev int64, d Def, occ []int64) (bool, error) {
	byShard := map[int][]any{}
	var order []int
	created := time.Now()
	for _, ms := range occ {
		sh := s.layout.ShardOf(OccurrenceID(sid, ms, rev))
		if _, ok := byShard[sh]; !ok {
			order = append(order, sh)
		}
		byShard[sh] = append(byShard[sh], strconv.FormatInt(ms, 10), envelope(sid, ms, d, created))
	}
	sort.Ints(order)
	for _, sh := range order {
		refused, _, err := s.addShard(ctx, sh, sid, rev, byShard[sh])
		if err != nil || refused {
			return false, err
		}
	}
	return true, nil
}

func envelope(sid string, ms int64, d Def, created time.Time) []byte {
	h := make(map[string]string, len(d.Headers)+2)
	maps.Copy(h, d.Headers)
	h[HeaderSchedule] = sid
	h[HeaderOccurrence] = time.UnixMilli(ms).UTC().Format(OccurrenceFormat)
	return wire.MarshalEnvelope(&codec.Envelope{Payload: d.Payload, Headers: h, Attempt: 1, Created: created})
}

// addShard runs recur_add.lua on shard i; pairs are ms, envelope.
func (s *Store) addShard(ctx context.Context, i int, sid string, rev int64, pairs []any) (refused bool, added int64, err error) {
	k := s.layout.Shard(i)
	l := k.Main()
	args := append([]any{scripts.Channel(l.Wake, l.Sharded), sid, rev}, pairs...)
	r, err := scripts.RecurAdd.Run(ctx, s.rdb, []string{l.Delayed, l.Envelopes, k.Occurrences()}, args...).Result()
	if err != nil {
		return false, 0, fmt.Errorf("schedule %s: shard %d: %w", sid, i, memory.Explain(ctx, s.rdb, scripts.Explain(err)))
	}
	v, err := scripts.Ints(r)
	if err != nil || len(v) != 2 {
		return false, 0, fmt.Errorf("schedule %s: shard %d: reply %v: %w", sid, i, r, err)
	}
	return v[0] < 0, v[0], nil
}

// advance records that revision rev is written through (ms) on every
// shard and fenced, and when its next top-up is due.
func (s *Store) advance(ctx context.Context, sid string, rev, through, next int64) error {
	_, err := scripts.RecurAdvance.Run(ctx, s.rdb, []string{s.layout.RecurringProgress()}, sid, rev, through, "1", next).Result()
	if err != nil {
		return fmt.Errorf("schedule %s: progress: %w", sid, memory.Explain(ctx, s.rdb, scripts.Explain(err)))
	}
	return nil
}

// TopUpDue tops up every schedule whose next occurrence not yet written
// has come within the horizon, or whose fence is unfinished, and returns
// how many it topped up: one HSCAN of the progress per 500 schedules
// (and one TIME when any is active or unfenced), then, per schedule due, its definition when its revision is
// new to this process, a script call per shard it writes to and one to
// record its progress. A schedule that fails is
// logged and the others go on.
func (s *Store) TopUpDue(ctx context.Context) (int, error) {
	var cursor uint64
	var now int64 // the Redis clock, read once a pass when a schedule needs it
	n := 0
	for {
		kv, next, err := s.rdb.HScan(ctx, s.layout.RecurringProgress(), cursor, "*", 500).Result()
		if err != nil {
			return n, fmt.Errorf("schedules: %w", err)
		}
		for i := 0; i+1 < len(kv); i += 2 {
			done, err := s.visit(ctx, kv[i], kv[i+1], &now)
			switch {
			case ctx.Err() != nil:
				return n, nil
			case err != nil:
				s.cfg.Logger.WarnContext(ctx, "recurring schedule top-up failed; retried at the next pass",
					slog.String("schedule", kv[i]), slog.Any("err", err))
			case done:
				n++
			}
		}
		if cursor = next; cursor == 0 {
			return n, nil
		}
	}
}

// visit tops up schedule sid, of progress record rec, if it is due at
// *now (read from Redis, and the shard count checked, at the first
// schedule of the pass that may need it), and reports whether it did.
func (s *Store) visit(ctx context.Context, sid, rec string, now *int64) (bool, error) {
	p, ok := parseProgress(rec)
	if !ok || (p.fenced && p.state != stateActive) {
		return false, nil
	}
	if *now == 0 {
		if err := s.cfg.Check(ctx); err != nil {
			return false, err
		}
		t, err := s.rdb.Time(ctx).Result()
		if err != nil {
			return false, fmt.Errorf("schedules: %w", err)
		}
		*now = t.UnixMilli()
	}
	if p.fenced && p.next > *now {
		return false, nil
	}
	body := func(ctx context.Context) (string, error) { return s.bodyOf(ctx, sid, p.rev) }
	return true, s.topUp(ctx, sid, p, *now, body)
}

// Interval returns the pause between two passes of [Store.Serve]: a
// quarter of the horizon, between 100 ms and 15 s.
func (s *Store) Interval() time.Duration {
	return min(max(s.cfg.Horizon/4, 100*time.Millisecond), 15*time.Second)
}

// Serve tops schedules up ([Store.TopUpDue]) at once and then every
// [Store.Interval] (jittered by ±10 %), until ctx is cancelled.
func (s *Store) Serve(ctx context.Context) error {
	iv := s.Interval()
	for {
		if _, err := s.TopUpDue(ctx); err != nil && ctx.Err() == nil {
			s.cfg.Logger.WarnContext(ctx, "recurring schedules: top-up pass failed", slog.Any("err", err))
		}
		t := time.NewTimer(iv + time.Duration(rand.Int64N(int64(iv/5)+1)) - iv/10)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// Parser returns the parser of spec kind.
func (s *Store) Parser(kind string) (Parser, bool) {
	p, ok := s.cfg.Parsers[kind]
	return p, ok
}
