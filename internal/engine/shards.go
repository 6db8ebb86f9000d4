package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"slices"
	"sync/atomic"
	"time"

	"github.com/delaystream/delaystream/internal/heal"
	"github.com/delaystream/delaystream/internal/scripts"
	"github.com/delaystream/delaystream/internal/stream"
)

// minBeatGap is the shortest time between two beats that announcements
// trigger: a flood of messages on the movers channel costs at most one
// beat per gap.
const minBeatGap = 20 * time.Millisecond

// registry divides the main lanes of a sharded queue between its live
// movers. Each mover registers in a ZSET (stream.Layout.Movers) with the
// movers.lua script and renews its registration every third of the TTL
// (the lease TTL); each beat returns the live movers, and the mover of
// rank k among their N sorted tokens owns the shards i with i % N == k.
// A mover that joins, leaves or finds lapsed registrations announces it on
// the movers channel, and the others beat at once, so a rebalance takes a
// round trip; a crashed mover's registration lapses two beat periods after
// its last beat, and the next beat of any mover removes it and announces
// it, so its shards are taken over within one TTL.
//
// Ownership only saves work: each owned lane runs the atomic promote script
// without a lease, so two movers that both own a shard for a moment (one
// has seen a change the other has not yet) never append a message twice.
type registry struct {
	m       *Engine
	key     string // the registry ZSET
	channel string // join and leave announcements
	ttl     time.Duration
	// window is how long a registration lasts unless renewed: two beat
	// periods (2/3 of the TTL), so that one late beat is tolerated and a
	// crashed mover, whose registration lapses a window after its last
	// beat, is dropped by another's next beat within one TTL.
	window time.Duration

	view atomic.Pointer[ownership] // the last view; nil before the first beat
	poke chan struct{}             // an announcement arrived: beat now

	// Used by the beating goroutine only (and by stop, after it ended).
	reported []int // the owned set last reported to the hook
	fails    failing
}

// ownership is a mover's view of its share: valid until a window after
// the beat that returned it was sent (its own registration lasts at least
// that long), unless a later beat renews it; when no beat succeeded for
// that long, the view is kept until one does (see run).
type ownership struct {
	shards []int  // owned, sorted
	has    []bool // has[i]: shard i owned
	movers int    // live movers seen
	until  time.Time
}

func newRegistry(m *Engine, layout *stream.Layout) *registry {
	ttl := m.cfg.leaseTTL
	return &registry{m: m, key: layout.Movers(), channel: layout.MoversChannel(), ttl: ttl, window: ttl - ttl/3,
		poke: make(chan struct{}, 1)}
}

// noLapse is the end of a view kept while the registry is unreachable:
// it holds until a beat succeeds.
var noLapse = time.Unix(1<<40, 0)

// all returns every shard.
func (r *registry) all() []int {
	out := make([]int, len(r.m.lanes))
	for i := range out {
		out[i] = i
	}
	return out
}

// valid reports whether v is the view in force at now.
func (v *ownership) valid(now time.Time) bool { return v != nil && now.Before(v.until) }

// owns reports whether shard i is owned now.
func (r *registry) owns(i int) bool {
	v := r.view.Load()
	return v.valid(time.Now()) && v.has[i]
}

// owned returns the shards owned now, sorted; nil if none.
func (r *registry) owned() []int {
	if v := r.view.Load(); v.valid(time.Now()) && len(v.shards) > 0 {
		return slices.Clone(v.shards)
	}
	return nil
}

// announced makes the mover beat at once: another mover joined or left.
func (r *registry) announced() {
	select {
	case r.poke <- struct{}{}:
	default:
	}
}

// assign returns the shards of n owned by the mover me among the live
// tokens: sorted and deduplicated, with me included, me's rank k owns the
// shards i with i % N == k (N live movers). Every mover with the same view
// computes the same split, and the split is even: N movers own n/N shards
// each, rounded up or down.
func assign(tokens []string, me string, n int) (owned []int, movers int) {
	all := append(slices.Clone(tokens), me)
	slices.Sort(all)
	all = slices.Compact(all)
	k, _ := slices.BinarySearch(all, me)
	for i := k; i < n; i += len(all) {
		owned = append(owned, i)
	}
	return owned, len(all)
}

// beat runs the movers script once: op "beat" registers or renews this
// mover, "leave" removes it. It returns the live tokens.
func (r *registry) beat(ctx context.Context, op string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, min(r.m.cfg.callLimit, max(r.ttl, time.Second)))
	defer cancel()
	reply, err := scripts.Movers.Run(ctx, r.m.rdb, []string{r.key}, r.m.token, r.window.Milliseconds(), op, r.channel).Result()
	if err != nil {
		return nil, fmt.Errorf("movers %s %s: %w", op, r.key, scripts.Explain(err))
	}
	arr, ok := reply.([]any)
	if !ok {
		return nil, fmt.Errorf("movers %s %s: want an array reply, got %T", op, r.key, reply)
	}
	tokens := make([]string, 0, len(arr))
	for _, x := range arr {
		if s, ok := x.(string); ok {
			tokens = append(tokens, s)
		}
	}
	return tokens, nil
}

// run beats until ctx ends: every third of the TTL, at once after an
// announcement (at most one per minBeatGap), and with backoff after a
// failure; the view lapses a window after the last successful beat was sent.
func (r *registry) run(ctx context.Context, log *slog.Logger) error {
	every := r.ttl / 3
	timer := time.NewTimer(0)
	defer timer.Stop()
	// Until a first beat succeeds, or a window after the last one did.
	lapse := time.NewTimer(r.window)
	defer lapse.Stop()
	// A beat ends by the time the lapse is due (zero: no bound, a view
	// kept until a beat succeeds): one that hangs on the registry's
	// failed node must not keep the lapse, and so every lane, waiting.
	lapseAt := time.Now().Add(r.window)
	backoff := min(50*time.Millisecond, every)
	var last time.Time // when the last beat was sent
	next := time.Now() // when the next beat is due
	// lapsed: no beat succeeded for a window: the registry is unreachable
	// (its node failed, a network split) or broken. Others may have taken
	// over this mover's shards, or may be in the same state; keep promoting
	// the last known share (every shard if none was ever known) until a
	// beat succeeds, so that the shards whose nodes are healthy stay
	// promoted. Two movers on one shard cost calls, never a duplicate: each
	// promotion is one atomic script.
	lapsed := func() {
		keep, movers := r.all(), 0
		if v := r.view.Load(); v != nil {
			keep, movers = v.shards, v.movers
		}
		log.WarnContext(ctx, "mover registration not renewed in time: promoting the last known share of shards until it is",
			slog.String("registry", r.key), slog.Duration("window", r.window), slog.Int("shards", len(keep)))
		r.apply(ctx, log, keep, movers, noLapse)
		lapseAt = time.Time{}
	}
	for {
		timer.Reset(time.Until(next))
		select {
		case <-ctx.Done():
			return nil
		case <-r.poke:
			if soon := last.Add(minBeatGap); soon.Before(next) {
				next = soon // at once, unless a beat was sent less than a gap ago
			}
			continue
		case <-lapse.C:
			lapsed()
			continue
		case <-timer.C:
		}
		if !lapseAt.IsZero() && !time.Now().Before(lapseAt) {
			// Due to beat and lapsed, both: the lapse first, or the beat
			// would start with its deadline gone.
			lapse.Stop()
			lapsed()
		}
		last = time.Now()
		bctx, cancel := ctx, context.CancelFunc(func() {})
		if !lapseAt.IsZero() {
			bctx, cancel = context.WithDeadline(ctx, lapseAt)
		}
		tokens, err := r.beat(bctx, "beat")
		cancel()
		if err != nil {
			heal.After(r.m.rdb, err)
			if ctx.Err() != nil {
				return nil
			}
			r.failed(ctx, log, err, backoff)
			next = time.Now().Add(min(every, backoff+time.Duration(mrand.Int64N(int64(backoff/2)+1))))
			backoff = min(2*backoff, every)
			continue
		}
		if r.fails.n > 0 {
			r.succeeded(ctx, log)
		}
		backoff = min(50*time.Millisecond, every)
		until := last.Add(r.window)
		owned, movers := assign(tokens, r.m.token, len(r.m.lanes))
		r.apply(ctx, log, owned, movers, until)
		lapse.Reset(time.Until(until))
		lapseAt = until
		next = last.Add(every)
	}
}

// failed records a failed beat, reports it to the OnError hook and logs
// it at a bounded rate: a passing failure at once and then every 30 s, a
// failure that repeats until the registry's key is fixed (a key of the
// wrong type) as an error, at once and then once a minute.
func (r *registry) failed(ctx context.Context, log *slog.Logger, err error, retryIn time.Duration) {
	stuck := persistent(err)
	if stuck {
		var kte *stream.KeyTypeError
		if terr := stream.CheckTypes(ctx, r.m.rdb, stream.KeyType{Key: r.key, Want: "zset"}); errors.As(terr, &kte) {
			err = fmt.Errorf("movers beat %s: %w", r.key, terr)
		}
	}
	if h := r.m.cfg.hooks.OnError; h != nil {
		h(r.key, err, stuck)
	}
	f := &r.fails
	now := time.Now()
	if f.n == 0 {
		f.since = now
	}
	f.n++
	switch {
	case stuck && (!f.stuck || now.Sub(f.logged) >= stuckLogEvery):
		log.ErrorContext(ctx, "mover registry stuck: beats fail until its key is fixed; this mover promotes its last known share meanwhile",
			slog.String("registry", r.key), slog.Any("err", err), slog.Int("failures", f.n), slog.Time("since", f.since))
		f.stuck, f.logged = true, now
	case !stuck && f.pace.Due(now):
		log.WarnContext(ctx, "mover registry beat failed", slog.String("registry", r.key), slog.Any("err", err),
			slog.Int("failures", f.n), slog.Duration("retry_in", retryIn))
		f.logged = now
	}
}

// succeeded ends a run of failed beats, saying so if any was logged after
// the first.
func (r *registry) succeeded(ctx context.Context, log *slog.Logger) {
	if f := r.fails; f.n > 1 || f.stuck {
		log.InfoContext(ctx, "mover registry beat recovered", slog.String("registry", r.key),
			slog.Int("failures", f.n), slog.Duration("after", time.Since(f.since)))
	}
	r.fails = failing{}
}

// apply makes owned the view until until (owned nil and a zero until: no
// view), wakes the lanes whose ownership changed (a lane gained starts at
// once; a lane lost stops its idle probes) and reports a change.
func (r *registry) apply(ctx context.Context, log *slog.Logger, owned []int, movers int, until time.Time) {
	n := len(r.m.lanes)
	next := &ownership{shards: owned, has: make([]bool, n), movers: movers, until: until}
	for _, i := range owned {
		next.has[i] = true
	}
	prev := r.view.Load()
	prevValid := prev.valid(time.Now())
	r.view.Store(next)
	for i, l := range r.m.lanes {
		// A lane gained starts at once (it may have seen the previous view
		// lapse); a lane lost stops at once (an idle one leaves the probe
		// turns).
		was := prev != nil && prev.has[i]
		if next.has[i] && !(was && prevValid) || !next.has[i] && was {
			l.notify(resubscribed)
		}
	}
	if !slices.Equal(owned, r.reported) {
		log.DebugContext(ctx, "mover shards changed", slog.Int("owned", len(owned)), slog.Int("movers", movers),
			slog.Int("shards", n))
		r.reported = slices.Clone(owned)
		r.m.reportOwnership(owned)
	}
}

// stop ends the view after Run's lanes stopped, and with leave removes this
// mover from the registry so that the others take its shards at once.
func (r *registry) stop(ctx context.Context, leave bool) {
	log := r.m.cfg.logger.With(slog.String("queue", r.m.queue))
	if leave {
		if _, err := r.beat(ctx, "leave"); err != nil && !errors.Is(err, context.Canceled) {
			log.WarnContext(ctx, "leaving the registry of movers failed; the others take over when the registration lapses",
				slog.String("registry", r.key), slog.Any("err", err))
		}
	}
	r.apply(ctx, log, nil, 0, time.Time{})
	r.fails = failing{}
}
