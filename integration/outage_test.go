package integration

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os/exec"
	"runtime"
	"slices"
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
	"github.com/delaystream/delaystream/internal/mover"
	"github.com/delaystream/delaystream/internal/redistest"
)

// TestRedisOutage takes Redis away for 10 s while a producer, a mover and
// three consumers (two of group "a", one of group "b") work on 300
// messages due over 20 s, then brings it back on the same port and
// directory (appendonly yes, appendfsync always: the restart keeps every
// acknowledged write). While it is down, the test measures what the
// library does to the network and to its logs: connection attempts per
// second (a counting Dialer), log lines per component and message, and how
// fast and how clearly Schedule fails. After the restart it checks that
// every message scheduled before the outage, and every Schedule that
// returned nil, reaches both groups, none before its due time by the Redis
// clock, and that delivery resumes within 5 s.
//
// It runs twice at once, each on a redis-server of its own: once with one
// *redis.Client shared by every component (a program that runs them all,
// and the bound on connection attempts is for that client), and once with
// a client per component (as separate processes would have), which tells
// the components' attempts apart. Both use go-redis's default options
// (dial timeout 5 s, 3 retries, 5 dial attempts 100 ms apart per
// connection), as a user who sets none would.
func TestRedisOutage(t *testing.T) {
	t.Parallel()
	for _, perComponent := range []bool{false, true} {
		name := "one client"
		if perComponent {
			name = "client per component"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			heavy.RLock() // resume time is a timing figure
			defer heavy.RUnlock()
			outageScenario{perComponent: perComponent}.run(t)
		})
	}
}

// The outage's timeline and bounds.
const (
	outN         = 300              // messages scheduled before the outage
	outSpread    = 20 * time.Second // due evenly over this, from now
	outDownAfter = 3 * time.Second  // server killed this long after scheduling
	outDown      = 10 * time.Second // and restarted this long after the kill

	// While down, all components together (the one-client case) dial at
	// most this often on average: a loop with backoff does a few attempts
	// a second at first and one per second or less after a few seconds.
	// Measured 18.5 when consumers blocked on their stream; 24-26 since
	// each consumer also keeps a pub/sub connection for the movers'
	// arrival announcements (3 consumers: 3 more connections redialled
	// with backoff), 4/s after the first 3 s.
	outMaxDialsPerSec = 30.0
	// Once the first seconds of the outage have passed, the loops of one
	// component (the client per component case) have backed off: together
	// they make at most outMaxCallsPerSec calls a second, and redial their
	// pub/sub connection at most outMaxPubSubDialsPerSec times a second.
	// (go-redis turns each failed call into up to (MaxRetries+1) x
	// DialerRetries = 20 connection attempts until the pool's dial breaker
	// opens: that is the client's configuration, reported, not asserted.)
	outSteadyAfter          = 3 * time.Second
	outMaxCallsPerSec       = 3.0
	outMaxPubSubDialsPerSec = 1.0
	// Each component logs each message at most outLogFirst times plus once
	// per second of the outage.
	outLogFirst = 3
	// Delivery resumes within this of the server answering again.
	outMaxResume = 5 * time.Second
	// A Schedule call while down fails within the dial timeout plus this.
	outFailMargin = 500 * time.Millisecond
)

type outageScenario struct {
	perComponent bool // a client per component instead of one shared client
}

func (sc outageScenario) run(t *testing.T) {
	srv := startOutageServer(t)
	t.Logf("dedicated redis-server at %s, dir %s (appendonly yes, appendfsync always)", srv.addr, srv.dir)
	ctl := redis.NewClient(redistest.Options(t, srv.addr)) // the test's own calls: not counted
	t.Cleanup(func() { _ = ctl.Close() })
	ctx := context.Background()
	prefix := redistest.Prefix(t)
	const queue = "outage"
	l := lane(t, prefix, queue)

	dials := &outDials{}
	logs := &outLog{}
	clients := map[string]*redis.Client{}
	clientOf := func(component string) *redis.Client {
		key := component
		if !sc.perComponent {
			key = "shared"
		}
		if c := clients[key]; c != nil {
			return c
		}
		c := redis.NewClient(&redis.Options{Addr: srv.addr, Dialer: redistest.WrapDialer(t, dials.dialer(key))})
		c.AddHook(&outCallHook{d: dials, client: key})
		t.Cleanup(func() { _ = c.Close() }) // after the components stopped (cleanups run last-in first-out)
		clients[key] = c
		return c
	}
	opt := clientOf("producer").Options()
	t.Logf("client options: dial timeout %s, max retries %d, dial attempts %d x %s apart, pool size %d",
		opt.DialTimeout, opt.MaxRetries, opt.DialerRetries, opt.DialerRetryTimeout, opt.PoolSize)

	q, err := delay.New(clientOf("producer"), queue, delay.WithPrefix(prefix))
	require.NoError(t, err)
	var (
		promoteErrs atomic.Int64
		promMu      sync.Mutex
		promotes    []time.Time // promote calls that moved something
	)
	mv, err := mover.New(clientOf("mover"), queue, mover.WithPrefix(prefix), mover.WithLogger(logs.logger("mover")),
		mover.WithHooks(mover.Hooks{
			OnError: func(string, error, bool) { promoteErrs.Add(1) },
			OnPromote: func(_ string, moved, _ int, _ time.Duration) {
				if moved > 0 {
					now := time.Now()
					promMu.Lock()
					promotes = append(promotes, now)
					promMu.Unlock()
				}
			},
		}))
	require.NoError(t, err)
	rec := newOutDeliveries()
	type member struct{ group, name string }
	members := []member{{"a", "c1"}, {"a", "c2"}, {"b", "c3"}}
	consumers := map[string]*group.Consumer{}
	for _, m := range members {
		comp := m.group + "/" + m.name
		cs, err := group.New(clientOf(comp), queue, m.group, rec.handler(m.group),
			group.WithPrefix(prefix), group.WithConsumerName(m.name), group.WithDrainTimeout(time.Second),
			group.WithLogger(logs.logger(comp)), group.WithoutPromotion()) // the movers are components of their own
		require.NoError(t, err)
		consumers[comp] = cs
	}
	foRun(t, "mover", mv.Run)
	for comp, cs := range consumers {
		foRun(t, "consumer "+comp, cs.Run)
	}
	// Both groups exist before anything is promoted, so that no trim can
	// take an entry from a group that does not exist yet.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		gs, err := ctl.XInfoGroups(ctx, l.Stream).Result()
		if assert.NoError(c, err) {
			assert.Len(c, gs, 2)
		}
	}, 5*time.Second, 10*time.Millisecond, "both groups created")

	// Due before, during and after the outage.
	items := make([]delay.Item, outN)
	for i := range items {
		items[i] = delay.Item{
			Message: delay.Message{ID: fmt.Sprintf("m%03d", i), Payload: []byte("x")},
			When:    delay.After(time.Duration(i) * outSpread / outN),
		}
	}
	scheduled := time.Now()
	res, err := q.ScheduleBatch(ctx, items)
	require.NoError(t, err)
	want := make(map[string]time.Time, outN+32) // id -> due: every Schedule that returned nil
	for _, r := range res {
		require.Equal(t, delay.Created, r.Outcome)
		want[r.ID] = r.Due
	}

	// The outage.
	waitUntil(scheduled.Add(outDownAfter))
	before := rec.distinct()
	down := time.Now()
	srv.kill()
	// Schedule while down: each call must fail, fast and clearly. Each
	// starts early enough to have its bound (the dial timeout plus a
	// margin) before the restart, and its ctx ends just before the
	// restart: a call still running then has overrun its bound anyway, and
	// none can succeed by outliving the outage. A call that a slow machine
	// could only start too late is left out.
	type attempt struct {
		at, took time.Duration
		err      error
	}
	var attempts []attempt
	latest := down.Add(outDown - opt.DialTimeout - outFailMargin - 500*time.Millisecond)
	for i, off := range []time.Duration{200 * time.Millisecond, 1200 * time.Millisecond, 2300 * time.Millisecond, 3400 * time.Millisecond} {
		waitUntil(down.Add(off))
		if time.Now().After(latest) {
			t.Logf("Schedule attempt %d left out: the previous ones ran late", i)
			continue
		}
		cctx, cancel := context.WithDeadline(ctx, down.Add(outDown-200*time.Millisecond))
		start := time.Now()
		r, err := q.Schedule(cctx, delay.Message{ID: fmt.Sprintf("d%d", i), Payload: []byte("x")}, delay.After(time.Second))
		took := time.Since(start)
		cancel()
		attempts = append(attempts, attempt{at: start.Sub(down), took: took, err: err})
		if err == nil {
			want[r.ID] = r.Due
		}
	}
	waitUntil(down.Add(outDown))
	restart := time.Now()
	srv.start(t)
	up := time.Now() // the server answers PING
	t.Logf("outage: killed (SIGKILL) %.3fs after scheduling with %d of %d messages delivered to some group; restarted %s later, answering %s after the restart",
		down.Sub(scheduled).Seconds(), before, outN, restart.Sub(down).Round(time.Millisecond), up.Sub(restart).Round(time.Millisecond))
	n, err := ctl.ZCard(ctx, l.Delayed).Result()
	require.NoError(t, err)
	xl, err := ctl.XLen(ctx, l.Stream).Result()
	require.NoError(t, err)
	t.Logf("after the restart: %d waiting, %d in the stream (the restart kept the queue's data)", n, xl)

	// Schedule after the restart: retried until it works, then a batch.
	var (
		firstOK time.Duration
		p00     delay.Result
	)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		r, err := q.Schedule(ctx, delay.Message{ID: "p00", Payload: []byte("x")}, delay.After(time.Second))
		if assert.NoError(c, err) {
			p00, firstOK = r, time.Since(up)
		}
	}, 5*time.Second, 50*time.Millisecond, "Schedule works again within 5s of the restart")
	want[p00.ID] = p00.Due
	after := make([]delay.Item, 19)
	for i := range after {
		after[i] = delay.Item{
			Message: delay.Message{ID: fmt.Sprintf("p%02d", i+1), Payload: []byte("x")},
			When:    delay.After(time.Duration(i) * 100 * time.Millisecond),
		}
	}
	res, err = q.ScheduleBatch(ctx, after)
	require.NoError(t, err)
	for _, r := range res {
		want[r.ID] = r.Due
	}
	lastDue := up
	for _, due := range want {
		if due.After(lastDue) {
			lastDue = due
		}
	}
	if !rec.wait(want, lastDue.Add(8*time.Second)) {
		t.Logf("not everything delivered within 8s of the last due time")
	}

	// Figures.
	t.Logf("Schedule while down (client dial timeout %s):", opt.DialTimeout)
	for _, a := range attempts {
		t.Logf("  at +%.1fs: failed after %s: %v", a.at.Seconds(), a.took.Round(100*time.Microsecond), a.err)
	}
	t.Logf("Schedule after the restart: first success %s after the server answered", firstOK.Round(time.Millisecond))

	window := restart.Sub(down)
	all := dials.during(down, restart)
	rate := all.rate()
	t.Logf("connection attempts while down: %d in %s = %.1f/s; per second of the outage: %v",
		all.total(), window.Round(time.Millisecond), rate, all.perSecond())
	steadyFrom := down.Add(outSteadyAfter)
	steady := dials.during(steadyFrom, restart)
	t.Logf("  after the first %s: %.1f/s", outSteadyAfter, steady.rate())
	for _, c := range all.clients() {
		t.Logf("  client %-8s %s; after the first %s: %.1f/s", c, all.of(c), outSteadyAfter, steady.of(c).rate())
	}
	t.Logf("  mover: %d failed promote calls reported (OnError) in all", promoteErrs.Load())
	calls := dials.callsDuring(down, restart)
	steadyCalls := dials.callsDuring(steadyFrom, restart)
	t.Logf("calls to Redis (commands and pipelines, through a hook) while down: %.1f/s, after the first %s: %.1f/s",
		calls.rate(), outSteadyAfter, steadyCalls.rate())
	for _, c := range calls.clients() {
		t.Logf("  client %-8s %s; after the first %s: %.1f/s", c, calls.of(c), outSteadyAfter, steadyCalls.of(c).rate())
	}

	lines := logs.during(down, restart)
	t.Logf("log lines while down (component level message: count; first-last second of the outage):\n%s", outFormatLines(lines, down))
	t.Logf("log lines after the restart:\n%s", outFormatLines(logs.during(restart, time.Now()), restart))

	resumed := map[string]time.Duration{}
	for _, g := range []string{"a", "b"} {
		if at, ok := rec.firstAfter(g, up); ok {
			resumed[g] = at.Sub(up)
		}
	}
	var promotedAgain time.Duration = -1
	promMu.Lock()
	for _, at := range promotes {
		if !at.Before(up) {
			promotedAgain = at.Sub(up)
			break
		}
	}
	promMu.Unlock()
	t.Logf("resume after the server answered: first promotion %s; first delivery to group a %s, to group b %s",
		promotedAgain.Round(time.Millisecond), resumed["a"].Round(time.Millisecond), resumed["b"].Round(time.Millisecond))

	report := rec.check(want)
	for _, g := range []string{"a", "b"} {
		gr := report[g]
		t.Logf("group %s: %d of %d delivered, %d duplicates, %d early, %d missing; lateness of those due during the outage %s, of the others %s",
			g, gr.delivered, len(want), gr.dups, len(gr.early), len(gr.missing), distOf(gr.lateDuring(down, up)), distOf(gr.lateOther(down, up)))
	}
	t.Logf("mover counters %+v", mv.Counters())
	for _, m := range members {
		comp := m.group + "/" + m.name
		t.Logf("consumer %s counters %+v", comp, consumers[comp].Counters())
	}

	// Assertions.
	assert.NotEmpty(t, attempts, "Schedule calls while down")
	for _, a := range attempts {
		if assert.Error(t, a.err, "Schedule at +%.1fs of the outage", a.at.Seconds()) {
			assert.False(t, errors.Is(a.err, context.DeadlineExceeded), "Schedule at +%.1fs ran into its deadline: %v", a.at.Seconds(), a.err)
			msg := a.err.Error()
			assert.True(t, strings.Contains(msg, srv.addr) || strings.Contains(msg, "connection refused") || strings.Contains(msg, "dial"),
				"error names the address or the dial failure: %v", a.err)
		}
		assert.LessOrEqual(t, a.took, opt.DialTimeout+outFailMargin, "Schedule at +%.1fs fails within the dial timeout + %s", a.at.Seconds(), outFailMargin)
	}
	if !sc.perComponent {
		assert.LessOrEqual(t, rate, outMaxDialsPerSec, "connection attempts per second while down, all components on one client")
	} else {
		// A component's loops retry with backoff: a few calls a second at
		// most once the first seconds have passed, and a pub/sub
		// connection redialled less than once a second. The producer has
		// no loop: its calls are the test's Schedule calls.
		for _, c := range steady.clients() {
			if c == "producer" {
				continue
			}
			ps := 0
			for _, x := range steady.of(c).dials {
				if x.path == "pubsub" {
					ps++
				}
			}
			assert.LessOrEqual(t, float64(ps)/restart.Sub(steadyFrom).Seconds(), outMaxPubSubDialsPerSec,
				"pub/sub connection attempts per second of client %s after the first %s of the outage", c, outSteadyAfter)
			assert.LessOrEqual(t, steadyCalls.of(c).rate(), outMaxCallsPerSec,
				"calls to Redis per second of client %s after the first %s of the outage", c, outSteadyAfter)
		}
	}
	limit := outLogFirst + int(window.Seconds())
	for _, ln := range lines {
		assert.LessOrEqual(t, ln.n, limit, "log lines while down of %s %q (at most %d first, then one a second)", ln.component, ln.msg, outLogFirst)
	}
	for _, g := range []string{"a", "b"} {
		gr := report[g]
		assert.Empty(t, gr.missing, "group %s: every scheduled message delivered", g)
		assert.Empty(t, gr.early, "group %s: none before its due time (Redis clock)", g)
		assert.Empty(t, gr.unexpected, "group %s: nothing delivered whose Schedule failed", g)
		if d, ok := resumed[g]; assert.True(t, ok, "group %s: delivery resumed", g) {
			assert.LessOrEqual(t, d, outMaxResume, "group %s: delivery resumes after the restart", g)
		}
	}
}

// outServer is a redis-server process that can be killed and restarted on
// the same port and directory, with an append-only file synced on every
// write so that a restart keeps everything acknowledged.
type outServer struct {
	bin, dir, addr string
	port           int
	listen         []string    // the arguments that make it listen on port
	tls            *tls.Config // for the test's own client (nil unless TLS mode)
	cmd            *exec.Cmd
	exited         chan struct{} // closed once cmd has exited and was reaped
}

func startOutageServer(t *testing.T) *outServer {
	t.Helper()
	bin, err := redistest.Binary()
	require.NoError(t, err)
	s := &outServer{bin: bin, dir: t.TempDir(), tls: redistest.TLSConfig(t)}
	for i := 0; ; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		s.port = l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		s.addr = "127.0.0.1:" + strconv.Itoa(s.port)
		s.listen = redistest.ListenArgs(t, s.port) // TLS only in TLS mode
		if err := s.tryStart(); err == nil {
			break
		} else if i == 4 {
			t.Fatalf("redis-server: %v", err)
		}
	}
	t.Cleanup(s.kill) // before t.TempDir's removal: cleanups run last-in first-out
	return s
}

// start restarts the server on its port and directory. kill waited until
// the old process was gone, so the port is free (redis-server binds with
// SO_REUSEADDR); a failed start is tried again twice all the same.
func (s *outServer) start(t *testing.T) {
	t.Helper()
	var err error
	for range 3 {
		if err = s.tryStart(); err == nil {
			return
		}
	}
	t.Fatalf("restarting redis-server on %s: %v", s.addr, err)
}

// outReady is the line redis-server logs once it has loaded its data and
// serves clients.
const outReady = "Ready to accept connections"

// tryStart starts the server and waits until it logs outReady (then checks
// that it answers PING) or exits.
func (s *outServer) tryStart() error {
	cmd := exec.Command(s.bin, append(append([]string{"--bind", "127.0.0.1"}, s.listen...),
		"--dir", s.dir, "--save", "", "--appendonly", "yes", "--appendfsync", "always",
		"--daemonize", "no", "--protected-mode", "no", "--loglevel", "notice")...) // notice: the ready line
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	out := &outSyncWriter{w: &strings.Builder{}, mark: outReady, seen: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w (%s)", s.bin, err, redistest.InstallHint)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	select {
	case <-out.seen:
	case <-exited:
		return fmt.Errorf("redis-server on %s exited: %s", s.addr, out.String())
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		return fmt.Errorf("redis-server on %s not ready within 5s: %s", s.addr, out.String())
	}
	c := redis.NewClient(&redis.Options{Addr: s.addr, MaxRetries: -1, TLSConfig: s.tls})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		return fmt.Errorf("redis-server on %s logged %q and does not answer: %w", s.addr, outReady, err)
	}
	s.cmd, s.exited = cmd, exited
	return nil
}

// kill SIGKILLs the server (its process group) and waits until it is gone.
// With appendfsync always, every write it acknowledged is on disk.
func (s *outServer) kill() {
	if s.cmd == nil {
		return
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.exited // the Wait in tryStart reaps it
	s.cmd = nil
}

// outSyncWriter collects a server's output and closes seen once mark
// appears in it.
type outSyncWriter struct {
	mu   sync.Mutex
	w    *strings.Builder
	mark string
	seen chan struct{}
}

func (w *outSyncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.w.Write(p)
	if w.mark != "" && strings.Contains(w.w.String(), w.mark) {
		close(w.seen)
		w.mark = ""
	}
	return n, err
}

func (w *outSyncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.String()
}

// outDials records every connection attempt of the clients it dials for
// (when, for which client, on which go-redis path, whether it worked), and
// every call they make.
type outDials struct {
	mu    sync.Mutex
	all   []outDial
	calls []outDial // calls to Redis, from outCallHook
}

type outDial struct {
	at     time.Time
	client string
	path   string // "pubsub" (a PubSub's reconnect), "pool probe" (the pool's dial breaker), "pool"; for a call, the command
	ok     bool
}

func (d *outDials) dialer(client string) func(context.Context, string, string) (net.Conn, error) {
	nd := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 5 * time.Minute}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		path := outDialPath()
		c, err := nd.DialContext(ctx, network, addr)
		d.mu.Lock()
		d.all = append(d.all, outDial{at: time.Now(), client: client, path: path, ok: err == nil})
		d.mu.Unlock()
		return c, err
	}
}

// outCallHook records every command and pipeline a client sends (once per
// call, whatever go-redis's retries and dials do under it).
type outCallHook struct {
	d      *outDials
	client string
}

func (h *outCallHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *outCallHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.d.call(h.client, cmd.Name())
		return next(ctx, cmd)
	}
}
func (h *outCallHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		name := "pipeline"
		if len(cmds) > 0 {
			name += " " + cmds[0].Name()
		}
		h.d.call(h.client, name)
		return next(ctx, cmds)
	}
}

func (d *outDials) call(client, name string) {
	d.mu.Lock()
	d.calls = append(d.calls, outDial{at: time.Now(), client: client, path: name})
	d.mu.Unlock()
}

// callsDuring returns the calls in [from, to).
func (d *outDials) callsDuring(from, to time.Time) outDialSet {
	d.mu.Lock()
	defer d.mu.Unlock()
	set := outDialSet{from: from, to: to}
	for _, x := range d.calls {
		if !x.at.Before(from) && x.at.Before(to) {
			set.dials = append(set.dials, x)
		}
	}
	return set
}

// outDialPath names the go-redis code that dials, from the call stack.
func outDialPath() string {
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(3, pcs)])
	for {
		f, more := frames.Next()
		switch {
		case strings.Contains(f.Function, "(*PubSub)"):
			return "pubsub"
		case strings.HasSuffix(f.Function, ".tryDial"):
			return "pool probe"
		}
		if !more {
			return "pool"
		}
	}
}

// during returns the attempts in [from, to).
func (d *outDials) during(from, to time.Time) outDialSet {
	d.mu.Lock()
	defer d.mu.Unlock()
	set := outDialSet{from: from, to: to}
	for _, x := range d.all {
		if !x.at.Before(from) && x.at.Before(to) {
			set.dials = append(set.dials, x)
		}
	}
	return set
}

// outDialSet is the attempts of a time window.
type outDialSet struct {
	from, to time.Time
	dials    []outDial
}

func (s outDialSet) total() int { return len(s.dials) }

func (s outDialSet) rate() float64 { return float64(len(s.dials)) / s.to.Sub(s.from).Seconds() }

func (s outDialSet) perSecond() []int {
	out := make([]int, int(s.to.Sub(s.from)/time.Second)+1)
	for _, x := range s.dials {
		out[int(x.at.Sub(s.from)/time.Second)]++
	}
	if len(out) > 1 && out[len(out)-1] == 0 {
		out = out[:len(out)-1]
	}
	return out
}

// clients returns the clients that dialed, sorted.
func (s outDialSet) clients() []string {
	var out []string
	for _, x := range s.dials {
		if !slices.Contains(out, x.client) {
			out = append(out, x.client)
		}
	}
	slices.Sort(out)
	return out
}

// of returns the attempts of one client.
func (s outDialSet) of(client string) outDialSet {
	sub := outDialSet{from: s.from, to: s.to}
	for _, x := range s.dials {
		if x.client == client {
			sub.dials = append(sub.dials, x)
		}
	}
	return sub
}

// String gives the count, the rate, and the count per go-redis path.
func (s outDialSet) String() string {
	by := map[string]int{}
	for _, x := range s.dials {
		by[x.path]++
	}
	paths := make([]string, 0, len(by))
	for p := range by {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	parts := make([]string, len(paths))
	for i, p := range paths {
		parts[i] = fmt.Sprintf("%s %d", p, by[p])
	}
	return fmt.Sprintf("%d (%.1f/s): %s", len(s.dials), s.rate(), strings.Join(parts, ", "))
}

// outLog records every line the components log, at every level.
type outLog struct {
	mu   sync.Mutex
	recs []outRecord
}

type outRecord struct {
	at        time.Time
	level     slog.Level
	component string
	msg, err  string
}

func (l *outLog) logger(component string) *slog.Logger {
	return slog.New(&outHandler{l: l, component: component})
}

type outHandler struct {
	l         *outLog
	component string
}

func (h *outHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *outHandler) Handle(_ context.Context, r slog.Record) error {
	rec := outRecord{at: r.Time, level: r.Level, component: h.component, msg: r.Message}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "err" {
			rec.err = a.Value.String()
		}
		return true
	})
	h.l.mu.Lock()
	h.l.recs = append(h.l.recs, rec)
	h.l.mu.Unlock()
	return nil
}
func (h *outHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *outHandler) WithGroup(string) slog.Handler      { return h }

// outLines is how often one component logged one message at one level.
type outLines struct {
	component   string
	level       slog.Level
	msg, err    string // err: the last one
	n           int
	first, last time.Time
}

// during counts the lines logged in [from, to) per component, level and
// message.
func (l *outLog) during(from, to time.Time) []outLines {
	l.mu.Lock()
	defer l.mu.Unlock()
	by := map[string]*outLines{}
	var out []*outLines
	for _, r := range l.recs {
		if r.at.Before(from) || !r.at.Before(to) {
			continue
		}
		k := r.component + "\x00" + r.level.String() + "\x00" + r.msg
		x := by[k]
		if x == nil {
			x = &outLines{component: r.component, level: r.level, msg: r.msg, first: r.at}
			by[k] = x
			out = append(out, x)
		}
		x.n++
		x.last, x.err = r.at, r.err
	}
	slices.SortStableFunc(out, func(a, b *outLines) int { return strings.Compare(a.component, b.component) })
	res := make([]outLines, len(out))
	for i, x := range out {
		res[i] = *x
	}
	return res
}

func outFormatLines(ls []outLines, zero time.Time) string {
	if len(ls) == 0 {
		return "  (none)"
	}
	var b strings.Builder
	for _, x := range ls {
		fmt.Fprintf(&b, "  %-6s %-5s %q: %d; %+.1fs..%+.1fs; last err: %s\n", x.component, x.level, x.msg, x.n,
			x.first.Sub(zero).Seconds(), x.last.Sub(zero).Seconds(), x.err)
	}
	return strings.TrimRight(b.String(), "\n")
}

// outDeliveries records every handler call of each group.
type outDeliveries struct {
	mu      sync.Mutex
	byGroup map[string]map[string][]outDelivery // group -> message id -> deliveries
	changed chan struct{}
}

type outDelivery struct {
	at       time.Time // handler called (this host's clock)
	appended time.Time // the entry's id: when it was appended (Redis clock, ms)
	due      time.Time
}

func newOutDeliveries() *outDeliveries {
	return &outDeliveries{byGroup: map[string]map[string][]outDelivery{}, changed: make(chan struct{}, 1)}
}

func (d *outDeliveries) handler(g string) group.Handler {
	return func(_ context.Context, m *group.Message) error {
		x := outDelivery{at: time.Now(), due: m.Due}
		ms, _, _ := strings.Cut(m.EntryID, "-")
		if v, err := strconv.ParseInt(ms, 10, 64); err == nil {
			x.appended = time.UnixMilli(v)
		}
		d.mu.Lock()
		if d.byGroup[g] == nil {
			d.byGroup[g] = map[string][]outDelivery{}
		}
		d.byGroup[g][m.ID] = append(d.byGroup[g][m.ID], x)
		d.mu.Unlock()
		select {
		case d.changed <- struct{}{}:
		default:
		}
		return nil
	}
}

// distinct returns how many messages reached some group.
func (d *outDeliveries) distinct() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	seen := map[string]bool{}
	for _, ids := range d.byGroup {
		for id := range ids {
			seen[id] = true
		}
	}
	return len(seen)
}

// wait waits until every id of want reached both groups, or the deadline.
func (d *outDeliveries) wait(want map[string]time.Time, deadline time.Time) bool {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	for {
		d.mu.Lock()
		done := true
		for _, g := range []string{"a", "b"} {
			for id := range want {
				if len(d.byGroup[g][id]) == 0 {
					done = false
					break
				}
			}
		}
		d.mu.Unlock()
		if done {
			return true
		}
		select {
		case <-d.changed:
		case <-t.C:
			return false
		}
	}
}

// firstAfter returns the first handler call of group g at or after at.
func (d *outDeliveries) firstAfter(g string, at time.Time) (time.Time, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var first time.Time
	for _, xs := range d.byGroup[g] {
		for _, x := range xs {
			if !x.at.Before(at) && (first.IsZero() || x.at.Before(first)) {
				first = x.at
			}
		}
	}
	return first, !first.IsZero()
}

type outGroupReport struct {
	delivered, dups            int
	missing, early, unexpected []string
	late                       map[string]time.Duration // id -> first appended - due
	due                        map[string]time.Time
}

func (r outGroupReport) lateDuring(down, up time.Time) []time.Duration {
	var out []time.Duration
	for id, l := range r.late {
		if due := r.due[id]; !due.Before(down) && due.Before(up) {
			out = append(out, l)
		}
	}
	return out
}

func (r outGroupReport) lateOther(down, up time.Time) []time.Duration {
	var out []time.Duration
	for id, l := range r.late {
		if due := r.due[id]; due.Before(down) || !due.Before(up) {
			out = append(out, l)
		}
	}
	return out
}

// check compares each group's deliveries with want (id -> due time).
func (d *outDeliveries) check(want map[string]time.Time) map[string]outGroupReport {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]outGroupReport{}
	for _, g := range []string{"a", "b"} {
		r := outGroupReport{late: map[string]time.Duration{}, due: want}
		for id, due := range want {
			xs := d.byGroup[g][id]
			if len(xs) == 0 {
				r.missing = append(r.missing, id)
				continue
			}
			r.delivered++
			r.dups += len(xs) - 1
			first := xs[0].appended
			for _, x := range xs {
				if x.appended.Before(due) || x.appended.Before(x.due) {
					r.early = append(r.early, fmt.Sprintf("%s appended %s before due", id, due.Sub(x.appended)))
				}
				if x.appended.Before(first) {
					first = x.appended
				}
			}
			r.late[id] = first.Sub(due)
		}
		for id := range d.byGroup[g] {
			if _, ok := want[id]; !ok {
				r.unexpected = append(r.unexpected, id) // its Schedule did not return nil
			}
		}
		slices.Sort(r.missing)
		out[g] = r
	}
	return out
}
