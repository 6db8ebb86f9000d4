package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream"
)

// sysLimit is the child system of the limit scenarios: a consumer process
// of the bench group with the group's limits (limitChild).
const sysLimit = "limit"

// limitSpec is what the consumer processes of a limit scenario run: the
// group's rate limit (rate 0: none) and concurrency cap (0: none), the
// time each handler takes, and the workers of each process.
type limitSpec struct {
	rate, burst, concurrency, workers int
	hold                              time.Duration
}

// args are the child's command-line flags for s.
func (s limitSpec) args(addr string, promote bool) []string {
	return []string{"-system", sysLimit, "-addr", addr, "-workers", strconv.Itoa(s.workers),
		"-limit-rate", strconv.Itoa(s.rate), "-limit-burst", strconv.Itoa(s.burst),
		"-limit-concurrency", strconv.Itoa(s.concurrency), "-limit-hold", s.hold.String(),
		"-promote=" + strconv.FormatBool(promote)}
}

// limitChild is a consumer process of the limit scenarios: one Queue of
// the bench queue (promoting only if promote) handling the bench group
// with spec's limits. It prints "ready" once the group exists, then
// "s <unix ns>" as each handler starts and "e <unix ns>" as it ends; a
// "wait" line on stdin is answered with "wait <ns>", the group's
// Counters().LimitWait. It stops (draining its handlers) at the end of
// stdin, which also comes when the parent dies, and returns the Queue's
// failure if it fails first.
func limitChild(ctx context.Context, rdb *redis.Client, out chan<- string, spec limitSpec, promote bool) error {
	var qopts []delaystream.Option
	if !promote {
		qopts = append(qopts, delaystream.WithoutPromotion())
	}
	q, err := delaystream.New(rdb, benchQueue, qopts...)
	if err != nil {
		return err
	}
	gopts := []delaystream.GroupOption{delaystream.WithWorkers(spec.workers)}
	if spec.rate > 0 {
		gopts = append(gopts, delaystream.WithRateLimit(spec.rate, time.Second, spec.burst))
	}
	if spec.concurrency > 0 {
		gopts = append(gopts, delaystream.WithConcurrencyLimit(spec.concurrency))
	}
	g, err := q.Handle(benchGroup, func(context.Context, *delaystream.Delivery) error {
		out <- "s " + strconv.FormatInt(time.Now().UnixNano(), 10)
		if spec.hold > 0 {
			time.Sleep(spec.hold) // the handler's work
		}
		out <- "e " + strconv.FormatInt(time.Now().UnixNano(), 10)
		return nil
	}, gopts...)
	if err != nil {
		return err
	}
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	ran := make(chan error, 1)
	go func() { ran <- q.Run(rctx) }()
	if err := waitGroup(ctx, rdb); err != nil {
		stop()
		<-ran
		return err
	}
	out <- "ready"
	in := make(chan string)
	go func() {
		defer close(in)
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			in <- sc.Text()
		}
	}()
	for {
		select {
		case err := <-ran:
			return fmt.Errorf("the queue stopped before the parent asked: %v", err)
		case l, ok := <-in:
			if !ok {
				stop()
				return <-ran
			}
			if l == "wait" {
				out <- "wait " + strconv.FormatInt(int64(g.Counters().LimitWait), 10)
			}
		}
	}
}

// limitProc is one consumer process of a limit scenario, seen from the
// parent.
type limitProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *tailWriter
	ready  chan struct{}      // closed at the child's "ready"
	waits  chan time.Duration // its answers to "wait"
	exited chan error         // the child's exit, with its stderr if it failed
}

// limitFleet is the consumer processes of a limit scenario and the handler
// start and end times they reported, merged.
type limitFleet struct {
	procs        []*limitProc
	mu           sync.Mutex
	starts, ends []time.Time
	failed       chan error // the first child to exit before stop
	stopping     chan struct{}
}

// startLimitFleet starts n consumer processes (this binary re-executed
// with childFlag), the first promoting, and waits until each is ready.
// They are killed if this process dies (Pdeathsig) and stop at the end of
// their stdin; stop them with stop.
func startLimitFleet(addr string, n int, spec limitSpec) (*limitFleet, error) {
	f := &limitFleet{failed: make(chan error, n), stopping: make(chan struct{})}
	for i := range n {
		p := &limitProc{stderr: &tailWriter{max: 4096}, ready: make(chan struct{}), waits: make(chan time.Duration, 1), exited: make(chan error, 1)}
		var err error
		if p.cmd, err = childCommand(io.MultiWriter(os.Stderr, p.stderr), spec.args(addr, i == 0)...); err != nil {
			f.kill()
			return nil, err
		}
		if p.stdin, err = p.cmd.StdinPipe(); err != nil {
			f.kill()
			return nil, err
		}
		stdout, err := p.cmd.StdoutPipe()
		if err != nil {
			f.kill()
			return nil, err
		}
		if err := p.cmd.Start(); err != nil {
			f.kill()
			return nil, err
		}
		f.procs = append(f.procs, p)
		go f.read(i, p, stdout)
	}
	for i, p := range f.procs {
		select {
		case <-p.ready:
		case err := <-f.failed:
			f.kill()
			return nil, err
		case <-time.After(10 * time.Second):
			f.kill()
			return nil, fmt.Errorf("consumer process %d: not ready within 10 s; stderr: %s", i, p.stderr)
		}
	}
	return f, nil
}

// read takes child i's lines until its stdout ends, then reports its exit.
func (f *limitFleet) read(i int, p *limitProc, stdout io.Reader) {
	sc := bufio.NewScanner(stdout)
	var bad string
	for sc.Scan() {
		kind, v, _ := strings.Cut(sc.Text(), " ")
		n, err := strconv.ParseInt(v, 10, 64)
		switch {
		case kind == "ready":
			select {
			case <-p.ready:
			default:
				close(p.ready)
			}
		case err != nil:
			if bad == "" {
				bad = sc.Text()
			}
		case kind == "s" || kind == "e":
			f.mu.Lock()
			if kind == "s" {
				f.starts = append(f.starts, time.Unix(0, n))
			} else {
				f.ends = append(f.ends, time.Unix(0, n))
			}
			f.mu.Unlock()
		case kind == "wait":
			select {
			case p.waits <- time.Duration(n):
			default: // an answer nobody waits for any more
			}
		case bad == "":
			bad = sc.Text()
		}
	}
	err := p.cmd.Wait()
	switch {
	case err != nil:
		err = fmt.Errorf("consumer process %d: %v; stderr: %s", i, err, p.stderr)
	case bad != "":
		err = fmt.Errorf("consumer process %d: unexpected line %q", i, bad)
	}
	select {
	case <-f.stopping:
	default:
		if err == nil {
			err = fmt.Errorf("consumer process %d exited before it was stopped; stderr: %s", i, p.stderr)
		}
		f.failed <- err
	}
	p.exited <- err
}

// sleep waits d, or returns the failure of a child that exits meanwhile.
func (f *limitFleet) sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case err := <-f.failed:
		return err
	case <-t.C:
		return nil
	}
}

// limitWait returns the time every consumer waited for its limits, summed.
func (f *limitFleet) limitWait() (time.Duration, error) {
	var sum time.Duration
	for i, p := range f.procs {
		if _, err := io.WriteString(p.stdin, "wait\n"); err != nil {
			return 0, fmt.Errorf("consumer process %d: %w", i, err)
		}
		select {
		case w := <-p.waits:
			sum += w
		case err := <-f.failed:
			return 0, err
		case <-time.After(5 * time.Second):
			return 0, fmt.Errorf("consumer process %d: no answer to wait within 5 s", i)
		}
	}
	return sum, nil
}

// stop ends every child's stdin, so that each drains its handlers and
// exits, and waits for them (killing those that take over 30 s). It
// returns the first failure.
func (f *limitFleet) stop() error {
	close(f.stopping)
	for _, p := range f.procs {
		_ = p.stdin.Close()
	}
	var first error
	deadline := time.After(30 * time.Second)
	for i, p := range f.procs {
		select {
		case err := <-p.exited:
			first = firstErr(first, err)
		case <-deadline:
			f.kill()
			first = firstErr(first, fmt.Errorf("consumer process %d: not stopped within 30 s; stderr: %s", i, p.stderr))
		}
	}
	return first
}

// firstErr returns a if it is not nil, else b.
func firstErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// kill kills every child (their exits are reaped as their stdout ends).
func (f *limitFleet) kill() {
	select {
	case <-f.stopping:
	default:
		close(f.stopping)
	}
	for _, p := range f.procs {
		_ = p.cmd.Process.Kill()
	}
}

// times returns the handler starts and ends reported so far, each sorted.
func (f *limitFleet) times() (starts, ends []time.Time) {
	f.mu.Lock()
	starts, ends = slices.Clone(f.starts), slices.Clone(f.ends)
	f.mu.Unlock()
	slices.SortFunc(starts, time.Time.Compare)
	slices.SortFunc(ends, time.Time.Compare)
	return starts, ends
}

// tailWriter keeps the last max bytes written to it.
type tailWriter struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b = append(w.b, p...)
	if len(w.b) > w.max {
		w.b = w.b[len(w.b)-w.max:]
	}
	return len(p), nil
}

func (w *tailWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.b) == 0 {
		return "(empty)"
	}
	return strings.TrimSpace(string(w.b))
}

// limitMeasure is what a limit scenario measured over its window.
type limitMeasure struct {
	starts, ends []time.Time   // every handler's, the whole run, sorted
	in           int           // handler starts within the window
	window       time.Duration // the measurement window (after the warm-up)
	redis        redisDelta    // over the window
	wait         time.Duration // the consumers' LimitWait over the window, summed
}

// limitMeasureRun runs a limit scenario: -limit-consumers consumer
// processes with spec, the first also promoting, a backlog that keeps the
// limits busy (ceiling·(warm-up + window)·1.2 + 1000 messages, due at
// once), a warm-up of 1 s and then the window of -limit-duration.
func (b *bench) limitMeasureRun(ctx context.Context, spec limitSpec, ceiling float64) (limitMeasure, error) {
	cfg := b.cfg
	var m limitMeasure
	if err := b.admin.FlushAll(ctx).Err(); err != nil {
		return m, err
	}
	f, err := startLimitFleet(b.addr, cfg.limitConsumers, spec)
	if err != nil {
		return m, err
	}
	defer f.kill()
	const warm = time.Second
	backlog := int(ceiling*(cfg.limitDuration+warm).Seconds()*1.2) + 1000
	if err := scheduleNow(ctx, b.addr, backlog, cfg.payload); err != nil {
		return m, err
	}
	if err := f.sleep(ctx, warm); err != nil {
		return m, err
	}
	wait0, err := f.limitWait()
	if err != nil {
		return m, err
	}
	s0, err := takeSnap(ctx, b.admin)
	if err != nil {
		return m, err
	}
	t0 := time.Now()
	if err := f.sleep(ctx, cfg.limitDuration); err != nil {
		return m, err
	}
	s1, err := takeSnap(ctx, b.admin)
	if err != nil {
		return m, err
	}
	t1 := time.Now()
	wait1, err := f.limitWait()
	if err != nil {
		return m, err
	}
	if err := f.stop(); err != nil {
		return m, err
	}
	m.starts, m.ends = f.times()
	if len(m.starts) >= backlog {
		return m, fmt.Errorf("the backlog (%d) ran out: the limit was not busy all along", backlog)
	}
	for _, t := range m.starts {
		if !t.Before(t0) && t.Before(t1) {
			m.in++
		}
	}
	m.window, m.redis, m.wait = t1.Sub(t0), s0.delta(s1), wait1-wait0
	return m, nil
}

// scheduleNow schedules n messages of payload bytes on the bench queue,
// due at once, in batches of 1000, through a client of its own.
func scheduleNow(ctx context.Context, addr string, n, payload int) error {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	producer, err := delaystream.New(rdb, benchQueue, delaystream.WithoutPromotion())
	if err != nil {
		return err
	}
	items := make([]delaystream.Item, 0, 1000)
	for i := range n {
		items = append(items, delaystream.Item{Message: delaystream.Message{ID: "m" + strconv.Itoa(i), Payload: make([]byte, payload)},
			When: delaystream.After(0)})
		if len(items) == cap(items) || i == n-1 {
			if _, err := producer.ScheduleBatch(ctx, items); err != nil {
				return err
			}
			items = items[:0]
		}
	}
	return nil
}

// limitRun: one group rate-limited to -limit-rate per second with burst
// -limit-burst, consumed by -limit-consumers consumer processes (this
// binary re-executed; the first also promotes), -workers each. It reports
// the handled rate over the window, how far above the limit the handler
// starts went in any window of 100 ms, 1 s and 10 s (rate·w plus the burst
// is the most GCRA allows), and the Redis commands per second (inside
// scripts included) while limited.
func (b *bench) limitRun(ctx context.Context, sysName string, run int) (map[string]float64, error) {
	cfg := b.cfg
	spec := limitSpec{rate: cfg.limitRate, burst: cfg.limitBurst, workers: cfg.workers}
	m, err := b.limitMeasureRun(ctx, spec, float64(cfg.limitRate))
	if err != nil {
		return nil, err
	}
	rate := float64(m.in) / m.window.Seconds()
	vals := map[string]float64{
		"limit_rate":       rate,
		"limit_off":        (rate - float64(cfg.limitRate)) / float64(cfg.limitRate) * 100,
		"limit_cmds_per_s": float64(m.redis.calls) / m.window.Seconds(),
		"limit_cmds_msg":   float64(m.redis.calls) / float64(max(m.in, 1)),
		"limit_redis_cpu":  m.redis.cpu / m.window.Seconds(),
		"limit_wait_share": m.wait.Seconds() / m.window.Seconds() / float64(cfg.limitConsumers),
	}
	beyond, ok := excessOver(m.starts, float64(cfg.limitRate), m.window, func(w time.Duration, excess float64) {
		vals["limit_excess_"+w.String()] = excess
	})
	if ok {
		vals["limit_beyond_burst"] = beyond - float64(cfg.limitBurst)
	}
	b.noteOnce("limit", sysName, run, fmt.Sprintf("%d consumer processes, %d workers each, the first promoting; WithRateLimit(%d, 1s, %d)",
		cfg.limitConsumers, cfg.workers, cfg.limitRate, cfg.limitBurst))
	logf("limit: %d starts in %s; most commands: %s", m.in, m.window.Round(time.Millisecond), m.redis.top(6, float64(max(m.in, 1)), "/msg"))
	return vals, nil
}

// limitCapRun: one group capped at -limit-concurrency handlers at once
// (no rate limit), consumed by -limit-consumers consumer processes with
// max(-workers, cap) workers each, so that any one of them could exceed
// the cap alone; each handler takes -limit-hold. It reports the most
// handlers running at once over every process (from the merged start
// and end times of the whole run), the handled rate over the window
// beside the ceiling cap/hold, and the Redis commands per second.
func (b *bench) limitCapRun(ctx context.Context, sysName string, run int) (map[string]float64, error) {
	cfg := b.cfg
	spec := limitSpec{concurrency: cfg.limitConcurrency, workers: max(cfg.workers, cfg.limitConcurrency), hold: cfg.limitHold}
	ceiling := float64(cfg.limitConcurrency) / cfg.limitHold.Seconds()
	m, err := b.limitMeasureRun(ctx, spec, ceiling)
	if err != nil {
		return nil, err
	}
	running := mostRunning(m.starts, m.ends)
	vals := map[string]float64{
		"limitcap_cap":         float64(cfg.limitConcurrency),
		"limitcap_running_max": float64(running),
		"limitcap_over_cap":    float64(running - cfg.limitConcurrency),
		"limitcap_rate":        float64(m.in) / m.window.Seconds(),
		"limitcap_ceiling":     ceiling,
		"limitcap_cmds_per_s":  float64(m.redis.calls) / m.window.Seconds(),
		"limitcap_cmds_msg":    float64(m.redis.calls) / float64(max(m.in, 1)),
		"limitcap_redis_cpu":   m.redis.cpu / m.window.Seconds(),
		"limitcap_wait_share":  m.wait.Seconds() / m.window.Seconds() / float64(cfg.limitConsumers),
	}
	b.noteOnce("limitcap", sysName, run, fmt.Sprintf("%d consumer processes, %d workers each, the first promoting; WithConcurrencyLimit(%d), handlers of %s",
		cfg.limitConsumers, spec.workers, cfg.limitConcurrency, cfg.limitHold))
	logf("limitcap: %d starts in %s; most commands: %s", m.in, m.window.Round(time.Millisecond), m.redis.top(6, float64(max(m.in, 1)), "/msg"))
	return vals, nil
}

// excessOver calls f, for each window w of 100 ms, 1 s and 10 s no longer
// than window, with the most of the sorted starts in any window of length
// w minus rate·w; it returns the largest of those and whether there was
// one.
func excessOver(starts []time.Time, rate float64, window time.Duration, f func(w time.Duration, excess float64)) (float64, bool) {
	most, ok := 0.0, false
	for _, w := range []time.Duration{100 * time.Millisecond, time.Second, 10 * time.Second} {
		if w > window {
			continue
		}
		e := mostIn(starts, w) - rate*w.Seconds()
		f(w, e)
		if !ok || e > most {
			most, ok = e, true
		}
	}
	return most, ok
}

// mostIn returns the most of the sorted times ts within any window of
// length w.
func mostIn(ts []time.Time, w time.Duration) float64 {
	most, j := 0, 0
	for i := range ts {
		for j < len(ts) && ts[j].Sub(ts[i]) < w {
			j++
		}
		most = max(most, j-i)
	}
	return float64(most)
}

// mostRunning returns the most intervals open at once, given the sorted
// starts and sorted ends of intervals (an end without its start is
// ignored as the sweep goes; a start without an end stays open). An
// interval that ends at the instant another starts does not overlap it.
func mostRunning(starts, ends []time.Time) int {
	most, running, j := 0, 0, 0
	for _, s := range starts {
		for j < len(ends) && !ends[j].After(s) {
			j++
			running = max(running-1, 0)
		}
		running++
		most = max(most, running)
	}
	return most
}
