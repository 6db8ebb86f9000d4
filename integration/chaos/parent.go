package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream/internal/group"
	"github.com/delaystream/delaystream/internal/redistest"
	"github.com/delaystream/delaystream/internal/stream"
)

// Fault kinds, as counted in the table.
const (
	faultConsumerKill = "consumer SIGKILL"
	faultMoverKill    = "mover SIGKILL"
	faultPauseWrite   = "CLIENT PAUSE WRITE"
	faultPauseAll     = "CLIENT PAUSE ALL"
	faultSleep        = "DEBUG SLEEP"
	faultClientKill   = "CLIENT KILL"
	faultRestart      = "restart from AOF"
)

// faultKinds in table order.
var faultKinds = []string{faultConsumerKill, faultMoverKill, faultPauseWrite, faultPauseAll, faultSleep, faultClientKill, faultRestart}

// redisFaultCycle is the order of the Redis-wide faults; the restart is
// put in the middle of the run.
var redisFaultCycle = []string{faultPauseWrite, faultClientKill, faultSleep, faultPauseAll, faultClientKill}

// fault is one injected fault, with what was in flight when it struck.
type fault struct {
	Kind   string
	Start  time.Time
	End    time.Time // when Redis was back (pauses, sleep, restart); = Start for kills
	Target string    // the killed process, for process kills
	// InFlight is, per group, the entries pending (read and not
	// acknowledged) that the fault may make a group handle twice: the
	// killed consumer's, or every consumer's for a Redis-wide fault. It is
	// what the fault adds to the group's duplicate bound.
	InFlight map[string]int64
	Note     string
}

// chaos is the parent's state during a run.
type chaos struct {
	p         plan
	fsync     string
	out       io.Writer
	t0        time.Time
	srv       *server
	ctl       *redis.Client
	main      stream.Lane
	retry     map[string]stream.Lane
	consumers []*slot
	movers    []*slot
	rng       *rand.Rand
	faults    []fault
	notes     []string // what went wrong injecting faults (not violations)
}

func (c *chaos) logf(format string, args ...any) {
	fmt.Fprintf(c.out, "[%6.1fs] %s\n", time.Since(c.t0).Seconds(), fmt.Sprintf(format, args...))
}

// parentMain runs the whole thing: server, children, faults, drain, check.
func parentMain(p plan, fsync, dir string, seed uint64, out io.Writer) (*Summary, error) {
	keep := dir != ""
	if dir == "" {
		d, err := os.MkdirTemp("", "delaystream-chaos-")
		if err != nil {
			return nil, err
		}
		dir = d
	}
	for _, sub := range []string{"ledger", "logs", "redis"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return nil, err
		}
	}
	defer redistest.StopAll() // removes TLS certificates generated for the run
	tc, err := redistest.LoadTLSConfig()
	if err != nil {
		return nil, err
	}
	env, err := childEnv()
	if err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	ps := &procs{self: self, env: append(os.Environ(), env...), dir: dir}
	defer ps.killAll()

	c := &chaos{p: p, fsync: fsync, out: out, t0: time.Now(), rng: rand.New(rand.NewPCG(seed, 1))}
	fmt.Fprintf(out, "delaystream chaos: mode %s, appendfsync %s, TLS %v, seed %d, %d messages, %d producers, %d movers, %d groups x %d consumers; work directory %s\n",
		p.Mode, fsync, tc != nil, seed, p.Messages, p.Producers, movers, len(groups), consumersPerGroup, dir)
	c.srv, err = newServer(filepath.Join(dir, "redis"), fsync, tc, ps.notePid)
	if err != nil {
		return nil, err
	}
	defer c.srv.close()
	c.ctl = redis.NewClient(&redis.Options{Addr: c.srv.addr, TLSConfig: tc, DialTimeout: time.Second,
		ReadTimeout: 10 * time.Second, WriteTimeout: 5 * time.Second, MaxRetries: -1, PoolSize: 4})
	defer c.ctl.Close()
	layout, err := stream.NewLayout(keyPrefix, queueName, 1)
	if err != nil {
		return nil, err
	}
	c.main = layout.Shard(0).Main()
	c.retry = map[string]stream.Lane{}
	for _, g := range groups {
		c.retry[g] = layout.Shard(0).Retry(g)
	}
	c.logf("redis-server %s at %s (appendonly yes, appendfsync %s)", c.srv.bin, c.srv.addr, fsync)

	// Consumers first, and both groups created, before anything is
	// promoted: no group may miss entries trimmed before it existed.
	for _, g := range groups {
		for i := 1; i <= consumersPerGroup; i++ {
			s := &slot{ps: ps, base: fmt.Sprintf("%s-c%d", g, i), spec: childSpec{
				Role: "consumer", Addr: c.srv.addr, Group: g, Workers: p.Workers, FailRate: p.FailRate}}
			if err := s.launch(); err != nil {
				return nil, err
			}
			c.consumers = append(c.consumers, s)
		}
	}
	if err := c.waitGroups(30 * time.Second); err != nil {
		return nil, err
	}
	defined, err := c.defineSchedule(context.Background())
	if err != nil {
		return nil, err
	}
	c.logf("recurring schedule %s defined", recurID)
	for i := 1; i <= movers; i++ {
		s := &slot{ps: ps, base: fmt.Sprintf("mover-%d", i), spec: childSpec{Role: "mover", Addr: c.srv.addr}}
		if err := s.launch(); err != nil {
			return nil, err
		}
		c.movers = append(c.movers, s)
	}

	// Supervisor: restart children that gave up on their own.
	supCtx, supStop := context.WithCancel(context.Background())
	var supWG sync.WaitGroup
	supWG.Add(1)
	go func() {
		defer supWG.Done()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-supCtx.Done():
				return
			case <-t.C:
				for _, s := range append(append([]*slot(nil), c.consumers...), c.movers...) {
					_ = s.supervise()
				}
			}
		}
	}()
	stopSupervisor := func() { supStop(); supWG.Wait() }
	defer stopSupervisor()

	start := time.Now().Add(500 * time.Millisecond)
	var prods []*proc
	for i := range p.Producers {
		n := p.Messages / p.Producers
		if i < p.Messages%p.Producers {
			n++
		}
		pr, err := ps.start(fmt.Sprintf("producer-%d", i), childSpec{
			Role: "producer", Addr: c.srv.addr, Ledger: filepath.Join(dir, "ledger", fmt.Sprintf("producer-%d.log", i)),
			Index: i, Count: n, Start: start.UnixNano(), Window: p.Window, MinDelay: p.MinDelay, MaxDelay: p.MaxDelay,
			Seed: seed,
		})
		if err != nil {
			return nil, err
		}
		prods = append(prods, pr)
	}
	lastDue := start.Add(p.Window + p.MaxDelay)
	c.logf("producers started: sending over %s, due %s to %s after sending; faults until %.1fs",
		p.Window, p.MinDelay, p.MaxDelay, lastDue.Sub(c.t0).Seconds())

	if err := c.injectFaults(start, lastDue); err != nil {
		return nil, err
	}
	c.logf("faults over")

	// Producers finish their follow-ups (a reschedule may move a message
	// past lastDue), then every group must drain.
	deadline := lastDue.Add(p.Drain)
	var harness []string
	for _, pr := range prods {
		select {
		case <-pr.exited:
			if pr.err != nil {
				harness = append(harness, fmt.Sprintf("%s failed: %v (see %s)", pr.name, pr.err, pr.log))
			}
		case <-time.After(time.Until(deadline)):
			pr.kill()
			harness = append(harness, fmt.Sprintf("%s did not finish by the drain deadline", pr.name))
		}
	}
	if err := c.deleteSchedule(context.Background(), dir, defined); err != nil {
		harness = append(harness, err.Error())
	}
	drained, drainErr := c.waitDrained(deadline)
	c.logf("drained: %v (%v)", drained, drainErr)

	stopSupervisor()
	var unclean []string
	for _, s := range append(append([]*slot(nil), c.consumers...), c.movers...) {
		if !s.stop(15 * time.Second) {
			unclean = append(unclean, s.cur.name)
		}
	}
	final, err := c.finalState()
	if err != nil {
		c.notes = append(c.notes, "final Redis figures: "+err.Error())
	}
	c.srv.close()
	ps.killAll()

	sum, err := check(filepath.Join(dir, "ledger"), c, final)
	if err != nil {
		return nil, err
	}
	sum.Seed, sum.Dir, sum.Drained = seed, dir, drained
	sum.Harness = harness
	if !drained {
		sum.Harness = append(sum.Harness, fmt.Sprintf("not drained by the deadline: %v", drainErr))
	}
	for _, s := range append(append([]*slot(nil), c.consumers...), c.movers...) {
		sum.ChildExits = append(sum.ChildExits, s.crash...)
	}
	sum.UncleanStops = unclean
	sum.Notes = c.notes
	ps.mu.Lock()
	sum.Pids = append(sum.Pids, ps.pids...)
	ps.mu.Unlock()
	sum.RunSeconds = time.Since(c.t0).Seconds()
	sum.finish()
	remove := sum.Violations == 0 && len(sum.Harness) == 0 && !keep
	if remove {
		sum.Dir = ""
	}
	printTable(out, sum)
	if remove {
		_ = os.RemoveAll(dir)
	}
	if len(sum.Harness) > 0 {
		return sum, fmt.Errorf("the run did not complete: %s (work directory %s)", strings.Join(sum.Harness, "; "), dir)
	}
	return sum, nil
}

// waitGroups waits until both groups exist on the queue stream and on
// their retry lanes.
func (c *chaos) waitGroups(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		ok := true
		for _, g := range groups {
			for _, key := range []string{c.main.Stream, c.retry[g].Stream} {
				gs, err := c.ctl.XInfoGroups(context.Background(), key).Result()
				found := false
				for _, x := range gs {
					found = found || x.Name == g
				}
				ok = ok && err == nil && found
			}
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("consumer groups not created within %s", limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// pendingSnapshot is, per group, the pending entries of the queue stream
// and the group's retry lane: in all, and per consumer.
type pendingSnapshot map[string]*groupPending

type groupPending struct {
	total      int64
	byConsumer map[string]int64
}

// pendingTx reads every group's pending entries and runs extra (a fault
// command) in one MULTI/EXEC, so that nothing is read between the snapshot
// and the fault. extra may be nil.
func (c *chaos) pendingTx(ctx context.Context, extra func(p redis.Pipeliner) []redis.Cmder) (pendingSnapshot, []redis.Cmder, error) {
	c.freshen(ctx)
	type q struct {
		group string
		cmd   *redis.XPendingCmd
	}
	var qs []q
	var more []redis.Cmder
	_, err := c.ctl.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for _, g := range groups {
			qs = append(qs, q{g, p.XPending(ctx, c.main.Stream, g)}, q{g, p.XPending(ctx, c.retry[g].Stream, g)})
		}
		if extra != nil {
			more = extra(p)
		}
		return nil
	})
	snap := pendingSnapshot{}
	for _, g := range groups {
		snap[g] = &groupPending{byConsumer: map[string]int64{}}
	}
	for _, x := range qs {
		r, xerr := x.cmd.Result()
		if xerr != nil && !errors.Is(xerr, redis.Nil) {
			if isNoGroup(xerr) {
				continue
			}
			return nil, more, xerr
		}
		if r == nil {
			continue
		}
		snap[x.group].total += r.Count
		for name, n := range r.Consumers {
			snap[x.group].byConsumer[name] += n
		}
	}
	if err != nil && !isNoGroup(err) && !errors.Is(err, redis.Nil) {
		return snap, more, err
	}
	return snap, more, nil
}

// pendingRead is pendingTx without a fault command, tried up to three
// times: reading twice is harmless.
func (c *chaos) pendingRead(ctx context.Context) (pendingSnapshot, error) {
	var err error
	for range 3 {
		var snap pendingSnapshot
		if snap, _, err = c.pendingTx(ctx, nil); err == nil {
			return snap, nil
		}
	}
	return nil, err
}

// freshen drops the control client's pooled connections that a CLIENT
// KILL or the restart broke (the client does not retry: a fault command
// must not run twice), by pinging until a ping works, at most 5 times.
func (c *chaos) freshen(ctx context.Context) {
	for range 5 {
		if c.ctl.Ping(ctx).Err() == nil {
			return
		}
	}
}

// conservativeHold bounds what one consumer can hold when its pending
// entries could not be read: the read-ahead's cap and its workers, on
// the queue stream and the retry lane.
func (c *chaos) conservativeHold() int64 { return int64(2 * (256 + 4*c.p.Workers + c.p.Workers)) }

// injectFaults kills a consumer every ConsumerKillEvery and a mover every
// MoverKillEvery (each restarted at once), and strikes Redis RedisFaults
// times, evenly spread, one of them a restart from the AOF, until end. The
// faults run one at a time, so that each one's in-flight figure is its own.
func (c *chaos) injectFaults(from, end time.Time) error {
	var redisAt []time.Time
	var redisKind []string
	n := c.p.RedisFaults
	span := end.Sub(from)
	for i, j := 0, 0; i < n; i++ {
		redisAt = append(redisAt, from.Add(span*time.Duration(i+1)/time.Duration(n+1)))
		kind := faultRestart
		if i != n/2 {
			kind = redisFaultCycle[j%len(redisFaultCycle)]
			j++
		}
		redisKind = append(redisKind, kind)
	}
	nextConsumer := from.Add(c.p.ConsumerKillEvery)
	nextMover := from.Add(c.p.MoverKillEvery)
	moverTurn := 0
	for {
		next, which := nextConsumer, "consumer"
		if nextMover.Before(next) {
			next, which = nextMover, "mover"
		}
		if len(redisAt) > 0 && redisAt[0].Before(next) {
			next, which = redisAt[0], "redis"
		}
		if !next.Before(end) {
			return nil
		}
		time.Sleep(time.Until(next))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		var err error
		switch which {
		case "consumer":
			c.killConsumer(ctx, c.consumers[c.rng.IntN(len(c.consumers))])
			nextConsumer = nextConsumer.Add(c.p.ConsumerKillEvery)
			if nextConsumer.Before(time.Now()) { // a Redis fault held the loop up
				nextConsumer = time.Now().Add(c.p.ConsumerKillEvery / 2)
			}
		case "mover":
			s := c.movers[moverTurn%len(c.movers)]
			moverTurn++
			at := time.Now()
			name, kerr := s.killAndRestart(nil)
			c.faults = append(c.faults, fault{Kind: faultMoverKill, Start: at, End: at, Target: name})
			err = kerr
			nextMover = nextMover.Add(c.p.MoverKillEvery)
			if nextMover.Before(time.Now()) {
				nextMover = time.Now().Add(c.p.MoverKillEvery / 2)
			}
		case "redis":
			kind := redisKind[0]
			redisAt, redisKind = redisAt[1:], redisKind[1:]
			err = c.redisFault(ctx, kind)
		}
		cancel()
		if err != nil {
			return err
		}
	}
}

// killConsumer SIGKILLs a consumer and restarts it. Its in flight is the
// larger of its pending entries read just before and just after the kill
// (those read in between are in the second; none can be reclaimed by
// others so soon, since the consumer kept extending them).
func (c *chaos) killConsumer(ctx context.Context, s *slot) {
	before, errBefore := c.pendingRead(ctx)
	var after pendingSnapshot
	var errAfter error
	at := time.Now()
	name, err := s.killAndRestart(func(string) {
		after, errAfter = c.pendingRead(ctx)
	})
	f := fault{Kind: faultConsumerKill, Start: at, End: at, Target: name, InFlight: map[string]int64{}}
	g := s.spec.Group
	var n int64
	switch {
	case errBefore != nil && errAfter != nil:
		n = c.conservativeHold()
		f.Note = fmt.Sprintf("pending not readable (%v); bound by the consumer's most %d", errAfter, n)
	default:
		if errBefore == nil {
			n = before[g].byConsumer[name]
		}
		if errAfter == nil {
			n = max(n, after[g].byConsumer[name])
		}
	}
	f.InFlight[g] = n
	if err != nil {
		f.Note += " restart failed: " + err.Error()
		c.notes = append(c.notes, name+": "+err.Error())
	}
	c.faults = append(c.faults, f)
}

// redisFault strikes the server. Pauses, the sleep and the connection kill
// run in one MULTI/EXEC with the reading of every group's pending entries:
// what is in flight when the fault strikes is exactly what it may make
// a group handle twice.
func (c *chaos) redisFault(ctx context.Context, kind string) error {
	f := fault{Kind: kind, Start: time.Now(), InFlight: map[string]int64{}}
	var snap pendingSnapshot
	var err error
	switch kind {
	case faultPauseWrite, faultPauseAll:
		mode := "WRITE"
		if kind == faultPauseAll {
			mode = "ALL"
		}
		snap, _, err = c.pendingTx(ctx, func(p redis.Pipeliner) []redis.Cmder {
			return []redis.Cmder{p.Do(ctx, "CLIENT", "PAUSE", c.p.PauseFor.Milliseconds(), mode)}
		})
		f.End = f.Start.Add(c.p.PauseFor)
		time.Sleep(time.Until(f.End))
	case faultSleep:
		snap, _, err = c.pendingTx(ctx, func(p redis.Pipeliner) []redis.Cmder {
			return []redis.Cmder{p.Do(ctx, "DEBUG", "SLEEP", strconv.FormatFloat(c.p.PauseFor.Seconds(), 'f', 3, 64))}
		})
		f.End = time.Now()
	case faultClientKill:
		var cmds []redis.Cmder
		snap, cmds, err = c.pendingTx(ctx, func(p redis.Pipeliner) []redis.Cmder {
			return []redis.Cmder{
				p.Do(ctx, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"),
				p.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub", "SKIPME", "yes"),
			}
		})
		var killed int64
		for _, cmd := range cmds {
			if n, ok := cmd.(*redis.Cmd).Val().(int64); ok {
				killed += n
			}
		}
		f.End = time.Now()
		f.Note = fmt.Sprintf("%d connections killed", killed)
	case faultRestart:
		return c.restart(ctx, f)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", kind, err)
	}
	for g, gp := range snap {
		f.InFlight[g] = gp.total
	}
	c.faults = append(c.faults, f)
	c.logf("%s: %s; in flight %v", kind, f.End.Sub(f.Start).Round(time.Millisecond), f.InFlight)
	return nil
}

// restart kills Redis with SIGKILL (a crash) and starts it again from its
// AOF on the same port. In flight: the larger of the pending entries read
// just before the kill and those the restarted server has (with
// appendfsync always, exactly what it had when killed).
func (c *chaos) restart(ctx context.Context, f fault) error {
	before, errBefore := c.pendingRead(ctx)
	c.freshen(ctx)
	info, _ := c.ctl.Info(ctx, "persistence").Result()
	f.Start = time.Now()
	c.srv.kill()
	if err := c.srv.restart(60 * time.Second); err != nil {
		return fmt.Errorf("restart redis-server: %w", err)
	}
	f.End = time.Now()
	after, errAfter := c.pendingRead(ctx)
	for _, g := range groups {
		var n int64
		if errBefore == nil {
			n = before[g].total
		}
		if errAfter == nil {
			n = max(n, after[g].total)
		}
		f.InFlight[g] = n
	}
	if errBefore != nil || errAfter != nil {
		f.Note = fmt.Sprintf("pending before: %v, after: %v", errBefore, errAfter)
	}
	f.Note = strings.TrimSpace(f.Note + " aof_delayed_fsync before the kill: " + infoField(info, "aof_delayed_fsync"))
	c.faults = append(c.faults, f)
	c.logf("%s: down %s; in flight %v; %s", faultRestart, f.End.Sub(f.Start).Round(time.Millisecond), f.InFlight, f.Note)
	return nil
}

func infoField(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return "?"
}

// waitDrained waits until nothing waits or is pending anywhere: the
// delayed sets are empty and every group has read its streams to the end
// and acknowledged everything, twice in a row half a second apart.
func (c *chaos) waitDrained(deadline time.Time) (bool, error) {
	streak := 0
	var last error
	for time.Now().Before(deadline) {
		ok, err := c.drainedOnce()
		last = err
		if ok {
			streak++
			if streak == 2 {
				return true, nil
			}
		} else {
			streak = 0
		}
		time.Sleep(500 * time.Millisecond)
	}
	return false, last
}

func (c *chaos) drainedOnce() (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lanes := []stream.Lane{c.main}
	for _, g := range groups {
		lanes = append(lanes, c.retry[g])
	}
	for _, l := range lanes {
		n, err := c.ctl.ZCard(ctx, l.Delayed).Result()
		if err != nil {
			return false, err
		}
		if n > 0 {
			return false, fmt.Errorf("%d waiting in %s", n, l.Delayed)
		}
		info, err := c.ctl.XInfoStream(ctx, l.Stream).Result()
		if err != nil {
			return false, err
		}
		gs, err := c.ctl.XInfoGroups(ctx, l.Stream).Result()
		if err != nil {
			return false, err
		}
		for _, g := range gs {
			if g.Pending > 0 || g.LastDeliveredID != info.LastGeneratedID {
				return false, fmt.Errorf("group %s on %s: %d pending, last delivered %s of %s", g.Name, l.Stream, g.Pending, g.LastDeliveredID, info.LastGeneratedID)
			}
		}
	}
	return true, nil
}

// finalRedis is what Redis holds at the end, read for cross-checks.
type finalRedis struct {
	deadTokens  map[string]map[string]string // group -> token -> reason
	deadCount   map[string]int
	quarantined int64
	info        string
}

func (c *chaos) finalState() (*finalRedis, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f := &finalRedis{deadTokens: map[string]map[string]string{}, deadCount: map[string]int{}}
	for _, g := range groups {
		f.deadTokens[g] = map[string]string{}
		dl, err := group.NewDeadLetters(c.ctl, queueName, g, group.WithPrefix(keyPrefix))
		if err != nil {
			return f, err
		}
		after := ""
		for {
			es, err := dl.List(ctx, after, 500)
			if err != nil {
				return f, err
			}
			for _, e := range es {
				f.deadCount[g]++
				tok, _, ok := parsePayload(e.Envelope.Payload)
				if !ok {
					tok = "-"
				}
				f.deadTokens[g][tok] = e.Reason
				after = e.EntryID
			}
			if len(es) < 500 {
				break
			}
		}
	}
	for _, key := range []string{c.main.Quarantine, c.retry[groups[0]].Quarantine, c.retry[groups[1]].Quarantine} {
		n, err := c.ctl.XLen(ctx, key).Result()
		if err != nil {
			return f, err
		}
		f.quarantined += n
	}
	f.info, _ = c.ctl.Info(ctx, "persistence").Result()
	return f, nil
}
