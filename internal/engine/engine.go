package engine

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/delaystream/delaystream/internal/errs"
	"github.com/delaystream/delaystream/internal/history"
	"github.com/delaystream/delaystream/internal/optcheck"
	"github.com/delaystream/delaystream/internal/runctx"
	"github.com/delaystream/delaystream/internal/scripts"
	"github.com/delaystream/delaystream/internal/shards"
	"github.com/delaystream/delaystream/internal/shardsub"
	"github.com/delaystream/delaystream/internal/stream"
)

// callTimeout bounds one promote call, so a hung connection cannot stall a lane.
const callTimeout = 5 * time.Second

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

	taker    atomic.Pointer[takerRef] // the consumer that takes part in promote calls (Join)
	takersMu sync.Mutex
	takers   []Taker // joined, in order; takers[0] is the one set

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
		return nil, errs.Invalid(err)
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
		if cfg.retryOf == "" && !cfg.noHistory {
			l.history = history.NewKeys(layout.Shard(i), l.promoteKeys...)
		}
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
	// A deadline on ctx ends the run like a cancellation (see package
	// runctx): a failure it causes is not logged as one of Redis.
	ctx, release := runctx.WithoutDeadline(ctx)
	defer release()
	log := m.cfg.logger.With(slog.String("queue", m.queue))
	if err := m.checkShards(ctx, log); err != nil || ctx.Err() != nil {
		return err
	}
	log.DebugContext(ctx, "mover started", slog.Int("lanes", len(m.lanes)))
	err := m.runLoops(ctx, log)
	m.leave(ctx)
	log.DebugContext(ctx, "mover stopped")
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// runLoops runs the engine's loops (its subscriptions, the idle probes'
// turns, the data check of a main lane's engine, the registry and one loop
// per lane) until ctx ends or one of them fails, and returns the first
// failure.
func (m *Engine) runLoops(ctx context.Context, log *slog.Logger) error {
	router := m.newWakeRouter()
	g, gctx := errgroup.WithContext(ctx)
	router.subscribe(gctx, g, log)
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
	return g.Wait()
}

// leave ends a Run: it releases the lanes' leases and leaves the registry
// (unless noLeave is set), within 1 s of ctx ending, or reports that the
// engine no longer looks at its lanes.
func (m *Engine) leave(ctx context.Context) {
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
}

// wakeRouter routes the messages of an engine's pub/sub channels: a
// message on a wake channel wakes its lane; one on the movers channel
// makes the registry beat.
type wakeRouter struct {
	m       *Engine
	byChan  map[string]*lane // lanes by wake channel
	classic []string         // classic channels
	groups  [][]string       // shard channels, one slot per group
}

// newWakeRouter gives every lane its wake channel and lists the channels
// to subscribe to.
func (m *Engine) newWakeRouter() *wakeRouter {
	w := &wakeRouter{m: m, byChan: make(map[string]*lane, len(m.lanes))}
	for _, l := range m.lanes {
		if l.keys.Sharded {
			w.groups = append(w.groups, []string{l.keys.Wake})
		} else {
			w.classic = append(w.classic, l.keys.Wake)
		}
		w.byChan[l.keys.Wake] = l
		l.wake = make(chan int64, 1)
	}
	if m.reg != nil {
		w.classic = append(w.classic, m.reg.channel)
	}
	return w
}

// subscribe starts, in g, the subscriptions to the router's channels.
func (w *wakeRouter) subscribe(ctx context.Context, g *errgroup.Group, log *slog.Logger) {
	if len(w.groups) > 0 {
		w.keep(ctx, g, w.groups, false, log) // a sharded queue's wake channels
	}
	if len(w.classic) > 0 {
		// An unsharded lane's wake channel and the movers channel: on a
		// Cluster a classic PUBLISH reaches every node, so any will do.
		w.keep(ctx, g, [][]string{w.classic}, true, log)
	}
}

// keep keeps, in g, a subscription to groups (classic channels: one
// group; shard channels: one group per slot, one connection per node)
// through shardsub, which rebuilds it after a failure with a jittered
// backoff (go-redis's own channel retries every 100 ms while the server
// is down) and pings it after 30 s of silence: a lost wake-up costs at
// most a lane's idle probe period, so a slow health check keeps the
// idle cost low. After every (re)subscription the lanes look, and the
// registry beats, at once: what was published meanwhile is lost.
func (w *wakeRouter) keep(ctx context.Context, g *errgroup.Group, groups [][]string, classic bool, log *slog.Logger) {
	g.Go(func() error {
		return shardsub.Run(ctx, w.m.rdb, shardsub.Config{
			Groups: groups, Classic: classic, OnMessage: w.message,
			OnReset: func() { w.reset(groups) },
			Health:  30 * time.Second,
			Logger:  log,
		})
	})
}

// message handles a message on channel ch.
func (w *wakeRouter) message(ch, payload string) {
	if w.m.reg != nil && ch == w.m.reg.channel {
		if payload != w.m.token { // not our own announcement
			w.m.reg.announced()
		}
		return
	}
	if l := w.byChan[ch]; l != nil {
		if due, err := strconv.ParseInt(payload, 10, 64); err == nil {
			l.notify(due)
		}
	}
}

// reset wakes the lanes, and makes the registry beat, whose channels are
// in groups: messages on them may have been lost.
func (w *wakeRouter) reset(groups [][]string) {
	for _, grp := range groups {
		for _, ch := range grp {
			if w.m.reg != nil && ch == w.m.reg.channel {
				w.m.reg.announced()
			} else if l := w.byChan[ch]; l != nil {
				l.notify(resubscribed)
			}
		}
	}
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

// Prefix returns the key prefix the Engine was built with.
func (m *Engine) Prefix() string { return m.cfg.prefix }

// Shards returns the shard count the Engine was built with (see [WithShards]).
func (m *Engine) Shards() int { return m.cfg.shards }
