package engine

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/delaystream/delaystream/internal/heal"
	"github.com/delaystream/delaystream/internal/optcheck"
	"github.com/delaystream/delaystream/internal/scripts"
	"github.com/delaystream/delaystream/internal/shards"
	"github.com/delaystream/delaystream/internal/shardsub"
	"github.com/delaystream/delaystream/internal/stream"
	"github.com/delaystream/delaystream/internal/wire"
)

// callTimeout bounds one promote call, so a hung connection cannot stall a lane.
const callTimeout = 5 * time.Second

// slowCall is how long a promote call runs before, on a Cluster, it is cut
// once its slot moves to another master (heal.CutIfMoved): a call takes
// milliseconds unless its master is dead or the server is very busy.
const slowCall = 200 * time.Millisecond

// Engine promotes due messages of lanes into their streams: the
// implementation behind mover.Mover (a queue's main lanes, one per shard)
// and behind each group.Consumer's retry lanes. Create it with [New] and
// start it with [Engine.Run]. Its methods are safe for concurrent use.
type Engine struct {
	rdb    redis.UniversalClient
	queue  string
	lanes  []*lane // lanes[i] promotes shard i
	cfg    Config
	token  string // this engine's identity: its lease token and its registry token
	layout *stream.Layout
	guard  *shards.Guard
	reg    *registry   // the registry of live movers; nil when every lane is looked at
	probes *idleProbes // the idle probes' shared budget
	all    []int       // every shard number

	dataPoke chan struct{} // a lane recovered from failed calls: check the queue's record now (watchData)
	flightMu sync.Mutex
	inFlight map[string]chan struct{} // by node address: a slot per promote call or probe in flight (maxInFlight)

	// noLeave makes Run return without releasing its leases or leaving
	// the registry, as a mover that crashed would (tests only).
	noLeave atomic.Bool

	running  atomic.Bool
	looking  atomic.Bool // Run has checked the shard count and looks at its lanes (Owned of an engine without registry)
	promoted atomic.Uint64
	quarant  atomic.Uint64
	batches  atomic.Uint64
	failures atomic.Uint64
	stuck    atomic.Uint64
}

// Counters are running totals since the Engine was created, counted from the
// promote script's replies: a call whose reply is lost (the connection dies
// after Redis ran it) has moved its batch but is not counted, so the totals
// can fall short of what the streams received, never exceed it.
type Counters struct {
	Promoted    uint64 // entries appended to streams
	Quarantined uint64 // entries set aside (missing or foreign envelope, unknown member kind)
	Batches     uint64 // promote calls that moved or quarantined something
	Errors      uint64 // promote calls that failed
	// Stuck counts the failed promote calls (included in Errors) whose
	// error repeats until someone fixes the lane's keys or data: a key of
	// the wrong type, an error reply from the script. Network failures,
	// timeouts and a server that is loading or failing over are transient
	// and not counted here.
	Stuck uint64
}

// New returns an Engine for queue. It validates everything, talks to no server
// and starts nothing: call Run. The client is borrowed and never closed.
func New(rdb redis.UniversalClient, queue string, opts ...Option) (*Engine, error) {
	if rdb == nil {
		return nil, fmt.Errorf("%w: nil redis client", ErrInvalidOption)
	}
	cfg := Config{
		prefix:    stream.DefaultPrefix,
		batch:     DefaultBatchSize,
		maxIdle:   DefaultMaxIdle,
		leaseTTL:  DefaultLeaseTTL,
		logger:    slog.Default(),
		callLimit: callTimeout,
		shards:    1,
	}
	if err := optcheck.Apply(ErrInvalidOption, &cfg, opts); err != nil {
		return nil, err
	}
	if !cfg.noLease && cfg.leaseTTL <= cfg.maxIdle {
		return nil, fmt.Errorf("%w: lease TTL %s must exceed max idle %s", ErrInvalidOption, cfg.leaseTTL, cfg.maxIdle)
	}
	layout, err := stream.NewLayout(cfg.prefix, queue, cfg.shards)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOption, err)
	}
	var tok [12]byte
	_, _ = rand.Read(tok[:])
	m := &Engine{rdb: rdb, queue: queue, cfg: cfg, token: hex.EncodeToString(tok[:]),
		layout: layout, guard: shards.NewGuard(layout, "mover"), probes: newIdleProbes(cmp.Or(cfg.probe, cfg.maxIdle)),
		inFlight: map[string]chan struct{}{}, dataPoke: make(chan struct{}, 1)}
	sharded := cfg.shards > 1
	// The main lanes of a sharded queue are divided between its movers by
	// the registry, and promoted without leases; WithoutLease opts out of
	// both (every mover promotes every lane).
	if sharded && cfg.retryOf == "" && !cfg.noLease {
		m.reg = newRegistry(m, layout)
	}
	m.lanes = make([]*lane, cfg.shards)
	m.all = make([]int, cfg.shards)
	for i := range cfg.shards {
		keys := layout.Shard(i).Main()
		if cfg.retryOf != "" {
			keys = layout.Shard(i).Retry(cfg.retryOf)
		}
		l := m.newLane(keys)
		l.shard = i
		if !cfg.noLease && m.reg == nil {
			l.token = m.token
		}
		// Consumers of a sharded queue wait for these announcements
		// instead of polling every shard; consumers of any queue run
		// reclaim passes only after them (an unsharded lane's channel is a
		// classic one: its consumers block on its one stream).
		l.arrivals, l.shardArg = scripts.Channel(keys.Arrivals, sharded), strconv.Itoa(i)
		m.lanes[i] = l
		m.all[i] = i
	}
	return m, nil
}

// Counters returns the running totals.
func (m *Engine) Counters() Counters {
	return Counters{
		Promoted: m.promoted.Load(), Quarantined: m.quarant.Load(),
		Batches: m.batches.Load(), Errors: m.failures.Load(), Stuck: m.stuck.Load(),
	}
}

// Owned returns the shards this engine currently promotes, sorted; nil
// when it promotes none (before Run, after it, and while a mover of a
// sharded queue has no share). The movers of a sharded queue's main lanes
// divide its shards between them (see [WithShards]); any other engine
// looks at every lane while it runs, and leases decide which engine
// promotes a lane. [Hooks].OnOwnership reports every change.
func (m *Engine) Owned() []int {
	if m.reg != nil {
		return m.reg.owned()
	}
	if m.looking.Load() {
		return slices.Clone(m.all)
	}
	return nil
}

// Run promotes due entries until ctx is cancelled, then releases its leases
// (and leaves the registry of a sharded queue's movers) and returns nil. It
// returns [ErrRunning] if the Engine is already running.
//
// It first checks that the queue's shard count recorded in Redis is the
// one the Engine was built with (recording it when the queue is new). On a
// mismatch it returns an error wrapping stream.ErrShardCount at once,
// having written nothing; a failure to check is logged and retried with
// backoff until ctx ends.
//
// Each lane is promoted in batches while batches are full; otherwise the
// mover sleeps until the next due time (a Go timer), and is woken early
// through the lane's pub/sub channel when a producer schedules an earlier
// entry. With nothing due within the max idle, a lane is idle: it makes no
// promote calls, and the engine's idle lanes take turns probing their
// heads, one probe per max idle for the whole engine (each lane at least
// every 30 s), which catches a lost wake-up. When several movers run, the
// one holding a lane's lease promotes it and the others check once per
// lease period.
//
// The movers of a sharded queue's main lanes (see [WithShards]) instead
// divide its shards: each registers in a registry of live movers in Redis,
// renews its registration every third of the lease TTL (and at once when
// another mover announces that it joined or left), and promotes the shards
// i with i % N == k, where N is the number of live movers and k its rank
// among their sorted tokens, without leases. A mover that cannot renew
// promotes nothing once its view is a lease TTL old. Ownership only saves
// work: promotion is one atomic script, so two movers that both promote a
// shard during a rebalance never append a message twice.
//
// Failed calls are logged and retried with backoff; Run does not return on
// them. Shutdown takes at most one in-flight promote call (bounded by a 5 s
// timeout) plus a lease release or registry leave of at most 1 s.
func (m *Engine) Run(ctx context.Context) error {
	if !m.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer m.running.Store(false)
	log := m.cfg.logger.With(slog.String("queue", m.queue))
	if err := m.checkShards(ctx, log); err != nil || ctx.Err() != nil {
		return err
	}
	log.DebugContext(ctx, "mover started", slog.Int("lanes", len(m.lanes)))

	var (
		chans  []string   // classic channels
		groups [][]string // shard channels, one slot per group
	)
	byChan := make(map[string]*lane, len(m.lanes))
	for _, l := range m.lanes {
		if l.keys.Sharded {
			groups = append(groups, []string{l.keys.Wake})
		} else {
			chans = append(chans, l.keys.Wake)
		}
		byChan[l.keys.Wake] = l
		l.wake = make(chan int64, 1)
	}
	if m.reg != nil {
		chans = append(chans, m.reg.channel)
	}
	// A message on a wake channel wakes its lane; one on the movers
	// channel makes the registry beat.
	onMessage := func(ch, payload string) {
		if m.reg != nil && ch == m.reg.channel {
			if payload != m.token { // not our own announcement
				m.reg.announced()
			}
			return
		}
		if l := byChan[ch]; l != nil {
			if due, err := strconv.ParseInt(payload, 10, 64); err == nil {
				l.notify(due)
			}
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	// subscribe keeps a subscription to groups (classic channels: one
	// group; shard channels: one group per slot, one connection per node)
	// through shardsub, which rebuilds it after a failure with a jittered
	// backoff (go-redis's own channel retries every 100 ms while the server
	// is down) and pings it after 30 s of silence: a lost wake-up costs at
	// most a lane's idle probe period, so a slow health check keeps the
	// idle cost low. After every (re)subscription the lanes look, and the
	// registry beats, at once: what was published meanwhile is lost.
	subscribe := func(groups [][]string, classic bool) {
		g.Go(func() error {
			return shardsub.Run(gctx, m.rdb, shardsub.Config{
				Groups: groups, Classic: classic, OnMessage: onMessage,
				OnReset: func() {
					for _, grp := range groups {
						for _, ch := range grp {
							if m.reg != nil && ch == m.reg.channel {
								m.reg.announced()
							} else if l := byChan[ch]; l != nil {
								l.notify(resubscribed)
							}
						}
					}
				},
				Health: 30 * time.Second,
				Logger: log,
			})
		})
	}
	if len(groups) > 0 {
		subscribe(groups, false) // a sharded queue's wake channels
	}
	if len(chans) > 0 {
		// An unsharded lane's wake channel and the movers channel: on a
		// Cluster a classic PUBLISH reaches every node, so any will do.
		subscribe([][]string{chans}, true)
	}
	g.Go(func() error { return m.probes.run(gctx) })
	if m.cfg.retryOf == "" {
		g.Go(func() error { m.watchData(gctx, log); return nil })
	}
	if m.reg != nil {
		g.Go(func() error { return m.reg.run(gctx, log) })
	} else {
		m.looking.Store(true)
		m.reportOwnership(m.all)
	}
	for _, l := range m.lanes {
		g.Go(func() error { return l.run(gctx, log) })
	}
	err := g.Wait()

	relCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	if !m.noLeave.Load() {
		for _, l := range m.lanes {
			l.release(relCtx)
		}
	}
	if m.reg != nil {
		m.reg.stop(relCtx, !m.noLeave.Load())
	} else {
		m.looking.Store(false)
		m.reportOwnership(nil)
	}
	log.DebugContext(ctx, "mover stopped")
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// maxInFlight bounds the promote calls and probes an engine has in flight
// at once on each node, whatever its number of lanes, so that the
// connections it takes from the client's pool do not grow with the shard
// count (a sharded queue's lanes all call at once when Run starts or the
// pub/sub connection comes back). Four calls in flight keep a Redis server
// busy: each moves a batch in the server's single thread. The bound is
// per node so that the calls to a node that failed, which can hang for the
// client's retries, do not hold up the lanes on the healthy nodes.
const maxInFlight = 4

// acquireCall waits for one of the in-flight calls of the node at addr
// (heal.MasterOf the call's key: "" unless on a Cluster), or ctx, and
// returns the function that gives it back.
func (m *Engine) acquireCall(ctx context.Context, addr string) (release func(), err error) {
	m.flightMu.Lock()
	slots := m.inFlight[addr]
	if slots == nil {
		slots = make(chan struct{}, maxInFlight)
		m.inFlight[addr] = slots
	}
	m.flightMu.Unlock()
	select {
	case slots <- struct{}{}:
		return func() { <-slots }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// reportOwnership calls the OnOwnership hook.
func (m *Engine) reportOwnership(owned []int) {
	if h := m.cfg.hooks.OnOwnership; h != nil {
		h(slices.Clone(owned))
	}
}

// dataCheckEvery is how often a mover checks that Redis still has its
// queue's record (stream.ErrDataLost).
const dataCheckEvery = 30 * time.Second

// watchData checks the queue's record every dataCheckEvery, and when a
// lane's calls work again after failing (Redis may have restarted), until
// ctx ends; it reports once each time it finds the record gone or recreated:
// Redis lost the queue's data (the record is recreated by the check, so
// the next loss is seen too). A failed check is retried at the next tick.
func (m *Engine) watchData(ctx context.Context, log *slog.Logger) {
	tick := time.NewTicker(dataCheckEvery)
	defer tick.Stop()
	// The client reconnects by itself after a restart, often without a
	// failed call: a drop of pooled connections (StaleConns, which counts
	// every connection removed from the pool) also triggers a check, at
	// most once a second. It costs no call.
	conns := time.NewTicker(time.Second)
	defer conns.Stop()
	stale := m.rdb.PoolStats().StaleConns
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-m.dataPoke:
		case <-conns.C:
			s := m.rdb.PoolStats().StaleConns
			if s == stale {
				continue
			}
			stale = s
		}
		cctx, cancel := context.WithTimeout(ctx, m.cfg.callLimit)
		lost, err := m.guard.Verify(cctx, m.rdb)
		cancel()
		if err != nil {
			heal.After(m.rdb, err)
			continue
		}
		if lost {
			err := m.guard.LostError("within the last " + time.Since(last).Round(time.Second).String())
			log.ErrorContext(ctx, "Redis lost the queue's data", slog.Any("err", err))
			if h := m.cfg.hooks.OnDataLoss; h != nil {
				h(err)
			}
		}
		last = time.Now()
	}
}

// checkShards checks the queue's shard count recorded in Redis (recording
// it if the queue is new), retrying with backoff while the check fails,
// until ctx ends. It returns the error of a mismatch, nil otherwise.
func (m *Engine) checkShards(ctx context.Context, log *slog.Logger) error {
	backoff := 50 * time.Millisecond
	var fails failing
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		cctx, cancel := context.WithTimeout(ctx, m.cfg.callLimit)
		err := m.guard.Check(cctx, m.rdb)
		heal.After(m.rdb, err)
		cancel()
		switch {
		case err == nil:
			if fails.n > 0 {
				log.InfoContext(ctx, "shard count check recovered", slog.Int("failures", fails.n),
					slog.Duration("after", time.Since(fails.since)))
			}
			return nil
		case errors.Is(err, stream.ErrShardCount):
			return fmt.Errorf("mover %s: %w", m.queue, err)
		case ctx.Err() != nil:
			return nil
		}
		now := time.Now()
		if fails.n == 0 {
			fails.since = now
		}
		fails.n++
		if fails.n == 1 || now.Sub(fails.logged) >= transientLogEvery {
			log.WarnContext(ctx, "checking the queue's shard count failed; the mover waits",
				slog.Any("err", err), slog.Int("failures", fails.n), slog.Duration("retry_in", backoff))
			fails.logged = now
		}
		timer.Reset(backoff + time.Duration(mrand.Int64N(int64(backoff/2))))
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		}
		backoff = min(2*backoff, max(m.cfg.maxIdle, time.Second))
	}
}

// lane promotes one delayed set into its stream.
type lane struct {
	m        *Engine
	keys     stream.Lane
	shard    int
	token    string        // lease token for the promote script; "" = no lease
	arrivals string        // channel on which the script announces appended entries; "" = none
	shardArg string        // the payload of those announcements: the shard number
	wake     chan int64    // due times from the wake channel; 0 = lease released
	turn     chan struct{} // the lane's turn to probe its head (see idleProbes)
	owner    atomic.Bool   // whether this mover held the lease at the last call
	// renewed is when (the local clock, before the call was sent, in Unix
	// ns) a promote call last set the lease for this mover; 0 = not known.
	// A call within a third of the lease TTL of it asks the script not to
	// set it again (see promoteArgs).
	renewed atomic.Int64
	// failing: the lane's last promote call failed. Its calls then do not
	// count against the engine's in-flight bound: calls to a failed node
	// can hang for the client's retries and dial timeouts, and must not
	// hold up the lanes of the healthy nodes (a sharded queue's master
	// failing over).
	failing atomic.Bool
	until   atomic.Int64 // due ms the lane sleeps until; noDue while awake or when nothing is due
}

func (m *Engine) newLane(keys stream.Lane) *lane {
	l := &lane{m: m, keys: keys, turn: make(chan struct{}, 1)}
	l.until.Store(noDue) // keep wake-ups that arrive before the lane runs
	return l
}

// owned reports whether this engine promotes the lane now.
func (l *lane) owned() bool {
	return l.m.reg == nil || l.m.reg.owns(l.shard)
}

// awaitOwnership waits until the lane is owned, and reports whether it is
// (false: ctx ended). The registry wakes a lane whose ownership changes.
func (l *lane) awaitOwnership(ctx context.Context) bool {
	l.until.Store(noDue)
	for !l.owned() {
		select {
		case <-ctx.Done():
			return false
		case <-l.wake:
		}
	}
	return true
}

// notify wakes the lane when due is earlier than what it sleeps until, or
// when a lease was released (due 0). It never blocks.
func (l *lane) notify(due int64) {
	if due != 0 && due >= l.until.Load() && l.until.Load() != noDue {
		return
	}
	if due == 0 {
		// A pending due time must not hide a released lease: a standby
		// ignores due times, so replace it (an owner wakes for either).
		select {
		case <-l.wake:
		default:
		}
	}
	select {
	case l.wake <- due:
	default: // a wake-up is already pending
	}
}

// noDue stands for "nothing due": later than any due time.
const noDue = 1<<63 - 1

// resubscribed is the due time notified after a (re)subscription: earlier
// than anything, so an owner or idle lane checks at once; a standby, which
// only wakes for a released lease, ignores it.
const resubscribed = 1

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
	reply, err := scripts.Promote.Run(ctx, l.m.rdb,
		[]string{l.keys.Delayed, l.keys.Envelopes, l.keys.Stream, l.keys.Quarantine, l.keys.Lease},
		l.promoteArgs(renew)...).Result()
	var v []int64
	if err == nil {
		v, err = scripts.Ints(reply)
	}
	if err == nil && len(v) != 5 {
		err = errors.New("unexpected promote reply")
	}
	if err != nil {
		err = scripts.Explain(err)
		if errors.Is(err, context.Canceled) && parent.Err() == nil {
			// Cut by heal.CutIfMoved.
			err = fmt.Errorf("%w: cut once its slot had another master", err)
		}
		heal.After(l.m.rdb, err)
		stuck := persistent(err)
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
		return result{}, &callError{err: err, stuck: stuck}
	}
	r := result{moved: int(v[0]), quarantined: int(v[1]), next: v[2], nowUs: v[3], leaseTTL: v[4], local: time.Now()}
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
	return r, nil
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
	return []stream.KeyType{
		{Key: l.keys.Delayed, Want: "zset"}, {Key: l.keys.Envelopes, Want: "hash"},
		{Key: l.keys.Stream, Want: "stream"}, {Key: l.keys.Quarantine, Want: "stream"},
		{Key: l.keys.Lease, Want: "string"},
	}
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

// Log intervals of a failing lane: its first failure is logged at once,
// then at most one line per interval while it keeps failing.
const (
	transientLogEvery = 30 * time.Second
	stuckLogEvery     = time.Minute
)

// failing tracks a lane's consecutive failed calls, so that a lane that
// keeps failing logs a bounded number of lines and says so differently
// from a passing error.
type failing struct {
	n      int       // consecutive failed calls
	since  time.Time // the first of them
	logged time.Time // the last line logged about them
	stuck  bool      // whether they were reported as a stuck lane
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
	case !stuck && (f.n == 1 || now.Sub(f.logged) >= transientLogEvery):
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

// wait returns how long to sleep after r, and the due ms being waited for.
func (l *lane) wait(r result) (time.Duration, int64) {
	cfg := &l.m.cfg
	if r.leaseTTL >= 0 { // standby: check again when the holder's lease would lapse
		d := time.Duration(r.leaseTTL)*time.Millisecond + time.Duration(1+mrand.IntN(20))*time.Millisecond
		return min(d, cfg.leaseTTL), -1
	}
	if r.moved+r.quarantined >= cfg.batch {
		return 0, r.next // a full batch: more may be due
	}
	if r.next < 0 {
		return cfg.maxIdle, -1
	}
	d := time.Duration(r.next*1000-r.nowUs) * time.Microsecond
	return max(0, min(d, cfg.maxIdle)), r.next
}

func (l *lane) run(ctx context.Context, log *slog.Logger) error {
	log = log.With(slog.String("stream", l.keys.Stream))
	timer := time.NewTimer(time.Duration(mrand.IntN(20)) * time.Millisecond) // stagger movers started together
	defer timer.Stop()
	// Between sleeps every wake-up is kept (until = max): an entry scheduled
	// while a promote call runs may be earlier than the reply's next due.
	l.until.Store(noDue)
	select {
	case <-ctx.Done():
		return nil
	case <-timer.C:
	}
	backoff := 50 * time.Millisecond
	var fails failing
	defer func() { fails.watch.End() }()
	for ctx.Err() == nil {
		if !l.owned() {
			// Another mover promotes this shard: no calls until it is ours.
			if !l.awaitOwnership(ctx) {
				return nil
			}
			continue
		}
		// A wake-up that arrived before this call is answered by it: the
		// call promotes everything due and returns the next due time.
		select {
		case <-l.wake:
		default:
		}
		cctx, cancel := fails.watch.Bound(ctx)
		r, err := l.runOnce(cctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if heal.Suggests(err) {
				// From the master the call failed on: the reload
				// heal.After asked for runs in the background.
				fails.watch.Start(ctx, l.m.rdb, l.keys.Stream, "")
			}
			fails.failed(ctx, log, err, backoff)
			l.failing.Store(true)
			if l.retryAfter(ctx, timer, backoff+time.Duration(mrand.Int64N(int64(backoff/2))), fails.watch.Moved()) {
				fails.watch.End()               // the next failure watches the new master
				backoff = 50 * time.Millisecond // and this retry goes to it now
			} else {
				backoff = min(2*backoff, l.m.cfg.maxIdle)
			}
			continue
		}
		if fails.n > 0 {
			fails.succeeded(ctx, log)
			l.failing.Store(false)
			// Calls failed and work again: if Redis restarted, it may
			// have restarted empty. Check now rather than at the next tick.
			select {
			case l.m.dataPoke <- struct{}{}:
			default:
			}
		}
		backoff = 50 * time.Millisecond
		owner := r.leaseTTL == -1
		standby := r.leaseTTL >= 0
		if l.owner.Swap(owner) != owner && l.m.reg == nil { // a registry's lanes take no lease
			log.DebugContext(ctx, "mover lease changed", slog.Bool("owner", owner))
			if h := l.m.cfg.hooks.OnLease; h != nil {
				h(l.keys.Stream, owner)
			}
		}
		if r.quarantined > 0 {
			log.WarnContext(ctx, "entries quarantined", slog.Int("count", r.quarantined), slog.String("quarantine", l.keys.Quarantine))
		}
		d, until := l.wait(r)
		if d == 0 {
			continue
		}
		if !standby && l.idle(r) {
			l.sleepIdle(ctx, timer, r.next, r.redisAhead(), log)
			continue
		}
		if until < 0 {
			until = noDue
		}
		l.until.Store(until)
		l.sleep(ctx, timer, d, standby)
		l.until.Store(noDue)
	}
	return nil
}

// idle reports whether nothing is due within the max idle after r.
func (l *lane) idle(r result) bool {
	return r.next < 0 || time.Duration(r.next*1000-r.nowUs)*time.Microsecond > l.m.cfg.maxIdle
}

// sleepIdle waits, with nothing due within the max idle, until the lane's
// head entry (due ms; -1 = none) is about to be due, a wake-up announces an
// earlier entry, or a probe finds one. A probe is one ZRANGE of the delayed
// set's head instead of a promote call, taken when the engine's idle probe
// budget gives the lane its turn (see idleProbes): about once per max idle
// for an engine with one idle lane. It only catches a lost wake-up, and
// decides nothing about due-ness (the promote script that follows does).
// The lease is not renewed meanwhile: it lapses, and whichever mover calls
// first when work arrives takes it.
func (l *lane) sleepIdle(ctx context.Context, timer *time.Timer, head int64, redisAhead time.Duration, log *slog.Logger) {
	maxIdle := l.m.cfg.maxIdle
	defer l.until.Store(noDue)
	l.m.probes.enter(l)
	defer l.m.probes.leave(l)
	for ctx.Err() == nil {
		wait := time.Duration(-1) // until a turn or a wake-up
		if head < 0 {
			l.until.Store(noDue)
		} else {
			l.until.Store(head)
			// Local time at which the head is due on the Redis clock.
			left := time.Until(time.UnixMilli(head).Add(-redisAhead))
			if left <= maxIdle {
				l.m.probes.leave(l) // not idle any more
				l.sleep(ctx, timer, max(0, left), false)
				return
			}
			wait = left - maxIdle // then sleep to the head exactly
		}
		switch l.awaitTurn(ctx, timer, wait) {
		case woken:
			return
		case elapsed:
			continue
		}
		if !l.owned() {
			return // the run loop waits until the lane is owned again
		}
		h, err := l.probe(ctx)
		if err != nil {
			heal.After(l.m.rdb, err)
			if ctx.Err() == nil {
				log.DebugContext(ctx, "idle probe failed", slog.Any("err", err))
			}
			return // the promote call reports and backs off
		}
		head = h
	}
}

// What ended an idle lane's wait.
const (
	woken   = iota // a wake-up (or ctx ended)
	elapsed        // the wait's duration
	turned         // the lane's turn to probe
)

// awaitTurn waits for the lane's probe turn, d (d < 0: no limit), a
// wake-up or ctx.
func (l *lane) awaitTurn(ctx context.Context, timer *time.Timer, d time.Duration) int {
	var tc <-chan time.Time
	if d >= 0 {
		timer.Reset(d)
		defer timer.Stop()
		tc = timer.C
	}
	select {
	case <-ctx.Done():
		return woken
	case <-l.wake:
		return woken
	case <-tc:
		return elapsed
	case <-l.turn:
		return turned
	}
}

// probe returns the due ms of the lane's earliest entry, -1 if none.
func (l *lane) probe(ctx context.Context) (int64, error) {
	if !l.failing.Load() {
		release, err := l.m.acquireCall(ctx, heal.MasterOf(ctx, l.m.rdb, l.keys.Delayed))
		if err != nil {
			return -1, err
		}
		defer release()
	}
	ctx, cancel := context.WithTimeout(ctx, l.m.cfg.callLimit)
	defer cancel()
	zs, err := l.m.rdb.ZRangeWithScores(ctx, l.keys.Delayed, 0, 0).Result()
	if err != nil || len(zs) == 0 {
		return -1, err
	}
	return int64(zs[0].Score), nil
}

// sleep waits for d, a wake-up or ctx, and reports whether a wake-up ended
// it. A standby wakes only for a released lease; an owner for an entry due
// before the one it waits for.
func (l *lane) sleep(ctx context.Context, timer *time.Timer, d time.Duration, standby bool) bool {
	timer.Reset(d)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-timer.C:
			return false
		case due := <-l.wake:
			if !standby || due == 0 {
				return true
			}
		}
	}
}

// retryAfter sleeps d after a failed call, or less: until a wake-up
// arrives or moved is closed (the lane's slot has another master). It
// reports whether moved was.
func (l *lane) retryAfter(ctx context.Context, timer *time.Timer, d time.Duration, moved <-chan struct{}) bool {
	timer.Reset(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
	case <-timer.C:
	case <-l.wake:
	case <-moved:
		return true
	}
	return false
}

// release gives up the lane's lease if this mover holds it.
func (l *lane) release(ctx context.Context) {
	if l.token == "" || !l.owner.Load() {
		return
	}
	err := scripts.Release.Run(ctx, l.m.rdb, []string{l.keys.Lease}, l.token, scripts.Channel(l.keys.Wake, l.keys.Sharded)).Err()
	if err != nil {
		l.m.cfg.logger.WarnContext(ctx, "releasing mover lease failed", slog.String("stream", l.keys.Stream), slog.Any("err", err))
	}
	l.owner.Store(false)
	l.renewed.Store(0)
}

// Prefix returns the key prefix the Engine was built with.
func (m *Engine) Prefix() string { return m.cfg.prefix }

// Shards returns the shard count the Engine was built with (see [WithShards]).
func (m *Engine) Shards() int { return m.cfg.shards }
