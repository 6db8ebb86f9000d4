package main

// The scenarios of the cost issue: backlog (the trickle over a large
// waiting set), burst1m (a burst of a million, with Redis memory while it
// drains) and curve (the trickle at several rates beside asynq). They are
// opt-in (-only), since each takes minutes at its real size.

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"math"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/codec"
	"github.com/delaystream/delaystream/internal/delay"
	"github.com/delaystream/delaystream/internal/scripts"
	"github.com/delaystream/delaystream/internal/stream"
	"github.com/delaystream/delaystream/internal/wire"
)

// backlogSeq is where the sequence numbers of the messages filled in as a
// backlog start: far above any scenario's tracker, so one delivered by
// mistake counts as stray rather than as a tracked message.
const backlogSeq = 1 << 40

// fillChunk is how many payloads are built at a time while filling.
const fillChunk = 10000

// fillWaiting schedules n messages with ScheduleMany (delaystream:
// ScheduleBatch of -batch items), each due at due(i), building the
// payloads a chunk at a time so the bench's heap stays small. Sequence
// numbers start at base.
func (b *bench) fillWaiting(ctx context.Context, sys system, n, base int, due func(i int) when, payloadDue func(i int) time.Time) error {
	ps := make([][]byte, 0, fillChunk)
	ws := make([]when, 0, fillChunk)
	for i := 0; i < n; i += fillChunk {
		ps, ws = ps[:0], ws[:0]
		for j := i; j < min(i+fillChunk, n); j++ {
			ps = append(ps, payloadFor(base+j, payloadDue(j), b.cfg.payload))
			ws = append(ws, due(j))
		}
		if err := sys.ScheduleMany(ctx, ps, ws); err != nil {
			return err
		}
	}
	return nil
}

// settleHeap returns the fill's garbage to the OS, so the bench's own GC
// (it hosts the mover and the consumer) does not run while measuring.
func settleHeap() {
	runtime.GC()
	debug.FreeOSMemory()
}

// backlog: backlogN messages due in 1 h waiting in the delayed set, then
// the trickle (rate msg/s for the duration, delays in [0, 3 s]) on top.
// With -backlog-ab (default) each run also runs the same trickle on an
// empty server, before the backlog in odd runs and after it in even ones,
// so the two compare within one window of a shared machine. delaystream
// only.
func (b *bench) backlog(ctx context.Context, sysName string, run int) (map[string]float64, error) {
	if !b.cfg.backlogAB {
		return b.backlogOnce(ctx, sysName, run, b.cfg.backlogN)
	}
	var with, without map[string]float64
	var err error
	for i := range 2 {
		if (i == 0) == (run%2 == 1) {
			without, err = b.backlogOnce(ctx, sysName, run, 0)
		} else {
			with, err = b.backlogOnce(ctx, sysName, run, b.cfg.backlogN)
		}
		if err != nil {
			return nil, err
		}
	}
	for k, x := range without {
		with["base_"+k] = x
	}
	return with, nil
}

// backlogOnce fills n waiting messages (none: n = 0) and runs the trickle.
func (b *bench) backlogOnce(ctx context.Context, sysName string, run, n int) (map[string]float64, error) {
	sys, err := b.fresh(ctx, sysName)
	if err != nil {
		return nil, err
	}
	defer sys.Close()
	timer := scriptTimerOf(sys)
	hour := time.Now().Add(time.Hour)
	filled := sys
	if b.cfg.backlogElsewhere && n > 0 {
		// The control: the same messages in another queue of the same
		// Redis (same memory, no mover), the trickle's delayed set small.
		other, err := newDS(b.addr, b.cfg, false)
		if err != nil {
			return nil, err
		}
		defer other.Close()
		if other.q, err = delaystream.New(other.rdb, benchQueue+"-elsewhere", delaystream.WithoutPromotion()); err != nil {
			return nil, err
		}
		layout, err := stream.NewLayout(delaystream.DefaultPrefix, benchQueue+"-elsewhere", 1)
		if err != nil {
			return nil, err
		}
		other.keys = layout.Shard(0)
		filled = other
	}
	t0 := time.Now()
	if err := b.fillWaiting(ctx, filled, n, backlogSeq, func(int) when { return when{in: time.Hour} },
		func(int) time.Time { return hour }); err != nil {
		return nil, fmt.Errorf("fill: %w", err)
	}
	fill := time.Since(t0)
	settleHeap()
	time.Sleep(200 * time.Millisecond)
	if n > 0 {
		time.Sleep(b.cfg.backlogSettle)
	}
	waiting, err := b.waitingCount(ctx, filled)
	if err != nil {
		return nil, err
	}
	logf("backlog %s run %d: %d waiting (filled at %.0f msg/s); trickle %d msg/s for %s", sysName, run, waiting, float64(n)/fill.Seconds(), b.cfg.rate, b.cfg.duration)

	// Evidence for where lateness goes: Redis's slow log (server-side
	// execution time of each call over 1 ms, by script), its latency
	// monitor, the client-side round trip of every promote call, and the
	// bench process's garbage collections (it hosts mover and consumer).
	restore, err := b.watchSlow(ctx, 1000)
	if err != nil {
		return nil, err
	}
	defer restore()
	timer.reset()
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	stopCanary := canary(ctx, time.Millisecond)
	v, err := b.trickleOn(ctx, sys, sysName, run, "backlog", fmt.Sprintf("%d waiting", waiting), b.cfg.rate, b.cfg.duration)
	if err != nil {
		return nil, err
	}
	runtime.ReadMemStats(&ms1)
	over := stopCanary()
	if len(over) > 0 {
		v["canary_p99"] = pctDur(over, .99).Seconds()
		v["canary_max"] = over[len(over)-1].Seconds()
	}
	if n > 0 {
		v["fill_rate"] = float64(n) / fill.Seconds()
	}
	v["waiting"] = float64(waiting)
	if lat := timer.durations("promote"); len(lat) > 0 {
		v["promote_call_p50"] = pctDur(lat, .5).Seconds()
		v["promote_call_p99"] = pctDur(lat, .99).Seconds()
		v["promote_call_max"] = lat[len(lat)-1].Seconds()
	}
	slow, err := b.slowCalls(ctx)
	if err != nil {
		return nil, err
	}
	v["slow_promote"] = float64(slow.count["promote"])
	what := fmt.Sprintf("run %d, %d waiting", run, waiting)
	b.res.note("backlog", sysName, what+": "+slow.String())
	if ll := b.latencyLatest(ctx); ll != "" {
		b.res.note("backlog", sysName, fmt.Sprintf("%s: LATENCY LATEST (events over 1 ms): %s", what, ll))
	}
	b.res.note("backlog", sysName, fmt.Sprintf("%s: promote call round trip (client side, %d calls): %s; schedule calls: %s",
		what, len(timer.durations("promote")), durSummary(timer.durations("promote")), durSummary(timer.durations("schedule"))))
	b.res.note("backlog", sysName, fmt.Sprintf("%s: bench process during the trickle: %d GCs, pauses %s in all, heap %d MB; a 1 ms sleep overshot by %s (%d of %d sleeps by more than 5 ms)",
		what, ms1.NumGC-ms0.NumGC, time.Duration(ms1.PauseTotalNs-ms0.PauseTotalNs).Round(time.Microsecond), ms1.HeapAlloc>>20,
		durSummary(over), countOver(over, 5*time.Millisecond), len(over)))
	return v, nil
}

// canary sleeps for d in a loop until stopped and returns by how much each
// sleep overshot, sorted: how late a goroutine of this process (the mover's,
// say) wakes on this machine, whatever Redis does.
func canary(ctx context.Context, d time.Duration) (stop func() []time.Duration) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan []time.Duration, 1)
	go func() {
		var over []time.Duration
		for ctx.Err() == nil {
			t := time.Now()
			time.Sleep(d)
			over = append(over, time.Since(t)-d)
		}
		slices.Sort(over)
		done <- over
	}()
	return func() []time.Duration { cancel(); return <-done }
}

// countOver counts the durations above d.
func countOver(xs []time.Duration, d time.Duration) int {
	n := 0
	for _, x := range xs {
		if x > d {
			n++
		}
	}
	return n
}

// waitingCount returns how many messages wait in the delayed set (delaystream).
func (b *bench) waitingCount(ctx context.Context, sys system) (int64, error) {
	ds, ok := sys.(*dsSystem)
	if !ok {
		return 0, nil
	}
	return b.admin.ZCard(ctx, ds.keys.Main().Delayed).Result()
}

// watchSlow makes Redis log every call slower than usec in its slow log
// and latency monitor, both emptied; restore puts back the defaults.
func (b *bench) watchSlow(ctx context.Context, usec int) (restore func(), err error) {
	for _, kv := range [][2]string{
		{"slowlog-log-slower-than", strconv.Itoa(usec)}, {"slowlog-max-len", "10000"},
		{"latency-monitor-threshold", strconv.Itoa(max(1, usec/1000))},
	} {
		if err := b.admin.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
			return nil, err
		}
	}
	if err := b.admin.SlowLogReset(ctx).Err(); err != nil {
		return nil, err
	}
	if err := b.admin.Do(ctx, "LATENCY", "RESET").Err(); err != nil {
		return nil, err
	}
	return func() {
		ctx := context.WithoutCancel(ctx)
		_ = b.admin.ConfigSet(ctx, "slowlog-log-slower-than", "10000").Err()
		_ = b.admin.ConfigSet(ctx, "slowlog-max-len", "128").Err()
		_ = b.admin.ConfigSet(ctx, "latency-monitor-threshold", "0").Err()
	}, nil
}

// slowReport counts the slow log's entries by script (or command).
type slowReport struct {
	total int
	count map[string]int
	usec  map[string][]int64 // execution times, sorted
}

// scriptNames maps the library's script hashes to names.
var scriptNames = map[string]string{
	scripts.Promote.Hash():           "promote",
	scripts.Schedule.Hash():          "schedule",
	scripts.ScheduleGenerated.Hash(): "schedule",
	scripts.Trim.Hash():              "trim",
	scripts.Retry.Hash():             "retry",
	scripts.Extend.Hash():            "extend",
	scripts.Stats.Hash():             "stats",
}

// classifySlow names a slow-log entry: the library's script for
// EVALSHA/EVAL, else the command.
func classifySlow(args []string) string {
	if len(args) == 0 {
		return "?"
	}
	cmd := strings.ToLower(args[0])
	if (cmd == "evalsha" || cmd == "evalsha_ro") && len(args) > 1 {
		if n, ok := scriptNames[args[1]]; ok {
			return n
		}
		return "other script"
	}
	return cmd
}

func (b *bench) slowCalls(ctx context.Context) (slowReport, error) {
	r := slowReport{count: map[string]int{}, usec: map[string][]int64{}}
	logs, err := b.admin.SlowLogGet(ctx, -1).Result()
	if err != nil {
		return r, err
	}
	for _, l := range logs {
		name := classifySlow(l.Args)
		if ownCommands[name] || name == "slowlog" || name == "config" || name == "latency" {
			continue
		}
		r.total++
		r.count[name]++
		r.usec[name] = append(r.usec[name], l.Duration.Microseconds())
	}
	for _, xs := range r.usec {
		slices.Sort(xs)
	}
	return r, nil
}

func (r slowReport) String() string {
	if r.total == 0 {
		return "SLOWLOG: no call over 1 ms of Redis execution time"
	}
	names := make([]string, 0, len(r.count))
	for n := range r.count {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		return r.count[names[i]] > r.count[names[j]] || r.count[names[i]] == r.count[names[j]] && names[i] < names[j]
	})
	parts := make([]string, 0, len(names))
	for _, n := range names {
		xs := r.usec[n]
		parts = append(parts, fmt.Sprintf("%s %d (median %.1f ms, max %.1f ms)", n, r.count[n], float64(xs[len(xs)/2])/1e3, float64(xs[len(xs)-1])/1e3))
	}
	return "SLOWLOG calls over 1 ms of Redis execution time: " + strings.Join(parts, ", ")
}

// latencyLatest returns LATENCY LATEST as "event max ms (count)".
func (b *bench) latencyLatest(ctx context.Context) string {
	res, err := b.admin.Do(ctx, "LATENCY", "LATEST").Slice()
	if err != nil {
		return ""
	}
	var parts []string
	for _, e := range res {
		f, ok := e.([]any)
		if !ok || len(f) < 4 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%v: latest %v ms, max %v ms", f[0], f[2], f[3]))
	}
	return strings.Join(parts, "; ")
}

// ---- client-side timing of script calls ----

// scriptTimer is a go-redis hook that records the round trip of every call
// of the library's scripts (EVALSHA / EVAL), by script name. Installed on
// the delaystream systems' client; it only reads commands.
type scriptTimer struct {
	mu   sync.Mutex
	durs map[string][]time.Duration
}

func newScriptTimer() *scriptTimer { return &scriptTimer{durs: map[string][]time.Duration{}} }

func (t *scriptTimer) reset() {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.durs = map[string][]time.Duration{}
	t.mu.Unlock()
}

// durations returns the recorded round trips of a script, sorted.
func (t *scriptTimer) durations(name string) []time.Duration {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	xs := slices.Clone(t.durs[name])
	t.mu.Unlock()
	slices.Sort(xs)
	return xs
}

// scriptOf names the library script a command runs ("" for anything
// else): EVALSHA by its hash, EVAL (go-redis's fallback) by its source's.
func scriptOf(cmd redis.Cmder) string {
	n := cmd.Name()
	if n != "evalsha" && n != "eval" {
		return ""
	}
	args := cmd.Args()
	if len(args) < 2 {
		return ""
	}
	s, _ := args[1].(string)
	if n == "eval" {
		h := sha1.Sum([]byte(s))
		s = hex.EncodeToString(h[:])
	}
	return scriptNames[s]
}

func (t *scriptTimer) record(name string, d time.Duration) {
	t.mu.Lock()
	t.durs[name] = append(t.durs[name], d)
	t.mu.Unlock()
}

func (t *scriptTimer) DialHook(next redis.DialHook) redis.DialHook { return next }

func (t *scriptTimer) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		name := scriptOf(cmd)
		if name == "" {
			return next(ctx, cmd)
		}
		start := time.Now()
		err := next(ctx, cmd)
		t.record(name, time.Since(start))
		return err
	}
}

func (t *scriptTimer) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		start := time.Now()
		err := next(ctx, cmds)
		d := time.Since(start)
		for _, c := range cmds {
			if name := scriptOf(c); name != "" {
				t.record(name, d)
			}
		}
		return err
	}
}

// scriptTimerOf starts timing the script calls of a delaystream system
// (nil for another).
func scriptTimerOf(sys system) *scriptTimer {
	if ds, ok := sys.(*dsSystem); ok {
		return ds.timeScripts()
	}
	return nil
}

func pctDur(xs []time.Duration, p float64) time.Duration {
	i := int(math.Ceil(p*float64(len(xs)))) - 1
	return xs[max(0, min(i, len(xs)-1))]
}

// durSummary is "p50 / p99 / max" of sorted durations in ms.
func durSummary(xs []time.Duration) string {
	if len(xs) == 0 {
		return "none"
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d)/1e6) }
	return fmt.Sprintf("p50 %s / p99 %s / max %s ms", ms(pctDur(xs, .5)), ms(pctDur(xs, .99)), ms(xs[len(xs)-1]))
}

// ---- burst1m ----

// memSample is one reading taken while a burst drains.
type memSample struct {
	at      time.Time
	used    int64 // used_memory
	xlen    int64 // the stream's length
	waiting int64 // the delayed set's size
}

// memPeaks is what the samples of a drain show.
type memPeaks struct {
	used, xlen int64
	// beyond is the largest used_memory above the baseline and what the
	// messages still waiting account for (waiting × perWaiting): the
	// stream, the group's pending entries, buffers.
	beyond  int64
	samples int
}

// peaks reduces the samples: base is used_memory before filling and
// perWaiting the bytes one waiting message takes.
func peaks(xs []memSample, base int64, perWaiting float64) memPeaks {
	var p memPeaks
	p.beyond = math.MinInt64
	for _, s := range xs {
		p.samples++
		p.used = max(p.used, s.used)
		p.xlen = max(p.xlen, s.xlen)
		p.beyond = max(p.beyond, s.used-base-int64(float64(s.waiting)*perWaiting))
	}
	if p.samples == 0 {
		p.beyond = 0
	}
	return p
}

// xlenSeries describes the stream's length over time from t0 on, one
// sample per step: "+0s 802k, +5s 702k, ...", for the notes.
func xlenSeries(xs []memSample, t0 time.Time, step time.Duration) string {
	var parts []string
	next := t0
	for _, s := range xs {
		if s.at.Before(next) {
			continue
		}
		parts = append(parts, fmt.Sprintf("+%.0fs %.0fk", s.at.Sub(t0).Seconds(), float64(s.xlen)/1000))
		for !next.After(s.at) {
			next = next.Add(step)
		}
	}
	return strings.Join(parts, ", ")
}

// sampleMemory reads used_memory, the stream's length and the delayed
// set's size every interval until stop is called, which returns the samples.
func sampleMemory(ctx context.Context, rdb *redis.Client, streamKey, delayedKey string, every time.Duration) (stop func() []memSample) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan []memSample, 1)
	go func() {
		var xs []memSample
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			p := rdb.Pipeline()
			info := p.Info(ctx, "memory")
			xl := p.XLen(ctx, streamKey)
			zc := p.ZCard(ctx, delayedKey)
			if _, err := p.Exec(ctx); err == nil {
				used, _ := strconv.ParseInt(infoField(info.Val(), "used_memory"), 10, 64)
				xs = append(xs, memSample{at: time.Now(), used: used, xlen: xl.Val(), waiting: zc.Val()})
			}
			select {
			case <-ctx.Done():
				done <- xs
				return
			case <-t.C:
			}
		}
	}()
	return func() []memSample { cancel(); return <-done }
}

// streamEntryBytes measures the Redis memory of one stream entry as the
// promote script appends a packed member (fields d and p; the member is
// 0x01, a generated id's random part and the envelope of the bench
// payload): k entries appended to a scratch stream, used_memory delta / k.
func (b *bench) streamEntryBytes(ctx context.Context, k int) (float64, error) {
	const key = "bench:entry-size"
	due := time.Now()
	env := wire.MarshalEnvelope(&codec.Envelope{Payload: payloadFor(0, due, b.cfg.payload), Attempt: 1, Created: due})
	s0, err := takeSnap(ctx, b.admin)
	if err != nil {
		return 0, err
	}
	for i := 0; i < k; i += 1000 {
		p := b.admin.Pipeline()
		for j := i; j < min(i+1000, k); j++ {
			id := delay.NewID()
			p.XAdd(ctx, &redis.XAddArgs{Stream: key, Values: []any{"d", due.UnixMilli(), "p", "\x01" + id[10:] + string(env)}})
		}
		if _, err := p.Exec(ctx); err != nil {
			return 0, err
		}
	}
	s1, err := takeSnap(ctx, b.admin)
	if err != nil {
		return 0, err
	}
	if err := b.admin.Del(ctx, key).Err(); err != nil {
		return 0, err
	}
	return float64(s1.mem-s0.mem) / float64(k), nil
}

// burstBig: bigN messages (1M) all due at one instant, consumers running;
// delivery rate, due -> last, and Redis memory while the burst drains.
// delaystream only.
func (b *bench) burstBig(ctx context.Context, sysName string, run int) (map[string]float64, error) {
	n := b.cfg.bigN
	lead := 2*time.Second + time.Duration(float64(n)/100000*float64(time.Second))
	return withLead("burst1m "+sysName, lead, func(lead time.Duration) (map[string]float64, bool, error) {
		return b.burstBigOnce(ctx, sysName, run, lead)
	})
}

func (b *bench) burstBigOnce(ctx context.Context, sysName string, run int, lead time.Duration) (map[string]float64, bool, error) {
	n := b.cfg.bigN
	sys, err := b.fresh(ctx, sysName)
	if err != nil {
		return nil, false, err
	}
	defer sys.Close()
	ds, ok := sys.(*dsSystem)
	if !ok {
		return nil, false, fmt.Errorf("burst1m runs delaystream only")
	}
	keys := ds.keys.Main()
	perEntry, err := b.streamEntryBytes(ctx, min(n, 100000))
	if err != nil {
		return nil, false, fmt.Errorf("entry size: %w", err)
	}
	tr := newTracker(n)
	if err := sys.Start(ctx, tr.handler); err != nil {
		return nil, false, err
	}
	settleHeap()
	time.Sleep(300 * time.Millisecond)
	s0, err := takeSnap(ctx, b.admin)
	if err != nil {
		return nil, false, err
	}
	due := time.Now().Add(lead).Truncate(time.Second).Add(time.Second)
	t0 := time.Now()
	if err := b.fillWaiting(ctx, sys, n, 0, func(int) when { return when{at: due, abs: true} },
		func(int) time.Time { return due }); err != nil {
		return nil, false, err
	}
	schedDur := time.Since(t0)
	s1, err := takeSnap(ctx, b.admin)
	if err != nil {
		return nil, false, err
	}
	waiting, _ := b.admin.ZCard(ctx, keys.Delayed).Result()
	if time.Now().After(due.Add(-50 * time.Millisecond)) {
		return nil, true, nil
	}
	settleHeap()
	stop := sampleMemory(ctx, b.admin, keys.Stream, keys.Delayed, 50*time.Millisecond)
	c1 := clientCPU()
	timeout := time.Until(due) + 60*time.Second + time.Duration(n/10000)*time.Second
	complete := tr.wait(timeout)
	time.Sleep(200 * time.Millisecond)
	c2 := clientCPU()
	s2, err := takeSnap(ctx, b.admin)
	if err != nil {
		return nil, false, err
	}
	// The stream left when all is delivered, and how long trimming takes to
	// bring it below 1 % of n (sampling goes on meanwhile).
	xlenDelivered, _ := b.admin.XLen(ctx, keys.Stream).Result()
	trimmedAfter := math.NaN()
	tDel := time.Now()
	for time.Since(tDel) < b.cfg.trimWait {
		xl, err := b.admin.XLen(ctx, keys.Stream).Result()
		if err == nil && xl <= int64(n/100) {
			trimmedAfter = time.Since(tDel).Seconds()
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	samples := stop()
	info, _ := b.admin.Info(ctx, "memory").Result()
	allTimePeak, _ := strconv.ParseInt(infoField(info, "used_memory_peak"), 10, 64)
	xlenEnd, _ := b.admin.XLen(ctx, keys.Stream).Result()
	memEnd := s2.mem
	if u, err := strconv.ParseInt(infoField(info, "used_memory"), 10, 64); err == nil {
		memEnd = u
	}
	sum := tr.summarize()
	if !complete {
		b.res.note("burst1m", sysName, fmt.Sprintf("run %d: only %d of %d delivered within %s", run, sum.delivered, n, timeout.Round(time.Second)))
	}
	perWaiting := float64(s1.mem-s0.mem) / float64(max(waiting, 1))
	pk := peaks(samples, s0.mem, perWaiting)
	worth := perEntry * float64(n)
	del := s1.delta(s2)
	dn := float64(max(sum.delivered, 1))
	v := map[string]float64{
		"sched_rate":         float64(n) / schedDur.Seconds(),
		"lost":               float64(sum.lost),
		"dups":               float64(sum.dups),
		"early":              float64(sum.early),
		"mem_before":         float64(s0.mem),
		"mem_waiting":        float64(s1.mem),
		"mem_peak":           float64(pk.used),
		"mem_delivered":      float64(s2.mem),
		"mem_end":            float64(memEnd),
		"xlen_delivered":     float64(xlenDelivered),
		"trimmed_after":      trimmedAfter,
		"bytes_per_waiting":  perWaiting,
		"entry_bytes":        perEntry,
		"entries_worth":      worth,
		"beyond_peak":        float64(pk.beyond),
		"beyond_ratio":       float64(pk.beyond) / worth,
		"peak_over_waiting":  float64(pk.used-s0.mem) / float64(max(s1.mem-s0.mem, 1)),
		"xlen_peak":          float64(pk.xlen),
		"xlen_peak_ratio":    float64(pk.xlen) / float64(n),
		"xlen_end":           float64(xlenEnd),
		"cmds_per_msg":       float64(del.calls) / dn,
		"redis_cpu_per_msg":  del.cpu / dn,
		"client_cpu_per_msg": (c2 - c1).Seconds() / dn,
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
		v["lat_p50"], v["lat_p99"], v["lat_max"] = sum.p50.Seconds(), sum.p99.Seconds(), sum.max.Seconds()
		v["promote_p99"], v["consume_p99"] = sum.promoteP99.Seconds(), sum.consumeP99.Seconds()
	}
	b.res.note("burst1m", sysName, fmt.Sprintf("run %d: %d memory samples every 50 ms; used_memory before %s, all waiting %s, peak while draining %s, all delivered %s, at the end %s; INFO used_memory_peak %s (all-time: CONFIG RESETSTAT does not reset it on Redis 7.0)",
		run, pk.samples, mb(s0.mem), mb(s1.mem), mb(pk.used), mb(s2.mem), mb(memEnd), mb(allTimePeak)))
	b.res.note("burst1m", sysName, fmt.Sprintf("run %d: stream length peak %d (%.1f %% of n), when all delivered %d, %.1f s later %d (trimmed below 1 %% of n after %.1f s; NaN = not within %s); one stream entry %.0f B (measured on a scratch stream), so %d entries' worth = %s; peak beyond the waiting set %s = %.3f of that",
		run, pk.xlen, 100*float64(pk.xlen)/float64(n), xlenDelivered, time.Since(tDel).Seconds(), xlenEnd, trimmedAfter, b.cfg.trimWait, perEntry, n, mb(int64(worth)), mb(pk.beyond), float64(pk.beyond)/worth))
	b.res.note("burst1m", sysName, fmt.Sprintf("run %d: stream length from the due time, every 2 s: %s", run, xlenSeries(samples, due, 2*time.Second)))
	b.noteOnce("burst1m", sysName, run, "delivery commands: "+del.top(10, dn, "per delivered msg"))
	return v, false, nil
}

// mb formats bytes as MB with one decimal.
func mb(x int64) string { return fmt.Sprintf("%.1f MB", float64(x)/(1<<20)) }

// ---- curve ----

// parseRates parses the -curve-rates list: positive integers, comma-separated.
func parseRates(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		r, err := strconv.Atoi(f)
		if err != nil || r <= 0 {
			return nil, fmt.Errorf("bad rate %q in -curve-rates %q", f, s)
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("-curve-rates %q has no rate", s)
	}
	return out, nil
}

// curveKeys are the trickle figures the curve keeps per rate.
var curveKeys = []string{"redis_cpu_per_msg", "redis_sys_per_msg", "cmds_per_msg", "reads_per_msg", "lat_p50", "lat_p99", "lat_max", "early_pct", "lost", "dups", "client_cpu_per_msg",
	"producer_cpu_per_msg", "delivery_cpu_per_msg", "idle_cpu_per_msg"}

func curveKey(rate int, k string) string { return fmt.Sprintf("r%d_%s", rate, k) }

// curve runs the trickle at each rate for each system, alternating
// systems within each rate and rates within each run.
func (b *bench) curve(ctx context.Context, systems []string) {
	for run := 1; run <= b.cfg.runs; run++ {
		for _, rate := range b.cfg.curveRates {
			idle := math.NaN()
			if b.cfg.curveSplit {
				var err error
				if idle, err = b.serverIdle(ctx, rate); err != nil {
					logf("curve %d msg/s run %d: the server idle: %v", rate, run, err)
					idle = math.NaN()
				}
			}
			for _, sysName := range systems {
				logf("curve %s %d msg/s run %d/%d (load %s)", sysName, rate, run, b.cfg.runs, loadAvg())
				v, err := b.curveOnce(ctx, sysName, run, rate)
				if err != nil {
					logf("curve %s %d msg/s run %d: %v", sysName, rate, run, err)
					b.res.note("curve", sysName, fmt.Sprintf("%d msg/s run %d failed: %v", rate, run, err))
					continue
				}
				if !math.IsNaN(idle) {
					v["idle_cpu_per_msg"] = idle
				}
				out := map[string]float64{}
				for _, k := range curveKeys {
					if x, ok := v[k]; ok {
						out[curveKey(rate, k)] = x
					}
				}
				b.res.add("curve", sysName, run, out)
				split := ""
				if p, ok := v["producer_cpu_per_msg"]; ok {
					split = fmt.Sprintf("; producer alone %.1f µs/msg, server idle %.1f µs/msg", p*1e6, idle*1e6)
				}
				logf("curve %s %d msg/s run %d: Redis CPU %.1f µs/msg, %.2f cmds/msg, lateness p50 %.2f p99 %.2f ms, early %.1f %%%s",
					sysName, rate, run, v["redis_cpu_per_msg"]*1e6, v["cmds_per_msg"], v["lat_p50"]*1e3, v["lat_p99"]*1e3, v["early_pct"], split)
			}
		}
	}
}

func (b *bench) curveOnce(ctx context.Context, sysName string, run, rate int) (map[string]float64, error) {
	sys, err := b.freshCurve(ctx, sysName)
	if err != nil {
		return nil, err
	}
	var v map[string]float64
	if b.cfg.curveLead > 0 {
		v, err = b.steadyOn(ctx, sys, sysName, run, rate, b.cfg.curveWindow(rate))
	} else {
		v, err = b.trickleOn(ctx, sys, sysName, run, "curve", fmt.Sprintf("%d msg/s", rate), rate, b.cfg.curveWindow(rate))
	}
	sys.Close()
	if err != nil || !b.cfg.curveSplit {
		return v, err
	}
	tail := time.Duration(v["tail"] * float64(time.Second))
	p, err := b.producerAlone(ctx, sysName, run, rate, b.cfg.curveWindow(rate), tail)
	if err != nil {
		return nil, fmt.Errorf("producer alone: %w", err)
	}
	v["producer_cpu_per_msg"] = p
	v["delivery_cpu_per_msg"] = v["redis_cpu_per_msg"] - p
	return v, nil
}

// freshCurve empties the server and returns a new system for the curve:
// on -curve-queues queues.
func (b *bench) freshCurve(ctx context.Context, sysName string) (system, error) {
	if err := b.admin.FlushAll(ctx).Err(); err != nil {
		return nil, err
	}
	cfg := b.cfg
	cfg.queues = cfg.curveQueues
	return newSystem(sysName, b.addr, cfg)
}

// producerAlone runs the curve's producer of sysName on a fresh server
// with nothing else started (nothing promotes, takes or consumes): the
// same messages at the same pace as its curve run, then tail with
// nothing sent, as the curve run's window ended tail after its last
// message. It returns the server's CPU per message over that window, so
// that the curve run's figure less this one is what delivery cost. The
// delayed set grows over the window instead of draining (every system's
// alike), and no wake-up reaches anyone.
func (b *bench) producerAlone(ctx context.Context, sysName string, run, rate int, dur, tail time.Duration) (float64, error) {
	sys, err := b.freshCurve(ctx, sysName)
	if err != nil {
		return 0, err
	}
	defer sys.Close()
	n := max(1, int(float64(rate)*dur.Seconds()))
	s0, err := takeSnap(ctx, b.admin)
	if err != nil {
		return 0, err
	}
	behind, err := b.paceTrickle(ctx, sys, run, rate, n, 0)
	if err != nil {
		return 0, err
	}
	if behind > n/100 {
		b.res.note("curve", sysName, fmt.Sprintf("%d msg/s run %d, producer alone: fell > 50 ms behind its pace for %d of %d messages", rate, run, behind, n))
	}
	time.Sleep(tail)
	s1, err := takeSnap(ctx, b.admin)
	if err != nil {
		return 0, err
	}
	return s0.delta(s1).cpu / float64(n), nil
}

// serverIdle returns the server's CPU, empty and with nothing but the
// bench's own snapshots, over a curve window at rate (its pace and a
// tail of 3.2 s), per message the window would carry: the share of every
// system's figure at that rate that no system causes.
func (b *bench) serverIdle(ctx context.Context, rate int) (float64, error) {
	if err := b.admin.FlushAll(ctx).Err(); err != nil {
		return 0, err
	}
	dur := b.cfg.curveWindow(rate)
	n := max(1, int(float64(rate)*dur.Seconds()))
	s0, err := takeSnap(ctx, b.admin)
	if err != nil {
		return 0, err
	}
	time.Sleep(time.Duration(n)*(time.Second/time.Duration(rate)) + 3200*time.Millisecond)
	s1, err := takeSnap(ctx, b.admin)
	if err != nil {
		return 0, err
	}
	return s0.delta(s1).cpu / float64(n), nil
}

// curveWindows describes each rate's window, rates ascending, as "40s at 50
// msg/s, 10s at 500 msg/s".
func (c config) curveWindows() string {
	rates := slices.Clone(c.curveRates)
	slices.Sort(rates)
	parts := make([]string, 0, len(rates))
	for _, r := range rates {
		parts = append(parts, fmt.Sprintf("%s at %d msg/s", c.curveWindow(r), r))
	}
	return strings.Join(parts, ", ")
}

// curveWindow returns how long the curve runs at rate: -curve-duration, or
// longer where that holds fewer than -curve-min-msgs messages. A low rate's
// cost per message is noisy over a few hundred messages (each is a wake-up
// of an otherwise idle server).
func (c config) curveWindow(rate int) time.Duration {
	d := c.curveDuration
	if rate > 0 && c.curveMinMsgs > 0 {
		d = max(d, time.Duration(c.curveMinMsgs)*time.Second/time.Duration(rate))
	}
	return d
}
