package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream/internal/delay"
	"github.com/delaystream/delaystream/internal/group"
	"github.com/delaystream/delaystream/internal/mover"
	"github.com/delaystream/delaystream/internal/redistest"
	"github.com/delaystream/delaystream/internal/stream"
)

// The cluster scenario: the same queue unsharded (S=1) and over 16 shards
// (S=16) on a Redis Cluster of 3 masters, each with 1 mover + 1 consumer
// and with 2 movers + 2 consumers, burst and trickle, with Redis CPU and
// commands summed over the masters, each master's share of the commands,
// and the bench client's connections per master.

const (
	clusterMasters    = 3
	clusterClientName = "dsbench" // CLIENT SETNAME of every connection of the systems' client
)

// clusterSpec is one deployment of the queue the cluster scenario runs: its
// shard count and how many movers and consumers serve it.
type clusterSpec struct {
	shards, movers, consumers int
}

// name is the system's name in the table and the JSON lines, e.g. "S=16 2+2".
func (s clusterSpec) name() string {
	return fmt.Sprintf("S=%d %s", s.shards, s.team())
}

// team is "<movers>+<consumers>".
func (s clusterSpec) team() string { return fmt.Sprintf("%d+%d", s.movers, s.consumers) }

// describe says what runs, for the table's header.
func (s clusterSpec) describe() string {
	q := "unsharded"
	if s.shards > 1 {
		q = fmt.Sprintf("%d shards", s.shards)
	}
	mv := "1 mover"
	switch {
	case s.movers == 1 && s.shards > 1:
		mv = "1 mover (all the shards)"
	case s.movers > 1 && s.shards > 1:
		mv = fmt.Sprintf("%d movers (splitting the shards)", s.movers)
	case s.movers > 1:
		mv = fmt.Sprintf("%d movers (one lease: the holder promotes, the others stand by)", s.movers)
	}
	c := fmt.Sprintf("%d consumer", s.consumers)
	if s.consumers > 1 {
		c = fmt.Sprintf("%d consumers of the group", s.consumers)
	}
	return fmt.Sprintf("%s: %s, %s + %s", s.name(), q, mv, c)
}

// clusterSpecs are the deployments compared, in column order: each team
// (movers + consumers) unsharded, then sharded, so that each pair differs
// only in the shard count and the two pairs only in the team.
var clusterSpecs = []clusterSpec{
	{shards: 1, movers: 1, consumers: 1},
	{shards: 16, movers: 1, consumers: 1},
	{shards: 1, movers: 2, consumers: 2},
	{shards: 16, movers: 2, consumers: 2},
}

// clusterSystems returns the names of clusterSpecs, in order.
func clusterSystems() []string {
	var out []string
	for _, s := range clusterSpecs {
		out = append(out, s.name())
	}
	return out
}

// clusterSpecNamed returns the spec whose name is name.
func clusterSpecNamed(name string) (clusterSpec, error) {
	for _, s := range clusterSpecs {
		if s.name() == name {
			return s, nil
		}
	}
	return clusterSpec{}, fmt.Errorf("unknown cluster system %q", name)
}

// clusterPair is a ratio column of the table: a sharded system over the
// unsharded one with the same team.
type clusterPair struct {
	label    string
	num, den clusterSpec
}

// clusterPairs pairs, for each team in clusterSpecs' order, the unsharded
// spec with each sharded spec of that team.
func clusterPairs() []clusterPair {
	var out []clusterPair
	for _, den := range clusterSpecs {
		if den.shards != 1 {
			continue
		}
		for _, num := range clusterSpecs {
			if num.shards > 1 && num.movers == den.movers && num.consumers == den.consumers {
				out = append(out, clusterPair{
					label: fmt.Sprintf("S=%d / S=%d (%s)", num.shards, den.shards, den.team()),
					num:   num, den: den,
				})
			}
		}
	}
	return out
}

// clusterEnv is the cluster the scenario runs on, and one admin client per
// master (INFO, FLUSHALL, CLIENT LIST: not counted).
type clusterEnv struct {
	seeds   []string
	masters []string // sorted
	admins  map[string]*redis.Client
	own     *redistest.Cluster
}

// openCluster starts a local cluster of 3 masters without replicas, or
// uses REDIS_CLUSTER_ADDRS (comma-separated seeds) when -allow-flush is
// given, since every run flushes every master.
func openCluster(ctx context.Context, cfg config) (*clusterEnv, error) {
	e := &clusterEnv{admins: map[string]*redis.Client{}}
	if s := os.Getenv("REDIS_CLUSTER_ADDRS"); s != "" {
		if !cfg.allowFlush {
			return nil, fmt.Errorf("REDIS_CLUSTER_ADDRS=%s: every cluster run starts with FLUSHALL on each master; pass -allow-flush to accept that", s)
		}
		for _, a := range strings.Split(s, ",") {
			if a = strings.TrimSpace(a); a != "" {
				e.seeds = append(e.seeds, a)
			}
		}
	} else {
		c, err := redistest.SpawnCluster(clusterMasters, 0)
		if err != nil {
			return nil, err
		}
		e.own, e.seeds = c, c.Addrs
	}
	disc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: e.seeds})
	defer disc.Close()
	var mu sync.Mutex
	err := disc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		e.masters = append(e.masters, c.Options().Addr)
		return nil
	})
	if err != nil {
		e.Close()
		return nil, fmt.Errorf("cluster %v: %w", e.seeds, err)
	}
	slices.Sort(e.masters)
	for _, a := range e.masters {
		e.admins[a] = redis.NewClient(&redis.Options{Addr: a})
	}
	return e, nil
}

func (e *clusterEnv) Close() {
	for _, c := range e.admins {
		c.Close()
	}
	if e.own != nil {
		e.own.Stop()
	}
}

func (e *clusterEnv) flush(ctx context.Context) error {
	for _, a := range e.masters {
		if err := e.admins[a].FlushAll(ctx).Err(); err != nil {
			return fmt.Errorf("flushall %s: %w", a, err)
		}
	}
	return nil
}

// snap takes INFO of every master.
func (e *clusterEnv) snap(ctx context.Context) (map[string]redisSnap, error) {
	out := map[string]redisSnap{}
	for _, a := range e.masters {
		s, err := takeSnap(ctx, e.admins[a])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", a, err)
		}
		out[a] = s
	}
	return out, nil
}

// clusterCost is the change between two snapshots of every master.
type clusterCost struct {
	sum redisDelta            // summed over masters
	per map[string]redisDelta // by master
}

func (e *clusterEnv) delta(a, b map[string]redisSnap) clusterCost {
	c := clusterCost{sum: redisDelta{by: map[string]int64{}, usec: map[string]int64{}}, per: map[string]redisDelta{}}
	for _, m := range e.masters {
		d := a[m].delta(b[m])
		c.per[m] = d
		c.sum.cpu += d.cpu
		c.sum.calls += d.calls
		c.sum.reads += d.reads
		c.sum.writes += d.writes
		for k, v := range d.by {
			c.sum.by[k] += v
			c.sum.usec[k] += d.usec[k]
		}
	}
	return c
}

// shares returns the smallest and largest master share of the commands,
// each in % of an even share (100 = 1/masters each).
func (e *clusterEnv) shares(c clusterCost) (lo, hi float64) {
	if c.sum.calls == 0 {
		return math.NaN(), math.NaN()
	}
	lo, hi = math.Inf(1), math.Inf(-1)
	even := 1 / float64(len(e.masters))
	for _, m := range e.masters {
		s := float64(c.per[m].calls) / float64(c.sum.calls) / even * 100
		lo, hi = min(lo, s), max(hi, s)
	}
	return lo, hi
}

// shareLine describes each master's commands and CPU.
func (e *clusterEnv) shareLine(c clusterCost, div float64, unit string) string {
	var parts []string
	for _, m := range e.masters {
		d := c.per[m]
		share := math.NaN()
		if c.sum.calls > 0 {
			share = 100 * float64(d.calls) / float64(c.sum.calls)
		}
		parts = append(parts, fmt.Sprintf("%s %.1f %% of commands (%.2f cmds, %.2f µs CPU %s)", m, share, float64(d.calls)/div, d.cpu/div*1e6, unit))
	}
	return strings.Join(parts, "; ")
}

// connSampler counts, every 200 ms, the connections named clusterClientName
// on each master (CLIENT LIST), and keeps each master's peak.
type connSampler struct {
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	peak map[string]int // all connections
	sub  map[string]int // of which pub/sub (sub, psub or ssub > 0), at the same sample
}

func (e *clusterEnv) sampleConns(ctx context.Context) *connSampler {
	s := &connSampler{stop: make(chan struct{}), done: make(chan struct{}), peak: map[string]int{}, sub: map[string]int{}}
	go func() {
		defer close(s.done)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			for _, m := range e.masters {
				list, err := e.admins[m].ClientList(ctx).Result()
				if err != nil {
					continue
				}
				n, sub := 0, 0
				for _, l := range strings.Split(list, "\n") {
					if !strings.Contains(l, " name="+clusterClientName+" ") {
						continue
					}
					n++
					if isSubscriber(l) {
						sub++
					}
				}
				s.mu.Lock()
				if n > s.peak[m] {
					s.peak[m], s.sub[m] = n, sub
				}
				s.mu.Unlock()
			}
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func isSubscriber(clientLine string) bool {
	for _, f := range strings.Fields(clientLine) {
		k, v, _ := strings.Cut(f, "=")
		if (k == "sub" || k == "psub" || k == "ssub") && v != "0" {
			return true
		}
	}
	return false
}

// finish stops sampling and returns the peaks.
func (s *connSampler) finish() (peak, sub map[string]int) {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak, s.sub
}

// clusterSys is delaystream on the cluster: a producer, and once started
// the movers and consumers of its spec, all sharing one ClusterClient.
type clusterSys struct {
	spec     clusterSpec
	rdb      *redis.ClusterClient
	q        *delay.Queue
	workers  int
	batch    int
	movers   []*mover.Mover
	promoted []*atomic.Int64 // entries each mover appended to the streams (Hooks.OnPromote)
	stops    []func()
	failures chan error
}

func newClusterSys(e *clusterEnv, spec clusterSpec, cfg config) (*clusterSys, error) {
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: e.seeds, ClientName: clusterClientName})
	q, err := delay.New(rdb, benchQueue, delay.WithShards(spec.shards))
	if err != nil {
		rdb.Close()
		return nil, err
	}
	return &clusterSys{spec: spec, rdb: rdb, q: q, workers: cfg.workers, batch: cfg.batch, failures: make(chan error, 16)}, nil
}

// start runs the spec's movers and consumers (cfg.workers workers each),
// and waits until every shard's stream has the group and, for a sharded
// queue with several movers, until they have split the shards. The movers
// of an unsharded queue each own its one shard and take turns by its
// lease, so there is nothing to wait for.
func (s *clusterSys) start(ctx context.Context, h handler) error {
	for range s.spec.movers {
		n := new(atomic.Int64)
		mv, err := mover.New(s.rdb, benchQueue, mover.WithShards(s.spec.shards), mover.WithHooks(mover.Hooks{
			OnPromote: func(_ string, moved, _ int, _ time.Duration) { n.Add(int64(moved)) },
		}))
		if err != nil {
			return err
		}
		s.movers = append(s.movers, mv)
		s.promoted = append(s.promoted, n)
		s.goRun(ctx, "mover", mv.Run)
	}
	for range s.spec.consumers {
		c, err := group.New(s.rdb, benchQueue, benchGroup, func(ctx context.Context, m *group.Message) error {
			return h(ctx, delivery{payload: m.Payload, due: m.Due, appended: stream.EntryTime(m.EntryID)})
		}, group.WithWorkers(s.workers), group.WithShards(s.spec.shards), group.WithoutPromotion()) // the deployment's movers promote
		if err != nil {
			return err
		}
		s.goRun(ctx, "consumer", c.Run)
	}
	layout := s.q.Layout()
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; i < layout.Shards(); i++ {
		for {
			gs, err := s.rdb.XInfoGroups(ctx, layout.Shard(i).Main().Stream).Result()
			if err == nil && len(gs) > 0 {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("consumer group not created on shard %d within 10 s (last error: %v)", i, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if s.spec.shards > 1 && len(s.movers) > 1 {
		for {
			owned, each := 0, true
			for _, mv := range s.movers {
				owned += len(mv.Owned())
				each = each && len(mv.Owned()) > 0
			}
			if owned == s.spec.shards && each {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("movers did not split the %d shards within 10 s (owned: %v)", s.spec.shards, s.owned())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return nil
}

func (s *clusterSys) owned() [][]int {
	var out [][]int
	for _, mv := range s.movers {
		out = append(out, mv.Owned())
	}
	return out
}

// promotedBy returns the entries each mover appended so far, in start order.
func (s *clusterSys) promotedBy() []int64 {
	var out []int64
	for _, n := range s.promoted {
		out = append(out, n.Load())
	}
	return out
}

func (s *clusterSys) goRun(ctx context.Context, what string, f func(context.Context) error) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := f(ctx); err != nil {
			logf("cluster %s %s: %v", s.spec.name(), what, err)
			select {
			case s.failures <- fmt.Errorf("%s: %w", what, err):
			default:
			}
		}
	}()
	s.stops = append(s.stops, func() { cancel(); <-done })
}

// failed returns the first error a mover or consumer returned, if any.
func (s *clusterSys) failed() error {
	select {
	case err := <-s.failures:
		return err
	default:
		return nil
	}
}

func (s *clusterSys) scheduleMany(ctx context.Context, ps [][]byte, at time.Time) error {
	items := make([]delay.Item, 0, s.batch)
	for i := 0; i < len(ps); i += s.batch {
		items = items[:0]
		for j := i; j < min(i+s.batch, len(ps)); j++ {
			items = append(items, delay.Item{Message: delay.Message{Payload: ps[j]}, When: delay.At(at)})
		}
		if _, err := s.q.ScheduleBatch(ctx, items); err != nil {
			return err
		}
	}
	return nil
}

// stop stops consumers, then movers (in reverse start order), and closes the client.
func (s *clusterSys) close() {
	for i := len(s.stops) - 1; i >= 0; i-- {
		s.stops[i]()
	}
	s.stops = nil
	s.rdb.Close()
}

// shardsByMaster returns, for each master, the shards whose keys it holds.
func (s *clusterSys) shardsByMaster(ctx context.Context) (map[string][]int, error) {
	out := map[string][]int{}
	layout := s.q.Layout()
	for i := 0; i < layout.Shards(); i++ {
		c, err := s.rdb.MasterForKey(ctx, layout.Shard(i).Main().Stream)
		if err != nil {
			return nil, err
		}
		a := c.Options().Addr
		out[a] = append(out[a], i)
	}
	return out, nil
}

// clusterRun runs burst then trickle for one system of clusterSpecs.
func (b *bench) clusterRun(ctx context.Context, sysName string, run int) (map[string]float64, error) {
	spec, err := clusterSpecNamed(sysName)
	if err != nil {
		return nil, err
	}
	v := map[string]float64{}
	if err := b.clusterBurst(ctx, spec, run, v); err != nil {
		return nil, fmt.Errorf("burst: %w", err)
	}
	if err := b.clusterTrickle(ctx, spec, run, v); err != nil {
		return nil, fmt.Errorf("trickle: %w", err)
	}
	return v, nil
}

func (b *bench) clusterFresh(ctx context.Context, spec clusterSpec, run int, phase string) (*clusterSys, error) {
	if err := b.cl.flush(ctx); err != nil {
		return nil, err
	}
	sys, err := newClusterSys(b.cl, spec, b.cfg)
	if err != nil {
		return nil, err
	}
	if run == 1 && phase == "burst" {
		by, err := sys.shardsByMaster(ctx)
		if err != nil {
			sys.close()
			return nil, err
		}
		var parts []string
		for _, m := range b.cl.masters {
			parts = append(parts, fmt.Sprintf("%s %d", m, len(by[m])))
		}
		home, err := sys.rdb.MasterForKey(ctx, sys.q.Layout().Meta())
		h := "?"
		if err == nil {
			h = home.Options().Addr
		}
		b.res.note("cluster", spec.name(), fmt.Sprintf("shards per master: %s; the queue's own keys (record, movers registry, channels) on %s", strings.Join(parts, ", "), h))
	}
	return sys, nil
}

func (b *bench) clusterBurst(ctx context.Context, spec clusterSpec, run int, v map[string]float64) error {
	n := b.cfg.n
	lead := time.Second + time.Duration(float64(n)/25000*float64(time.Second))
	for attempt := 0; attempt < 3; attempt++ {
		late, err := b.clusterBurstOnce(ctx, spec, run, lead, v)
		if err != nil || !late {
			return err
		}
		logf("cluster %s burst: scheduling did not finish before the due time; retrying with a longer lead", spec.name())
		lead *= 3
	}
	return errors.New("scheduling never finished before the due time")
}

func (b *bench) clusterBurstOnce(ctx context.Context, spec clusterSpec, run int, lead time.Duration, v map[string]float64) (bool, error) {
	n := b.cfg.n
	name := spec.name()
	sys, err := b.clusterFresh(ctx, spec, run, "burst")
	if err != nil {
		return false, err
	}
	defer sys.close()
	tr := newTracker(n)
	conns := b.cl.sampleConns(ctx)
	if err := sys.start(ctx, tr.handler); err != nil {
		conns.finish()
		return false, err
	}
	time.Sleep(300 * time.Millisecond)
	due := time.Now().Add(lead).Truncate(time.Second).Add(time.Second)
	ps := make([][]byte, n)
	for i := range ps {
		ps[i] = payloadFor(i, due, b.cfg.payload)
	}
	t0 := time.Now()
	if err := sys.scheduleMany(ctx, ps, due); err != nil {
		conns.finish()
		return false, err
	}
	schedDur := time.Since(t0)
	s1, err := b.cl.snap(ctx)
	if err != nil {
		conns.finish()
		return false, err
	}
	if time.Now().After(due.Add(-50 * time.Millisecond)) {
		conns.finish()
		return true, nil
	}
	c1 := clientCPU()
	timeout := time.Until(due) + 30*time.Second + time.Duration(n/1000)*time.Second
	complete := tr.wait(timeout)
	time.Sleep(200 * time.Millisecond)
	c2 := clientCPU()
	s2, err := b.cl.snap(ctx)
	if err != nil {
		conns.finish()
		return false, err
	}
	peak, sub := conns.finish()
	sum := tr.summarize()
	if !complete {
		b.res.note("cluster", name, fmt.Sprintf("run %d burst: only %d of %d delivered within %s", run, sum.delivered, n, timeout.Round(time.Second)))
	}
	if err := sys.failed(); err != nil {
		b.res.note("cluster", name, fmt.Sprintf("run %d burst: %v", run, err))
	}
	cost := b.cl.delta(s1, s2)
	dn := float64(max(sum.delivered, 1))
	v["burst_sched_rate"] = float64(n) / schedDur.Seconds()
	v["burst_lost"], v["burst_dups"], v["burst_early"] = float64(sum.lost), float64(sum.dups), float64(sum.early)
	v["burst_cmds_per_msg"] = float64(cost.sum.calls) / dn
	v["burst_redis_cpu_per_msg"] = cost.sum.cpu / dn
	v["burst_client_cpu_per_msg"] = (c2 - c1).Seconds() / dn
	v["burst_share_min"], v["burst_share_max"] = b.cl.shares(cost)
	b.connVals(v, "burst", peak)
	if sum.delivered > 0 {
		if span := sum.last.Sub(due).Seconds(); span > 0 {
			v["burst_e2e_rate"] = float64(sum.delivered) / span
		}
		if span := sum.last.Sub(sum.first).Seconds(); span > 0 {
			v["burst_deliver_rate"] = float64(sum.delivered) / span
		}
		v["burst_last_after_due"] = sum.last.Sub(due).Seconds()
		v["burst_lat_p50"], v["burst_lat_p99"] = sum.p50.Seconds(), sum.p99.Seconds()
		v["burst_promote_p99"], v["burst_consume_p99"] = sum.promoteP99.Seconds(), sum.consumeP99.Seconds()
	}
	b.noteOnce("cluster", name, run, "burst delivery commands (all masters): "+cost.sum.top(8, dn, "per delivered msg"))
	b.noteOnce("cluster", name, run, "burst per master: "+b.cl.shareLine(cost, dn, "per delivered msg"))
	b.noteOnce("cluster", name, run, "burst peak connections of the bench's client per master (CLIENT LIST, name="+clusterClientName+"; of which pub/sub): "+connLine(b.cl.masters, peak, sub))
	if len(sys.movers) > 1 {
		b.noteOnce("cluster", name, run, fmt.Sprintf("burst: shards owned by the %d movers: %v; entries each appended (start -> end of burst): %v", len(sys.movers), sys.owned(), sys.promotedBy()))
	}
	return false, nil
}

func (b *bench) clusterTrickle(ctx context.Context, spec clusterSpec, run int, v map[string]float64) error {
	name := spec.name()
	n := int(float64(b.cfg.rate) * b.cfg.duration.Seconds())
	sys, err := b.clusterFresh(ctx, spec, run, "trickle")
	if err != nil {
		return err
	}
	defer sys.close()
	tr := newTracker(n)
	conns := b.cl.sampleConns(ctx)
	if err := sys.start(ctx, tr.handler); err != nil {
		conns.finish()
		return err
	}
	time.Sleep(300 * time.Millisecond)
	s0, err := b.cl.snap(ctx)
	if err != nil {
		conns.finish()
		return err
	}
	c0 := clientCPU()
	rng := rand.New(rand.NewPCG(uint64(run), 42))
	start := time.Now()
	interval := time.Second / time.Duration(b.cfg.rate)
	behind := 0
	for i := 0; i < n; i++ {
		at := start.Add(time.Duration(i) * interval)
		if d := time.Until(at); d > 0 {
			time.Sleep(d)
		} else if d < -50*time.Millisecond {
			behind++
		}
		d := time.Duration(rng.Int64N(int64(3 * time.Second)))
		if _, err := sys.q.Schedule(ctx, delay.Message{Payload: payloadFor(i, time.Now().Add(d), b.cfg.payload)}, delay.After(d)); err != nil {
			conns.finish()
			return err
		}
	}
	if behind > n/100 {
		b.res.note("cluster", name, fmt.Sprintf("run %d trickle: producer fell > 50 ms behind its pace for %d of %d messages", run, behind, n))
	}
	complete := tr.wait(33 * time.Second)
	time.Sleep(200 * time.Millisecond)
	c1 := clientCPU()
	s1, err := b.cl.snap(ctx)
	if err != nil {
		conns.finish()
		return err
	}
	peak, sub := conns.finish()
	sum := tr.summarize()
	if !complete {
		b.res.note("cluster", name, fmt.Sprintf("run %d trickle: only %d of %d delivered", run, sum.delivered, n))
	}
	if err := sys.failed(); err != nil {
		b.res.note("cluster", name, fmt.Sprintf("run %d trickle: %v", run, err))
	}
	cost := b.cl.delta(s0, s1)
	dn := float64(max(sum.delivered, 1))
	v["trickle_lat_p50"], v["trickle_lat_p99"], v["trickle_lat_max"] = sum.p50.Seconds(), sum.p99.Seconds(), sum.max.Seconds()
	v["trickle_promote_p50"], v["trickle_promote_p99"] = sum.promoteP50.Seconds(), sum.promoteP99.Seconds()
	v["trickle_consume_p50"], v["trickle_consume_p99"] = sum.consumeP50.Seconds(), sum.consumeP99.Seconds()
	v["trickle_early"], v["trickle_early_redis"] = float64(sum.early), float64(sum.earlyRedis)
	v["trickle_lost"], v["trickle_dups"] = float64(sum.lost), float64(sum.dups)
	v["trickle_cmds_per_msg"] = float64(cost.sum.calls) / dn
	v["trickle_redis_cpu_per_msg"] = cost.sum.cpu / dn
	v["trickle_client_cpu_per_msg"] = (c1 - c0).Seconds() / dn
	v["trickle_reads_per_msg"] = float64(cost.sum.reads) / dn
	v["trickle_writes_per_msg"] = float64(cost.sum.writes) / dn
	v["trickle_share_min"], v["trickle_share_max"] = b.cl.shares(cost)
	b.connVals(v, "trickle", peak)
	b.noteOnce("cluster", name, run, "trickle commands (all masters): "+cost.sum.top(16, dn, "per msg"))
	b.noteOnce("cluster", name, run, "trickle Redis µs by command (all masters; EVALSHA's include the commands its scripts run): "+cost.sum.topUsec(8, dn, "µs per msg"))
	b.noteOnce("cluster", name, run, "trickle per master: "+b.cl.shareLine(cost, dn, "per msg"))
	b.noteOnce("cluster", name, run, "trickle peak connections of the bench's client per master (CLIENT LIST; of which pub/sub): "+connLine(b.cl.masters, peak, sub))
	if len(sys.movers) > 1 {
		b.noteOnce("cluster", name, run, fmt.Sprintf("trickle: entries each of the %d movers appended (start -> end of trickle): %v", len(sys.movers), sys.promotedBy()))
	}
	return nil
}

// connVals records the peak connections on the busiest master and the sum
// of the masters' peaks.
func (b *bench) connVals(v map[string]float64, phase string, peak map[string]int) {
	hi, total := 0, 0
	for _, m := range b.cl.masters {
		hi = max(hi, peak[m])
		total += peak[m]
	}
	v[phase+"_conns_node_max"] = float64(hi)
	v[phase+"_conns_total"] = float64(total)
}

func connLine(masters []string, peak, sub map[string]int) string {
	var parts []string
	for _, m := range masters {
		parts = append(parts, fmt.Sprintf("%s %d (%d)", m, peak[m], sub[m]))
	}
	return strings.Join(parts, ", ")
}
