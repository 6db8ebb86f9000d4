package main

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"
)

// bench runs scenarios against one Redis.
type bench struct {
	cfg   config
	addr  string
	admin *redis.Client
	res   *results
	cl    *clusterEnv // the cluster scenario's cluster, while it runs
	// crashdupKilled are the children killed in the crashdup run going on.
	crashdupKilled []killedChild
}

type scenarioFunc func(ctx context.Context, sys string, run int) (map[string]float64, error)

// repeat runs f for each system, runs times, interleaving systems so slow
// drifts of a shared machine hit both alike.
func (b *bench) repeat(ctx context.Context, scenario string, systems []string, runs int, f scenarioFunc) {
	for run := 1; run <= runs; run++ {
		for _, sys := range systems {
			logf("%s %s run %d/%d (load %s)", scenario, sys, run, runs, loadAvg())
			vals, err := f(ctx, sys, run)
			if err != nil {
				logf("%s %s run %d: %v", scenario, sys, run, err)
				b.res.note(scenario, sys, fmt.Sprintf("run %d failed: %v", run, err))
				continue
			}
			b.res.add(scenario, sys, run, vals)
			logf("%s %s run %d: %s", scenario, sys, run, brief(scenario, vals))
		}
	}
}

func brief(scenario string, m map[string]float64) string {
	s := ""
	for _, d := range metrics {
		if v, ok := m[d.key]; ok && d.scenario == scenario && !math.IsNaN(v) {
			if s != "" {
				s += ", "
			}
			s += d.key + "=" + fmtVal(v, d)
		}
	}
	return s
}

// fresh empties the server and returns a new system.
func (b *bench) fresh(ctx context.Context, sys string) (system, error) {
	if err := b.admin.FlushAll(ctx).Err(); err != nil {
		return nil, err
	}
	return newSystem(sys, b.addr, b.cfg)
}

func (b *bench) noteOnce(scenario, system string, run int, text string) {
	if run == 1 {
		b.res.note(scenario, system, text)
	}
}

// burst: n messages all due at one instant (a whole second, so asynq's
// second-resolution scores are not early), consumers already running.
func (b *bench) burst(ctx context.Context, sysName string, run int) (map[string]float64, error) {
	n := b.cfg.n
	lead := time.Second + time.Duration(float64(n)/50000*float64(time.Second))
	if sysName == sysAsynq {
		lead = 2*time.Second + time.Duration(float64(n)/4000*float64(time.Second))
	}
	return withLead("burst "+sysName, lead, func(lead time.Duration) (map[string]float64, bool, error) {
		return b.burstOnce(ctx, sysName, run, lead)
	})
}

// withLead runs a burst whose messages are all due lead after it starts
// scheduling them, and again with a lead three times longer (at most
// three tries) while once reports that scheduling did not finish in time.
func withLead(what string, lead time.Duration, once func(lead time.Duration) (map[string]float64, bool, error)) (map[string]float64, error) {
	for attempt := 0; attempt < 3; attempt++ {
		vals, late, err := once(lead)
		if err != nil || !late {
			return vals, err
		}
		logf("%s: scheduling did not finish before the due time; retrying with a longer lead", what)
		lead *= 3
	}
	return nil, fmt.Errorf("scheduling never finished before the due time")
}

func (b *bench) burstOnce(ctx context.Context, sysName string, run int, lead time.Duration) (map[string]float64, bool, error) {
	n := b.cfg.n
	sys, err := b.fresh(ctx, sysName)
	if err != nil {
		return nil, false, err
	}
	defer sys.Close()
	tr := newTracker(n)
	if err := sys.Start(ctx, tr.handler); err != nil {
		return nil, false, err
	}
	time.Sleep(300 * time.Millisecond) // let startup traffic pass
	due := time.Now().Add(lead).Truncate(time.Second).Add(time.Second)
	ps := make([][]byte, n)
	ws := make([]when, n)
	for i := range ps {
		ps[i] = payloadFor(i, due, b.cfg.payload)
		ws[i] = when{at: due, abs: true}
	}
	s0, err := takeSnap(ctx, b.admin)
	if err != nil {
		return nil, false, err
	}
	c0 := clientCPU()
	t0 := time.Now()
	if err := sys.ScheduleMany(ctx, ps, ws); err != nil {
		return nil, false, err
	}
	schedDur := time.Since(t0)
	c1 := clientCPU()
	s1, err := takeSnap(ctx, b.admin)
	if err != nil {
		return nil, false, err
	}
	if time.Now().After(due.Add(-50 * time.Millisecond)) {
		return nil, true, nil
	}
	// Delivery window: from here (nothing due yet) until everything is
	// delivered and acknowledged.
	timeout := time.Until(due) + 30*time.Second + time.Duration(n/1000)*time.Second
	complete := tr.wait(timeout)
	time.Sleep(200 * time.Millisecond) // acks flushed, late duplicates counted
	c2 := clientCPU()
	s2, err := takeSnap(ctx, b.admin)
	if err != nil {
		return nil, false, err
	}
	sum := tr.summarize()
	if !complete {
		b.res.note("burst", sysName, fmt.Sprintf("run %d: only %d of %d delivered within %s", run, sum.delivered, n, timeout.Round(time.Second)))
	}
	sched := s0.delta(s1)
	del := s1.delta(s2)
	dn := float64(max(sum.delivered, 1))
	v := map[string]float64{
		"sched_rate":               float64(n) / schedDur.Seconds(),
		"lost":                     float64(sum.lost),
		"dups":                     float64(sum.dups),
		"early":                    float64(sum.early),
		"cmds_per_msg":             float64(del.calls) / dn,
		"redis_cpu_per_msg":        del.cpu / dn,
		"client_cpu_per_msg":       (c2 - c1).Seconds() / dn,
		"sched_cmds_per_msg":       float64(sched.calls) / float64(n),
		"sched_redis_cpu_per_msg":  sched.cpu / float64(n),
		"sched_client_cpu_per_msg": (c1 - c0).Seconds() / float64(n),
	}
	if sum.delivered > 0 {
		v["first_after_due"] = sum.first.Sub(due).Seconds()
		v["last_after_due"] = sum.last.Sub(due).Seconds()
		if span := sum.last.Sub(sum.first).Seconds(); span > 0 {
			v["deliver_rate"] = float64(sum.delivered) / span
		}
		if span := sum.last.Sub(due).Seconds(); span > 0 {
			v["e2e_rate"] = float64(sum.delivered) / span
		}
		v["lat_p50"] = sum.p50.Seconds()
		v["lat_p99"] = sum.p99.Seconds()
		v["lat_max"] = sum.max.Seconds()
		if sysName != sysAsynq {
			v["promote_p99"], v["consume_p99"] = sum.promoteP99.Seconds(), sum.consumeP99.Seconds()
		}
	}
	b.noteOnce("burst", sysName, run, "delivery commands: "+del.top(8, dn, "per delivered msg"))
	b.noteOnce("burst", sysName, run, "delivery: Redis execution time (commandstats usec, scripts include inner commands): "+del.topUsec(6, dn, "µs per delivered msg"))
	b.noteOnce("burst", sysName, run, "schedule commands: "+sched.top(6, float64(n), "per scheduled msg"))
	return v, false, nil
}

// trickle: rate msg/s for the duration, each due after a delay uniform in
// [0, 3 s], scheduled one call at a time by a paced producer.
func (b *bench) trickle(ctx context.Context, sysName string, run int) (map[string]float64, error) {
	sys, err := b.fresh(ctx, sysName)
	if err != nil {
		return nil, err
	}
	defer sys.Close()
	return b.trickleOn(ctx, sys, sysName, run, "trickle", "", b.cfg.rate, b.cfg.duration)
}

// trickleProducers is how many goroutines schedule a trickle of rate msg/s:
// one per 1000 msg/s.
func trickleProducers(rate int) int { return max(1, (rate+999)/1000) }

// paceTrickle schedules n messages on sys at rate msg/s from now, each due
// after lead plus a delay uniform in [0, 3 s] (the same delays for a given
// run), one
// call at a time per producer goroutine (one per 1000 msg/s: a single
// goroutine cannot keep a pace much above that on this machine), and
// returns how many were scheduled more than 50 ms behind their pace.
func (b *bench) paceTrickle(ctx context.Context, sys system, run, rate, n int, lead time.Duration) (int, error) {
	start := time.Now()
	interval := time.Second / time.Duration(rate)
	producers := trickleProducers(rate)
	var behindN atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	for p := range producers {
		g.Go(func() error {
			rng := rand.New(rand.NewPCG(uint64(run), uint64(42+p)))
			for i := p; i < n; i += producers {
				at := start.Add(time.Duration(i) * interval)
				if d := time.Until(at); d > 0 {
					time.Sleep(d)
				} else if d < -50*time.Millisecond {
					behindN.Add(1)
				}
				delay := lead + time.Duration(rng.Int64N(int64(3*time.Second)))
				now := time.Now()
				// The payload carries now+delay for asynq; delaystream measures
				// against the due time Redis stored (After is resolved by Redis TIME).
				if err := sys.ScheduleOne(gctx, payloadFor(i, now.Add(delay), b.cfg.payload), when{in: delay}); err != nil {
					return err
				}
			}
			return nil
		})
	}
	err := g.Wait()
	return int(behindN.Load()), err
}

// trickleOn starts sys (which holds whatever the caller put into Redis
// before) and runs the trickle on it: rate msg/s for dur, each due after a
// delay uniform in [0, 3 s], scheduled one call at a time by a paced
// producer. Costs are taken over the whole run (schedule + delivery +
// idle) and notes go to scenario. Used by trickle, backlog and curve.
//
// tag starts the notes' text ("" for none): a scenario that runs several
// trickles per run tells them apart with it.
func (b *bench) trickleOn(ctx context.Context, sys system, sysName string, run int, scenario, tag string, rate int, dur time.Duration) (map[string]float64, error) {
	if tag != "" {
		tag += ": "
	}
	n := max(1, int(float64(rate)*dur.Seconds()))
	tr := newTracker(n)
	if err := sys.Start(ctx, tr.handler); err != nil {
		return nil, err
	}
	time.Sleep(300 * time.Millisecond)
	var xl *execLog
	if b.cfg.execTimes {
		var err error
		if xl, err = startExecLog(ctx, b.admin); err != nil {
			return nil, err
		}
	}
	s0, err := takeSnap(ctx, b.admin)
	if err != nil {
		return nil, err
	}
	c0 := clientCPU()
	behind, err := b.paceTrickle(ctx, sys, run, rate, n, 0)
	if err != nil {
		return nil, err
	}
	paced := time.Now()
	if behind > n/100 {
		b.res.note(scenario, sysName, fmt.Sprintf("%srun %d: producer fell > 50 ms behind its pace for %d of %d messages", tag, run, behind, n))
	}
	complete := tr.wait(3*time.Second + 30*time.Second)
	time.Sleep(200 * time.Millisecond)
	tail := time.Since(paced)
	c1 := clientCPU()
	s1, err := takeSnap(ctx, b.admin)
	if err != nil {
		return nil, err
	}
	var xs []execStat
	if xl != nil {
		if xs, err = xl.stop(ctx); err != nil {
			return nil, err
		}
	}
	sum := tr.summarize()
	if !complete {
		b.res.note(scenario, sysName, fmt.Sprintf("%srun %d: only %d of %d delivered", tag, run, sum.delivered, n))
	}
	d := s0.delta(s1)
	dn := float64(max(sum.delivered, 1))
	v := trickleFigures(sum, d, dn, c1-c0)
	v["lost"], v["tail"] = float64(sum.lost), tail.Seconds()
	if sysName != sysAsynq && sysName != sysFloor { // a stream entry: the split at its time
		v["early_redis"] = float64(sum.earlyRedis)
		v["promote_p50"], v["promote_p99"] = sum.promoteP50.Seconds(), sum.promoteP99.Seconds()
		v["consume_p50"], v["consume_p99"] = sum.consumeP50.Seconds(), sum.consumeP99.Seconds()
		v["promote_max"] = sum.promoteMax.Seconds()
	}
	b.noteOnce(scenario, sysName, run, tag+"commands: "+d.top(16, dn, "per msg"))
	if xl != nil {
		b.noteOnce(scenario, sysName, run, tag+"execution times (slow log at 0: scripts by file or SHA1, commands run by scripts apart): "+execNote(xs, 12, dn))
	}
	b.noteCPU(scenario, sysName, run, tag, d, dn)
	if sysName != sysAsynq {
		// The promote script's sorted-set commands, per call: what a
		// larger delayed set makes slower (commandstats usec / calls).
		for k, cmd := range map[string]string{"zrangebyscore_usec": "zrangebyscore", "zremrangebyrank_usec": "zremrangebyrank", "zadd_usec": "zadd", "zrange_usec": "zrange"} {
			if c := d.by[cmd]; c > 0 {
				v[k] = float64(d.usec[cmd]) / float64(c) / 1e6
			}
		}
	}
	return v, nil
}

// trickleFigures returns a trickle's lateness (of the messages delivered)
// and its costs per message, perMsg messages over the window of d, in
// which the bench's process used client CPU.
func trickleFigures(sum summary, d redisDelta, perMsg float64, client time.Duration) map[string]float64 {
	return map[string]float64{
		"lat_p50": sum.p50.Seconds(), "lat_p99": sum.p99.Seconds(), "lat_max": sum.max.Seconds(), "lat_min": sum.min.Seconds(),
		"early_pct":          100 * float64(sum.early) / float64(max(sum.delivered, 1)),
		"dups":               float64(sum.dups),
		"cmds_per_msg":       float64(d.calls) / perMsg,
		"redis_cpu_per_msg":  d.cpu / perMsg,
		"redis_sys_per_msg":  d.sys / perMsg,
		"client_cpu_per_msg": client.Seconds() / perMsg,
		"reads_per_msg":      float64(d.reads) / perMsg,
		"writes_per_msg":     float64(d.writes) / perMsg,
	}
}

// noteCPU notes, once per scenario and system, the Redis CPU per message of
// d (perMsg messages) and the commands that took the most execution time.
func (b *bench) noteCPU(scenario, sysName string, run int, tag string, d redisDelta, perMsg float64) {
	b.noteOnce(scenario, sysName, run, fmt.Sprintf("%sRedis CPU %.0f µs per msg; executing commands (commandstats usec; EVALSHA's include the commands its scripts run, which are listed too): %s",
		tag, d.cpu/perMsg*1e6, d.topUsec(10, perMsg, "µs per msg")))
}

// schedule: throughput of scheduling messages due in 1 h, no consumers.
func (b *bench) schedule(ctx context.Context, sysName string, run int) (map[string]float64, error) {
	sys, err := b.fresh(ctx, sysName)
	if err != nil {
		return nil, err
	}
	defer sys.Close()
	due := time.Now().Add(time.Hour)
	mk := func(n, base int) ([][]byte, []when) {
		ps := make([][]byte, n)
		ws := make([]when, n)
		for i := range ps {
			ps[i] = payloadFor(base+i, due, b.cfg.payload)
			ws[i] = when{in: time.Hour}
		}
		return ps, ws
	}
	v := map[string]float64{}
	// cost records Redis CPU and client CPU per message of one phase.
	var s0 redisSnap
	var c0 time.Duration
	mark := func() {
		s0, _ = takeSnap(ctx, b.admin)
		c0 = clientCPU()
	}
	cost := func(key string, n int) {
		c1 := clientCPU()
		s1, err := takeSnap(ctx, b.admin)
		if err != nil {
			return
		}
		d := s0.delta(s1)
		v[key+"_redis_cpu"] = d.cpu / float64(n)
		v[key+"_client_cpu"] = (c1 - c0).Seconds() / float64(n)
		v[key+"_cmds"] = float64(d.calls) / float64(n)
		b.noteOnce("schedule", sysName, run, key+": Redis execution time (commandstats usec, scripts include inner commands): "+d.topUsec(6, float64(n), "µs per msg"))
	}
	// One at a time, one goroutine.
	ps, ws := mk(b.cfg.oneN, 0)
	mark()
	t0 := time.Now()
	for i := range ps {
		if err := sys.ScheduleOne(ctx, ps[i], ws[i]); err != nil {
			return nil, err
		}
	}
	v["one_rate"] = float64(len(ps)) / time.Since(t0).Seconds()
	cost("one", len(ps))
	// One at a time, parallel goroutines.
	ps, ws = mk(4*b.cfg.oneN, 1<<30)
	t0 = time.Now()
	if err := parallelDo(ctx, b.cfg.parallel, len(ps), func(i int) error { return sys.ScheduleOne(ctx, ps[i], ws[i]) }); err != nil {
		return nil, err
	}
	v["one_par_rate"] = float64(len(ps)) / time.Since(t0).Seconds()
	// One at a time from 64 goroutines, as a service schedules from its
	// request handlers: rate, each call's latency, costs per message.
	ps, ws = mk(20*b.cfg.oneN, 4<<30)
	lat := make([]time.Duration, len(ps))
	mark()
	t0 = time.Now()
	if err := parallelDo(ctx, 64, len(ps), func(i int) error {
		c0 := time.Now()
		err := sys.ScheduleOne(ctx, ps[i], ws[i])
		lat[i] = time.Since(c0)
		return err
	}); err != nil {
		return nil, err
	}
	v["one_par64_rate"] = float64(len(ps)) / time.Since(t0).Seconds()
	cost("one_par64", len(ps))
	slices.Sort(lat)
	v["one_par64_p50"] = lat[len(lat)/2].Seconds()
	v["one_par64_p99"] = lat[len(lat)*99/100].Seconds()
	// Bulk: delaystream's ScheduleBatch, asynq's parallel Enqueue.
	ps, ws = mk(b.cfg.n, 2<<30)
	mark()
	t0 = time.Now()
	if err := sys.ScheduleMany(ctx, ps, ws); err != nil {
		return nil, err
	}
	v["batch_rate"] = float64(len(ps)) / time.Since(t0).Seconds()
	cost("batch", len(ps))
	if sysName != sysAsynq {
		ps, ws = mk(b.cfg.n, 3<<30)
		per := (len(ps) + 3) / 4
		t0 = time.Now()
		if err := parallelDo(ctx, 4, 4, func(i int) error {
			lo, hi := i*per, min((i+1)*per, len(ps))
			return sys.ScheduleMany(ctx, ps[lo:hi], ws[lo:hi])
		}); err != nil {
			return nil, err
		}
		v["batch_par_rate"] = float64(len(ps)) / time.Since(t0).Seconds()
	}
	return v, nil
}

// memory: used_memory delta per message for memN messages due in 1 h.
func (b *bench) memory(ctx context.Context, sysName string, run int) (map[string]float64, error) {
	sys, err := b.fresh(ctx, sysName)
	if err != nil {
		return nil, err
	}
	defer sys.Close()
	n := b.cfg.memN
	ps := make([][]byte, n)
	ws := make([]when, n)
	for i := range ps {
		ps[i] = payloadFor(i, time.Now().Add(time.Hour), b.cfg.payload)
		ws[i] = when{in: time.Hour}
	}
	// Load the scripts / warm the connection first, so only the messages count.
	if err := sys.ScheduleOne(ctx, payloadFor(n, time.Now().Add(time.Hour), b.cfg.payload), when{in: time.Hour}); err != nil {
		return nil, err
	}
	time.Sleep(100 * time.Millisecond)
	s0, err := takeSnap(ctx, b.admin)
	if err != nil {
		return nil, err
	}
	if err := sys.ScheduleMany(ctx, ps, ws); err != nil {
		return nil, err
	}
	time.Sleep(100 * time.Millisecond)
	s1, err := takeSnap(ctx, b.admin)
	if err != nil {
		return nil, err
	}
	v := map[string]float64{"bytes_per_msg": float64(s1.mem-s0.mem) / float64(n)}
	if ds, ok := sys.(*dsSystem); ok {
		ln := ds.keys.Main()
		z, _ := b.admin.MemoryUsage(ctx, ln.Delayed, 0).Result()
		h, _ := b.admin.MemoryUsage(ctx, ln.Envelopes, 0).Result()
		v["zset_bytes_per_msg"] = float64(z) / float64(n+1)
		v["hash_bytes_per_msg"] = float64(h) / float64(n+1)
		if run == 1 {
			b.res.note("memory", sysName, fmt.Sprintf("keys: %s (zset, %d B by MEMORY USAGE), %s (hash, %d B)", ln.Delayed, z, ln.Envelopes, h))
		}
		// The same messages with caller-chosen ids (26 characters, as long
		// as generated ones): plain members with an envelope hash entry.
		given, err := ds.scheduleWithIDs(ctx, ps, ws)
		if err != nil {
			return nil, err
		}
		time.Sleep(100 * time.Millisecond)
		s2, err := takeSnap(ctx, b.admin)
		if err != nil {
			return nil, err
		}
		v["given_bytes_per_msg"] = float64(s2.mem-s1.mem) / float64(given)
	} else if run == 1 {
		keys, _ := b.admin.DBSize(ctx).Result()
		b.res.note("memory", sysName, fmt.Sprintf("%d keys for %d tasks (one hash per task plus the scheduled zset)", keys, n+1))
	}
	return v, nil
}

// idleCost: commands per second with nothing due, one queue.
func (b *bench) idleCost(ctx context.Context, sysName string, run int) (map[string]float64, error) {
	sys, err := b.fresh(ctx, sysName)
	if err != nil {
		return nil, err
	}
	defer sys.Close()
	v := map[string]float64{}
	// A few messages far in the future: the mover sleeps to the next due time.
	for i := 0; i < 10; i++ {
		if err := sys.ScheduleOne(ctx, payloadFor(i, time.Now().Add(time.Hour), b.cfg.payload), when{in: time.Hour}); err != nil {
			return nil, err
		}
	}
	var idleCPU, idleClientCPU float64
	measure := func() (total, client, script float64, d redisDelta, err error) {
		cc0 := clientCPU()
		defer func() { idleClientCPU = (clientCPU() - cc0).Seconds() / b.cfg.idle.Seconds() }()
		if err = b.admin.ConfigResetStat(ctx).Err(); err != nil {
			return
		}
		s0, err := takeSnap(ctx, b.admin)
		if err != nil {
			return
		}
		stop, err := monitor(b.addr)
		if err != nil {
			return
		}
		t0 := time.Now()
		time.Sleep(b.cfg.idle)
		cl, sc, _ := stop()
		el := time.Since(t0).Seconds()
		s1, err := takeSnap(ctx, b.admin)
		if err != nil {
			return
		}
		d = s0.delta(s1)
		idleCPU = d.cpu / el
		return float64(d.calls) / el, float64(cl) / el, float64(sc) / el, d, nil
	}
	if ds, ok := sys.(*dsSystem); ok {
		// The mover alone first.
		if err := ds.startMoverOnly(ctx); err != nil {
			return nil, err
		}
		time.Sleep(1500 * time.Millisecond)
		tot, cl, _, d, err := measure()
		if err != nil {
			return nil, err
		}
		v["mover_cmds_per_s"], v["mover_client_cmds_per_s"] = tot, cl
		b.noteOnce("idle", sysName, run, "mover alone: "+d.top(8, b.cfg.idle.Seconds(), "per s"))
		ds.Stop()
	}
	if err := sys.Start(ctx, func(context.Context, delivery) error { return nil }); err != nil {
		return nil, err
	}
	time.Sleep(2 * time.Second)
	tot, cl, _, d, err := measure()
	if err != nil {
		return nil, err
	}
	v["cmds_per_s"], v["client_cmds_per_s"] = tot, cl
	v["redis_cpu_per_s"], v["client_cpu_per_s"] = idleCPU, idleClientCPU
	b.noteOnce("idle", sysName, run, "mover + consumer: "+d.top(12, b.cfg.idle.Seconds(), "per s"))
	if ds, ok := sys.(*dsSystem); ok {
		// The realistic deployment: 3 groups × 3 consumers, each its own
		// client (as separate processes would be, so each runs its own
		// promotion engine), no mover.
		ds.Stop()
		if err := ds.startIdleFleet(ctx, idleGroups, idleConsumers); err != nil {
			return nil, err
		}
		time.Sleep(3 * time.Second) // past the first reclaim and trim passes
		tot, cl, _, d, err := measure()
		if err != nil {
			return nil, err
		}
		v["fleet_cmds_per_s"], v["fleet_client_cmds_per_s"] = tot, cl
		v["fleet_redis_cpu_per_s"] = idleCPU
		b.noteOnce("idle", sysName, run, fmt.Sprintf("%d groups × %d consumers (own clients, promoting; no mover): ", idleGroups, idleConsumers)+
			d.top(12, b.cfg.idle.Seconds(), "per s"))
	}
	return v, nil
}

// The idle fleet: groups × consumers per group.
const idleGroups, idleConsumers = 3, 3
