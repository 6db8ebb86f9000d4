package integration

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/internal/delay"
	"github.com/delaystream/delaystream/internal/group"
	"github.com/delaystream/delaystream/internal/margin"
	"github.com/delaystream/delaystream/internal/mover"
	"github.com/delaystream/delaystream/internal/redistest"
	"github.com/delaystream/delaystream/internal/stream"
)

// The failover tests each start a Redis Cluster of 3 masters and 3
// replicas of their own (cluster-node-timeout 1 s), fail one master over
// and measure what the library does: how long until the replica is
// promoted, how long until delivery from the failed master's shards
// resumes, what is lost and what is delivered twice. The client is a
// ClusterClient with go-redis defaults (MaxRedirects 8): no tuned state
// reload, so the library's own reaction to failed calls (internal/heal)
// is what gets the client to the new master. They hold heavy.Lock: one
// at a time, and no timing test beside them.

// foCluster starts the cluster for t alone and a client of it, both
// stopped when t ends, once every replica's link to its master is up.
func foCluster(t *testing.T) (*redistest.Cluster, *redis.ClusterClient) {
	t.Helper()
	start := time.Now()
	c, err := redistest.SpawnCluster(3, 1)
	require.NoError(t, err)
	t.Cleanup(c.Stop)
	// In sync: each replica's link is up, and its master has it online (a
	// replica that has just loaded its copy is online, and counted by
	// WAIT, once the master got its first acknowledgement).
	deadline := time.Now().Add(10 * time.Second)
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		linked, online := 0, 0
		for _, a := range c.Addrs {
			info := foInfo(t, a)
			if strings.Contains(info, "role:slave") && strings.Contains(info, "master_link_status:up") {
				linked++
			}
			online += strings.Count(info, ",state=online,")
		}
		assert.Equal(ct, 3, linked, "replicas linked")
		assert.Equal(ct, 3, online, "replicas online")
	}, time.Until(deadline), 20*time.Millisecond, "the replicas in sync within 10s")
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs, MaxRedirects: 8, TLSConfig: c.TLSConfig()})
	t.Cleanup(func() { _ = rdb.Close() })
	// Even then, a fresh replica may not confirm the very first write for
	// a few hundred ms: on each master, write and WAIT until it confirms.
	ctx := context.Background()
	probed := map[string]bool{}
	for i := 0; len(probed) < 3; i++ {
		require.Less(t, i, 1000, "no probe key for every master")
		key := fmt.Sprintf("probe{%d}", i)
		node, err := rdb.MasterForKey(ctx, key)
		require.NoError(t, err)
		if probed[node.Options().Addr] {
			continue
		}
		probed[node.Options().Addr] = true
		for {
			var wait *redis.IntCmd
			_, err := node.Pipelined(ctx, func(p redis.Pipeliner) error {
				p.Set(ctx, key, "x", 0)
				wait = redis.NewIntCmd(ctx, "wait", 1, 100)
				return p.Process(ctx, wait)
			})
			if err == nil && wait.Val() == 1 {
				break
			}
			require.True(t, time.Now().Before(deadline), "the replica of %s does not confirm writes after 10s: %v", node.Options().Addr, err)
		}
	}
	t.Logf("cluster of 3 masters + 3 replicas, replicas in sync, in %s", time.Since(start).Round(time.Millisecond))
	return c, rdb
}

// foInfo returns INFO replication of the node at addr ("" if it does not
// answer within 500 ms).
func foInfo(t *testing.T, addr string) string {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 200 * time.Millisecond, MaxRetries: -1, TLSConfig: redistest.TLSConfig(t)})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	info, _ := c.Info(ctx, "replication").Result()
	return info
}

// foReplicaOf returns the address of the replica of master.
func foReplicaOf(t *testing.T, c *redistest.Cluster, master string) string {
	t.Helper()
	_, port, err := net.SplitHostPort(master)
	require.NoError(t, err)
	for _, a := range c.Addrs {
		if info := foInfo(t, a); strings.Contains(info, "role:slave") && strings.Contains(info, "master_port:"+port+"\r\n") {
			return a
		}
	}
	t.Fatalf("no replica of %s", master)
	return ""
}

// foServer returns the process of the node at addr.
func foServer(t *testing.T, c *redistest.Cluster, addr string) *redistest.Server {
	t.Helper()
	for _, s := range c.Servers() {
		if s.Addr == addr {
			return s
		}
	}
	t.Fatalf("no server at %s", addr)
	return nil
}

// foWaitMaster polls ROLE on the node at addr every 5 ms until it is a
// master and returns when it saw that, failing t after limit.
func foWaitMaster(t *testing.T, addr string, limit time.Duration) time.Time {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 200 * time.Millisecond, MaxRetries: -1, TLSConfig: redistest.TLSConfig(t)})
	defer c.Close()
	var seen time.Time
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		role, err := c.Do(ctx, "ROLE").Slice()
		cancel()
		if assert.NoError(ct, err, "ROLE") && assert.NotEmpty(ct, role) && assert.Equal(ct, "master", role[0], "ROLE") {
			seen = time.Now()
		}
	}, limit, 5*time.Millisecond, "%s promoted within %s", addr, limit)
	return seen
}

// foLog records what the mover and consumers log, to tell afterwards which
// loop kept failing and until when.
type foLog struct {
	mu      sync.Mutex
	records []foRecord
}

type foRecord struct {
	at       time.Time
	level    slog.Level
	msg, err string
}

func (l *foLog) logger() *slog.Logger { return slog.New(&foLogHandler{l: l}) }

type foLogHandler struct {
	l     *foLog
	attrs []slog.Attr
}

func (h *foLogHandler) Enabled(_ context.Context, lv slog.Level) bool { return lv >= slog.LevelInfo }
func (h *foLogHandler) Handle(_ context.Context, r slog.Record) error {
	rec := foRecord{at: r.Time, level: r.Level, msg: r.Message}
	for _, a := range h.attrs {
		if a.Key != "err" {
			rec.msg += " " + a.String()
		}
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "err" {
			rec.err = a.Value.String()
		}
		return true
	})
	h.l.mu.Lock()
	h.l.records = append(h.l.records, rec)
	h.l.mu.Unlock()
	return nil
}
func (h *foLogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &foLogHandler{l: h.l, attrs: append(slices.Clone(h.attrs), as...)}
}
func (h *foLogHandler) WithGroup(string) slog.Handler { return h }

// summary lists, per message logged, how often, the first and last time
// relative to zero, and the last error.
func (l *foLog) summary(zero time.Time) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	type agg struct {
		n           int
		first, last time.Time
		err         string
	}
	by := map[string]*agg{}
	var keys []string
	for _, r := range l.records {
		a := by[r.msg]
		if a == nil {
			a = &agg{first: r.at}
			by[r.msg] = a
			keys = append(keys, r.msg)
		}
		a.n++
		a.last, a.err = r.at, r.err
	}
	if len(keys) == 0 {
		return "  (nothing logged at Info or above)"
	}
	var b strings.Builder
	for _, k := range keys {
		a := by[k]
		fmt.Fprintf(&b, "  %q x%d, from %+.3fs to %+.3fs; last err: %s\n", k, a.n,
			a.first.Sub(zero).Seconds(), a.last.Sub(zero).Seconds(), a.err)
	}
	return b.String()
}

// foDeliveries records every handler call: the time of each id's first
// delivery and how many times each id was delivered.
type foDeliveries struct {
	mu     sync.Mutex
	first  map[string]time.Time
	added  map[string]time.Time // when the first delivered entry was appended (its stream id, Redis clock)
	count  map[string]int
	target int
	done   chan struct{}
}

func newFoDeliveries(target int) *foDeliveries {
	return &foDeliveries{first: map[string]time.Time{}, added: map[string]time.Time{}, count: map[string]int{}, target: target, done: make(chan struct{})}
}

func (d *foDeliveries) handle(_ context.Context, m *group.Message) error {
	now := time.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.count[m.ID] == 0 {
		d.first[m.ID] = now
		ms, _, _ := strings.Cut(m.EntryID, "-")
		if v, err := strconv.ParseInt(ms, 10, 64); err == nil {
			d.added[m.ID] = time.UnixMilli(v)
		}
		if len(d.first) == d.target {
			close(d.done)
		}
	}
	d.count[m.ID]++
	return nil
}

func (d *foDeliveries) distinct() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.first)
}

// foRun runs part until t ends; the cleanup cancels it and checks that it
// returned nil within 15 s.
func foRun(t *testing.T, name string, run func(context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err, "%s: Run", name)
		case <-time.After(15 * time.Second):
			t.Errorf("%s: Run did not return within 15s of cancel", name)
		}
	})
}

// foScenario is one failover under load: n messages due evenly over
// spread, one mover and two consumers of one group, and the master of
// shard 0 failed over failAfter after scheduling, by SIGKILL or by CLUSTER
// FAILOVER on its replica.
type foScenario struct {
	shards    int
	n         int
	spread    time.Duration
	failAfter time.Duration
	manual    bool
	// held: the replica may not fail over by itself; it is promoted by
	// CLUSTER FAILOVER FORCE this long after the SIGKILL, once every
	// retry backoff has reached its cap.
	held time.Duration
	// within bounds the time from the promotion to the first delivery
	// from the failed shards (2 s if zero).
	within time.Duration
}

func (sc foScenario) run(t *testing.T) {
	c, rdb := foCluster(t)
	ctx := context.Background()
	if sc.shards > 1 {
		// The healthy masters keep serving their slots while one is down
		// (by default a cluster refuses every command, CLUSTERDOWN, from
		// marking a master failed until its replica is promoted): what
		// the other shards' lateness shows is then the library's.
		for _, a := range c.Addrs {
			n := redis.NewClient(redistest.Options(t, a))
			require.NoError(t, n.ConfigSet(ctx, "cluster-require-full-coverage", "no").Err())
			_ = n.Close()
		}
	}
	prefix := redistest.Prefix(t)
	const queue = "failover"
	logs := &foLog{}
	log := logs.logger()

	layout, err := stream.NewLayout(prefix, queue, sc.shards)
	require.NoError(t, err)
	master, err := rdb.MasterForKey(ctx, layout.Shard(0).Main().Delayed)
	require.NoError(t, err)
	victim := master.Options().Addr
	replica := foReplicaOf(t, c, victim)
	failed := map[int]bool{} // the shards on the failed master
	for s := range sc.shards {
		m, err := rdb.MasterForKey(ctx, layout.Shard(s).Main().Delayed)
		require.NoError(t, err)
		if m.Options().Addr == victim {
			failed[s] = true
		}
	}

	q, err := delay.New(rdb, queue, delay.WithPrefix(prefix), delay.WithShards(sc.shards))
	require.NoError(t, err)
	failedLanes := map[string]bool{}
	for s := range failed {
		failedLanes[layout.Shard(s).Main().Stream] = true
	}
	var (
		moverErrs atomic.Int64
		promMu    sync.Mutex
		promotes  []time.Time // promote calls that moved entries of a failed shard's main lane
	)
	mv, err := mover.New(rdb, queue, mover.WithPrefix(prefix), mover.WithShards(sc.shards), mover.WithLogger(log),
		mover.WithHooks(mover.Hooks{
			OnError: func(string, error, bool) { moverErrs.Add(1) },
			OnPromote: func(lane string, moved, _ int, _ time.Duration) {
				if moved > 0 && failedLanes[lane] {
					now := time.Now()
					promMu.Lock()
					promotes = append(promotes, now)
					promMu.Unlock()
				}
			},
		}))
	require.NoError(t, err)
	rec := newFoDeliveries(sc.n)
	var consumers []*group.Consumer
	for _, name := range []string{"c1", "c2"} {
		cs, err := group.New(rdb, queue, "g", rec.handle, group.WithPrefix(prefix), group.WithShards(sc.shards),
			group.WithConsumerName(name), group.WithLogger(log.With("consumer", name)), group.WithDrainTimeout(time.Second),
			group.WithoutPromotion()) // the test's movers promote
		require.NoError(t, err)
		consumers = append(consumers, cs)
	}
	foRun(t, "mover", mv.Run)
	for i, cs := range consumers {
		foRun(t, fmt.Sprintf("consumer c%d", i+1), cs.Run)
	}

	items := make([]delay.Item, sc.n)
	for i := range items {
		items[i] = delay.Item{
			Message: delay.Message{ID: fmt.Sprintf("m%05d", i), Payload: []byte("x")},
			When:    delay.After(200*time.Millisecond + time.Duration(i)*sc.spread/time.Duration(sc.n)),
		}
	}
	scheduled := time.Now()
	res, err := q.ScheduleBatch(ctx, items)
	require.NoError(t, err)
	due := make(map[string]time.Time, sc.n)
	onFailed := 0
	for _, r := range res {
		require.Equal(t, delay.Created, r.Outcome)
		due[r.ID] = r.Due
		if failed[layout.ShardOf(r.ID)] {
			onFailed++
		}
	}
	lastDue := res[len(res)-1].Due
	t.Logf("%d messages over %d shard(s) scheduled in %s, due over %s; %d of them in shards %v on master %s (replica %s)",
		sc.n, sc.shards, time.Since(scheduled).Round(time.Millisecond), sc.spread, onFailed, foKeys(failed), victim, replica)

	var rc *redis.Client // the replica
	if sc.held > 0 {
		rc = redis.NewClient(redistest.Options(t, replica))
		defer rc.Close()
		require.NoError(t, rc.ConfigSet(ctx, "cluster-replica-no-failover", "yes").Err())
	}
	waitUntil(scheduled.Add(sc.failAfter))
	var since time.Time
	if sc.manual {
		rc := redis.NewClient(redistest.Options(t, replica))
		since = time.Now()
		require.NoError(t, rc.ClusterFailover(ctx).Err())
		_ = rc.Close()
	} else {
		srv := foServer(t, c, victim)
		since = time.Now()
		srv.Stop() // SIGKILL (of its process group), then wait for it
	}
	if sc.held > 0 {
		// The subject: the cluster stays without a master for this long, so
		// that every retry loop backs off to its cap; no event marks that
		// (each loop's backoff is its own, and unobserved).
		time.Sleep(sc.held)
		require.NoError(t, rc.Do(ctx, "CLUSTER", "FAILOVER", "FORCE").Err())
	}
	promoted := foWaitMaster(t, replica, 15*time.Second)
	delivered := rec.distinct()

	select {
	case <-rec.done:
	case <-time.After(time.Until(lastDue.Add(10 * time.Second))):
	}

	rec.mu.Lock()
	var resumed time.Time // first delivery after the promotion of a failed shard's message due after the failure
	dups := 0
	var missing []string
	var missingFailed int
	var healthyLate, healthyPromote, healthyRead []time.Duration // lateness of the other shards' messages due during the failover, and its split
	for id, d := range due {
		n := rec.count[id]
		if n == 0 {
			missing = append(missing, id)
			if failed[layout.ShardOf(id)] {
				missingFailed++
			}
			continue
		}
		dups += n - 1
		at := rec.first[id]
		if !failed[layout.ShardOf(id)] {
			if d.After(since) && d.Before(promoted) {
				healthyLate = append(healthyLate, at.Sub(d))
				if added, ok := rec.added[id]; ok {
					healthyPromote = append(healthyPromote, added.Sub(d))
					healthyRead = append(healthyRead, at.Sub(added))
				}
			}
			continue
		}
		if d.After(since) && !at.Before(promoted) && (resumed.IsZero() || at.Before(resumed)) {
			resumed = at
		}
	}
	rec.mu.Unlock()
	sort.Strings(missing)
	var promotedAgain time.Time // the mover's first promotion from a failed shard after the replica's
	promMu.Lock()
	for _, at := range promotes {
		if !at.Before(promoted) {
			promotedAgain = at
			break
		}
	}
	promMu.Unlock()

	how := "SIGKILL"
	if sc.manual {
		how = "CLUSTER FAILOVER"
	}
	t.Logf("%s of master %s at %+.3fs; %d of %d delivered by then; replica promoted %s after it",
		how, victim, since.Sub(scheduled).Seconds(), delivered, sc.n, promoted.Sub(since).Round(time.Millisecond))
	if resumed.IsZero() {
		t.Logf("delivery from the failed master's shards did NOT resume within %s of the last due time", 10*time.Second)
	} else {
		t.Logf("delivery from the failed master's shards resumed %s after the promotion (%s after the %s); the mover promoted from them again %s after the promotion",
			resumed.Sub(promoted).Round(time.Millisecond), resumed.Sub(since).Round(time.Millisecond), how,
			promotedAgain.Sub(promoted).Round(time.Millisecond))
	}
	if sc.shards > 1 {
		onVictim := func(key string) bool {
			m, err := rdb.MasterForKey(ctx, key)
			return err == nil && m.Options().Addr == replica // the slot map is the new one by now
		}
		t.Logf("healthy shards' messages due between the failure and the promotion: lateness %s; the movers' registry %s on the failed master",
			distOf(healthyLate), map[bool]string{true: "was", false: "was not"}[onVictim(layout.Movers())])
		t.Logf("  split: due -> appended %s; appended -> handler %s", distOf(healthyPromote), distOf(healthyRead))
		// Neither the mover's calls nor the consumers' reads on the failed
		// master may hold up the other shards' (the reads did for up to
		// 3 s while go-redis went on dialing the dead node).
		for what, ds := range map[string][]time.Duration{"promoted": healthyPromote, "read": healthyRead} {
			if d := distOf(ds); d.N > 0 {
				margin.Less(t, "healthy shards "+what+" p99", d.P99, 500*time.Millisecond, "the healthy shards' entries are %s while a master is down", what)
			}
		}
	}
	t.Logf("lost (never delivered): %d (%d of them in the failed shards); duplicates: %d; mover counters %+v (%d errors reported)",
		len(missing), missingFailed, dups, mv.Counters(), moverErrs.Load())
	for i, cs := range consumers {
		t.Logf("consumer c%d counters %+v", i+1, cs.Counters())
	}
	t.Logf("logged at Info or above (seconds relative to the promotion):\n%s", logs.summary(promoted))
	if len(missing) > 0 {
		waiting, err := q.Len(ctx)
		t.Logf("still waiting in the delayed sets: %d (%v); first missing: %v", waiting, err, missing[:min(10, len(missing))])
	}

	assert.Empty(t, missing, "every scheduled message is delivered")
	require.False(t, resumed.IsZero(), "delivery from the failed master's shards resumed")
	within := cmp.Or(sc.within, 2*time.Second)
	assert.Less(t, resumed.Sub(promoted), within, "delivery resumes within %s of the promotion", within)
}

func foKeys(m map[int]bool) []int {
	var out []int
	for k := range m {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}

// TestMasterKilledDeliveryResumes SIGKILLs the master that holds the
// queue's slot (for 8 shards, the master of shard 0 and of the shards it
// shares) 4 s into 20k messages due over 12 s: every message is still
// delivered, and delivery from the failed master's shards resumes within
// 2 s of its replica's promotion. With 8 shards the failed master also
// holds the queue-wide keys (the movers' registry, the arrivals channel's
// slot): the test logs how late the other masters' shards were meanwhile.
func TestMasterKilledDeliveryResumes(t *testing.T) {
	t.Parallel()
	heavy.Lock()
	defer heavy.Unlock()
	for _, shards := range []int{1, 8} {
		t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) {
			foScenario{shards: shards, n: 20000, spread: 12 * time.Second, failAfter: 4 * time.Second}.run(t)
		})
	}
}

// TestFailoverHeldBack SIGKILLs the queue's master 2 s into 6k messages
// due over 14 s, and keeps its replica from failing over for 6 s: by then
// every loop that retries (the mover's promote calls, the consumers' reads,
// their subscriptions) has backed off to its cap (1 to 5 s). Each follows
// the slot to the promoted replica rather than waiting its backoff out:
// delivery from the failed shard resumes within 1 s of the promotion.
func TestFailoverHeldBack(t *testing.T) {
	t.Parallel()
	heavy.Lock()
	defer heavy.Unlock()
	foScenario{shards: 1, n: 6000, spread: 14 * time.Second, failAfter: 2 * time.Second,
		held: 6 * time.Second, within: time.Second}.run(t)
}

// TestManualFailover fails the queue's master over gracefully (CLUSTER
// FAILOVER on its replica) 2 s into 5k messages due over 6 s: nothing is
// lost, and delivery resumes within 2 s of the promotion.
func TestManualFailover(t *testing.T) {
	t.Parallel()
	heavy.Lock()
	defer heavy.Unlock()
	foScenario{shards: 1, n: 5000, spread: 6 * time.Second, failAfter: 2 * time.Second, manual: true}.run(t)
}

// TestFailoverLossDurable schedules continuously (single Schedule calls
// from 16 goroutines per producer, caller ids) with two producers whose
// queues live on the same master, one plain and one WithReplicaAck(1,
// 100ms), and SIGKILLs that master. Afterwards it counts the ids whose
// Schedule returned nil and that are missing from the promoted replica.
// The plain producer may lose some (logged, not asserted: asynchronous
// replication); the durable one loses none. It logs the cost of the
// durable mode: Schedule latency of both producers in the same run, alone
// and under load.
//
// On loopback a replica lags the master by microseconds, so the plain
// producer rarely loses anything when the master dies. The second case
// stalls the replica (SIGSTOP, as a stalled host or a saturated link
// would) before the kill, until the master has acknowledged 10k plain
// writes its replica never gets: then the plain producer loses writes,
// and the durable one still none (its calls in that time return
// ErrNotReplicated).
func TestFailoverLossDurable(t *testing.T) {
	t.Parallel()
	heavy.Lock()
	defer heavy.Unlock()
	t.Run("replica in sync", func(t *testing.T) { foLoss(t, false) })
	t.Run("replica stalled", func(t *testing.T) { foLoss(t, true) })
}

// foPid returns the process id of the server at addr (INFO server).
func foPid(t *testing.T, addr string) int {
	t.Helper()
	c := redis.NewClient(redistest.Options(t, addr))
	defer c.Close()
	info, err := c.Info(context.Background(), "server").Result()
	require.NoError(t, err)
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "process_id:"); ok {
			pid, err := strconv.Atoi(v)
			require.NoError(t, err)
			return pid
		}
	}
	t.Fatalf("no process_id in INFO server of %s", addr)
	return 0
}

// The load of foLoss: calls per producer without load (one caller), then
// under load before the disturbance, and plain writes the master
// acknowledges while the replica is stalled.
const (
	foQuiet       = 400
	foUnderLoad   = 5000
	foStallWrites = 10000
)

func foLoss(t *testing.T, stalled bool) {
	c, rdb := foCluster(t)
	ctx := context.Background()
	base := redistest.Prefix(t)
	const (
		queue   = "loss" // the hash tag: both prefixes' keys share its slot
		workers = 16
	)
	type producer struct {
		name    string
		q       *delay.Queue
		key     string // the delayed set
		mu      sync.Mutex
		acked   []string        // ids whose Schedule returned nil
		lat     []time.Duration // latency of those calls made before the disturbance
		notRepl atomic.Int64    // calls that returned ErrNotReplicated
		failed  atomic.Int64    // calls that returned another error
	}
	var prods []*producer
	for _, mode := range []string{"plain", "durable"} {
		opts := []delay.Option{delay.WithPrefix(base + mode)}
		if mode == "durable" {
			opts = append(opts, delay.WithReplicaAck(1, 100*time.Millisecond))
		}
		q, err := delay.New(rdb, queue, opts...)
		require.NoError(t, err)
		prods = append(prods, &producer{name: mode, q: q, key: q.Keys().Main().Delayed})
	}
	master, err := rdb.MasterForKey(ctx, prods[0].key)
	require.NoError(t, err)
	victim := master.Options().Addr
	other, err := rdb.MasterForKey(ctx, prods[1].key)
	require.NoError(t, err)
	require.Equal(t, victim, other.Options().Addr, "both queues on one master")
	replica := foReplicaOf(t, c, victim)

	// The cost of the durable mode without load: one goroutine, the two
	// producers taking turns (these messages are checked for loss too).
	quiet := make([][]time.Duration, len(prods))
	for i := range foQuiet {
		for k, p := range prods {
			id := fmt.Sprintf("%s-quiet-%04d", p.name, i)
			start := time.Now()
			_, err := p.q.Schedule(ctx, delay.Message{ID: id, Payload: []byte("x")}, delay.After(time.Hour))
			quiet[k] = append(quiet[k], time.Since(start))
			require.NoError(t, err)
			p.acked = append(p.acked, id)
		}
	}
	for k, p := range prods {
		t.Logf("%-7s: single Schedule latency, one caller, no load: %s", p.name, distOf(quiet[k]))
	}

	var disturbed atomic.Pointer[time.Time] // the stall, or else the kill
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, p := range prods {
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := 0; ; n++ {
					select {
					case <-stop:
						return
					default:
					}
					id := fmt.Sprintf("%s-%02d-%06d", p.name, w, n)
					cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
					start := time.Now()
					_, err := p.q.Schedule(cctx, delay.Message{ID: id, Payload: []byte("x")}, delay.After(time.Hour))
					took := time.Since(start)
					cancel()
					switch {
					case err == nil:
						p.mu.Lock()
						p.acked = append(p.acked, id)
						if d := disturbed.Load(); d == nil || time.Now().Before(*d) {
							p.lat = append(p.lat, took)
						}
						p.mu.Unlock()
					case errors.Is(err, delay.ErrNotReplicated):
						p.notRepl.Add(1)
					default:
						p.failed.Add(1)
					}
				}
			}()
		}
	}
	var pid int
	if stalled {
		pid = foPid(t, replica)
	}
	stopped := false
	t.Cleanup(func() { // also if a require below fails
		if stopped {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	})
	acked := func(p *producer) int {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.acked)
	}

	// The load before the disturbance: enough calls acknowledged under load
	// for a latency figure and for the loss check.
	require.Eventually(t, func() bool {
		return acked(prods[0]) >= foQuiet+foUnderLoad && acked(prods[1]) >= foQuiet+foUnderLoad
	}, 30*time.Second, 5*time.Millisecond, "%d calls of each producer acknowledged under load", foUnderLoad)
	now := time.Now()
	disturbed.Store(&now)
	before := map[string]int{}
	for _, p := range prods {
		before[p.name] = acked(p)
	}
	if stalled {
		notRepl := prods[1].notRepl.Load()
		require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
		stopped = true
		// The master takes writes its replica does not get: plain ones it
		// acknowledges, and durable ones it refuses once the replica's
		// acknowledgement is overdue, twice per caller at least.
		require.Eventually(t, func() bool {
			return acked(prods[0]) >= before["plain"]+foStallWrites && prods[1].notRepl.Load() >= notRepl+2*workers
		}, 30*time.Second, 5*time.Millisecond, "%d plain writes acknowledged, and 2 durable ones per caller refused, while the replica is stalled", foStallWrites)
	}
	atKill := map[string]int{}
	for _, p := range prods {
		atKill[p.name] = acked(p)
	}
	srv := foServer(t, c, victim)
	at := time.Now()
	srv.Stop() // SIGKILL
	if stopped {
		require.NoError(t, syscall.Kill(pid, syscall.SIGCONT))
		stopped = false
	}
	promoted := foWaitMaster(t, replica, 15*time.Second)
	// Go on until plain writes succeed on the new master again (the old one
	// is dead: what is acknowledged from now on, the new one acknowledged).
	atPromotion := acked(prods[0])
	require.Eventually(t, func() bool { return acked(prods[0]) >= atPromotion+100 }, 10*time.Second, 5*time.Millisecond,
		"plain writes resume within 10s of the promotion")
	close(stop)
	wg.Wait()
	if stalled {
		t.Logf("replica %s stalled (SIGSTOP) for %s after %d calls per producer under load, then master %s SIGKILLed and the replica resumed; promoted %s after the kill",
			replica, at.Sub(now).Round(time.Millisecond), foUnderLoad, victim, promoted.Sub(at).Round(time.Millisecond))
	} else {
		t.Logf("master %s SIGKILLed after %d calls per producer under load; replica %s promoted %s later", victim, foUnderLoad, replica, promoted.Sub(at).Round(time.Millisecond))
	}

	for _, p := range prods {
		var lost []string
		for i := 0; i < len(p.acked); i += 1000 {
			ids := p.acked[i:min(i+1000, len(p.acked))]
			scores, err := rdb.ZMScore(ctx, p.key, ids...).Result()
			require.NoError(t, err)
			for k, s := range scores {
				if s == 0 { // go-redis reads a nil reply (no such member) as 0; due times are never 0
					lost = append(lost, ids[k])
				}
			}
		}
		waiting, err := rdb.ZCard(ctx, p.key).Result()
		require.NoError(t, err)
		p.mu.Lock()
		t.Logf("%-7s: %d Schedule calls returned nil (%d before the disturbance, %d at the kill), %d of them lost; %d returned ErrNotReplicated, %d other errors; %d waiting now; latency under load (32 callers) before the disturbance %s",
			p.name, len(p.acked), before[p.name], atKill[p.name], len(lost), p.notRepl.Load(), p.failed.Load(), waiting, distOf(p.lat))
		p.mu.Unlock()
		if len(lost) > 0 {
			t.Logf("%-7s: lost ids (first 5): %v", p.name, lost[:min(5, len(lost))])
		}
		if p.name == "durable" {
			assert.Empty(t, lost, "no acknowledged durable write is lost")
			assert.Positive(t, len(p.acked), "durable writes were acknowledged")
		}
	}
}
