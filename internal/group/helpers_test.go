package group_test

import (
	"bufio"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/codec"
	"github.com/delaystream/delaystream/internal/delay"
	"github.com/delaystream/delaystream/internal/group"
	"github.com/delaystream/delaystream/internal/mover"
	"github.com/delaystream/delaystream/internal/redistest"
	"github.com/delaystream/delaystream/internal/stream"
	"github.com/delaystream/delaystream/internal/wire"
)

// helperEnv carries a helperConfig (JSON) to a re-executed test binary,
// which then runs one consumer instead of the tests (see TestMain).
const helperEnv = "DELAYSTREAM_GROUP_HELPER"

func TestMain(m *testing.M) {
	if spec := os.Getenv(helperEnv); spec != "" {
		os.Exit(helperMain(spec))
	}
	os.Exit(redistest.Main(m))
}

// testLogger discards the consumers' logs (the tests provoke warnings on
// purpose); set DELAYSTREAM_TEST_LOG=1 to see them on stderr.
func testLogger() *slog.Logger {
	if os.Getenv("DELAYSTREAM_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// harness is one test's queue: its own prefix on the shared redis-server.
type harness struct {
	t      *testing.T
	rdb    *redis.Client
	prefix string
	queue  string
	q      *delay.Queue
	keys   stream.Keys
	shards int // the queue's shard count
}

func newHarness(t *testing.T) *harness { return newShardedHarness(t, 1) }

// newShardedHarness is newHarness for a queue of n shards: its producer,
// movers and consumers are all built with n.
func newShardedHarness(t *testing.T, n int) *harness {
	t.Helper()
	rdb := redistest.Client(t)
	p := redistest.Prefix(t)
	q, err := delay.New(rdb, "q", delay.WithPrefix(p), delay.WithShards(n))
	require.NoError(t, err)
	return &harness{t: t, rdb: rdb, prefix: p, queue: "q", q: q, keys: q.Keys(), shards: n}
}

func (h *harness) mainStream() string           { return h.keys.Main().Stream }
func (h *harness) retryStream(g string) string  { return h.keys.Retry(g).Stream }
func (h *harness) retryDelayed(g string) string { return h.keys.Retry(g).Delayed }

// startMover promotes the queue's main lane until the test ends.
func (h *harness) startMover() *runner {
	h.t.Helper()
	m, err := mover.New(h.rdb, h.queue, mover.WithPrefix(h.prefix), mover.WithLogger(testLogger()), mover.WithShards(h.shards))
	require.NoError(h.t, err)
	return start(h.t, m.Run)
}

// consumer returns a Consumer of group on the harness's queue, with the
// harness's prefix and a quiet logger; opts come last and may override.
func (h *harness) consumer(g string, hd group.Handler, opts ...group.Option) *group.Consumer {
	h.t.Helper()
	return h.consumerOn(h.rdb, g, hd, opts...)
}

func (h *harness) consumerOn(rdb redis.UniversalClient, g string, hd group.Handler, opts ...group.Option) *group.Consumer {
	h.t.Helper()
	all := append([]group.Option{group.WithPrefix(h.prefix), group.WithLogger(testLogger()), group.WithShards(h.shards)}, opts...)
	c, err := group.New(rdb, h.queue, g, hd, all...)
	require.NoError(h.t, err)
	return c
}

// schedule schedules one message per id, payload = id, due after d.
func (h *harness) schedule(ids []string, d time.Duration) []delay.Result {
	h.t.Helper()
	items := make([]delay.Item, len(ids))
	for i, id := range ids {
		items[i] = delay.Item{Message: delay.Message{ID: id, Payload: []byte(id)}, When: delay.After(d)}
	}
	res, err := h.q.ScheduleBatch(context.Background(), items)
	require.NoError(h.t, err)
	for _, r := range res {
		require.Equal(h.t, delay.Created, r.Outcome, r.ID)
	}
	return res
}

// promoted schedules ids due now and waits until the mover (started by
// the test) has promoted them all into the main stream: a consumer
// started after it finds them all there, and its first read takes as many
// as it has room for. A consumer running while the mover promotes them
// may instead find them split over several promotions, as their due
// times fall in different milliseconds, and read them in several reads.
func (h *harness) promoted(ids []string) {
	h.t.Helper()
	h.schedule(ids, 0)
	waitFor(h.t, 10*time.Second, func() bool {
		n, err := h.rdb.XLen(context.Background(), h.mainStream()).Result()
		return err == nil && n == int64(len(ids))
	}, "the mover promotes what was scheduled")
}

// addEntry appends an entry straight to a stream, bypassing producer and
// mover (for hostile or hand-made entries).
func (h *harness) addEntry(key string, values ...any) string {
	h.t.Helper()
	ctx := context.Background()
	id, err := h.rdb.XAdd(ctx, &redis.XAddArgs{Stream: key, Values: values}).Result()
	require.NoError(h.t, err)
	// Announced on the lane's arrivals channel, as a mover does: consumers
	// read when told (or at their poll, 30 s).
	if ch, ok := strings.CutSuffix(key, ":s"); ok {
		publish := "PUBLISH"
		if h.shards > 1 {
			publish = "SPUBLISH"
		}
		require.NoError(h.t, h.rdb.Do(ctx, publish, ch+":n", "0").Err())
	}
	return id
}

// envEntry returns the fields of a valid stream entry for message id.
func envEntry(id string, payload string) []any {
	return wire.Encode(&codec.Envelope{ID: id, Payload: []byte(payload), Attempt: 1, Created: time.Now(), Due: time.Now()})
}

// pending returns the group's pending count on key: 0 if the group or key
// is missing, -1 on other errors (it is used inside waitFor conditions,
// which run off the test goroutine and must not call FailNow).
func (h *harness) pending(key, g string) int64 {
	p, err := h.rdb.XPending(context.Background(), key, g).Result()
	switch {
	case redis.HasErrorPrefix(err, "NOGROUP"):
		return 0
	case err != nil:
		h.t.Logf("xpending %s %s: %v", key, g, err)
		return -1
	}
	return p.Count
}

// redisNow returns the Redis clock.
func (h *harness) redisNow() time.Time {
	h.t.Helper()
	now, err := h.rdb.Time(context.Background()).Result()
	require.NoError(h.t, err)
	return now
}

func ids(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%05d", prefix, i)
	}
	return out
}

// runner is one Run call in the background.
type runner struct {
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
	took   time.Duration // from cancel to Run's return
}

// start runs run(ctx) in a goroutine; the test's cleanup stops it and
// requires a nil error.
func start(t *testing.T, run func(context.Context) error) *runner {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &runner{cancel: cancel, done: make(chan error, 1)}
	go func() {
		r.done <- run(ctx)
	}()
	t.Cleanup(func() {
		r.stopWithin(30 * time.Second)
		assert.NoError(t, r.err, "Run returned an error")
	})
	return r
}

// stop cancels Run, waits for it and requires nil. It returns how long Run
// took to return after the cancel.
func (r *runner) stop(t *testing.T) time.Duration {
	t.Helper()
	r.stopWithin(30 * time.Second)
	require.NoError(t, r.err, "Run returned an error")
	return r.took
}

// stopAll stops runners concurrently (each Run may wait out its 1 s read
// block) and requires nil from each.
func stopAll(t *testing.T, rs ...*runner) {
	t.Helper()
	var wg sync.WaitGroup
	for _, r := range rs {
		wg.Add(1)
		go func() { defer wg.Done(); r.stopWithin(30 * time.Second) }()
	}
	wg.Wait()
	for _, r := range rs {
		require.NoError(t, r.err, "Run returned an error")
	}
}

func (r *runner) stopWithin(limit time.Duration) {
	r.once.Do(func() {
		t0 := time.Now()
		r.cancel()
		select {
		case r.err = <-r.done:
			r.took = time.Since(t0)
		case <-time.After(limit):
			r.err = fmt.Errorf("Run did not return within %s of cancel", limit)
		}
	})
}

// recorder keeps every delivery a handler saw.
type recorder struct {
	mu   sync.Mutex
	byID map[string][]delivery
	n    int
}

type delivery struct {
	group.Message
	At time.Time // local wall clock at receipt
}

func newRecorder() *recorder {
	return &recorder{byID: map[string][]delivery{}}
}

func (r *recorder) add(m *group.Message) {
	d := delivery{Message: *m, At: time.Now().Round(0)}
	r.mu.Lock()
	r.byID[m.ID] = append(r.byID[m.ID], d)
	r.n++
	r.mu.Unlock()
}

func (r *recorder) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

func (r *recorder) get(id string) []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]delivery(nil), r.byID[id]...)
}

func (r *recorder) snapshot() map[string][]delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string][]delivery, len(r.byID))
	for k, v := range r.byID {
		out[k] = append([]delivery(nil), v...)
	}
	return out
}

// ack is a handler that records and succeeds.
func (r *recorder) ack(_ context.Context, m *group.Message) error {
	r.add(m)
	return nil
}

// waitFor waits until cond holds, checking every 10 ms. cond runs on
// another goroutine: it must not call require.
func waitFor(t *testing.T, limit time.Duration, cond func() bool, msgAndArgs ...any) {
	t.Helper()
	require.Eventually(t, cond, limit, 10*time.Millisecond, msgAndArgs...)
}

// deadLetters returns every dead letter of the group.
func deadLetters(t *testing.T, d *group.DeadLetters) []group.DeadEntry {
	t.Helper()
	var out []group.DeadEntry
	after := ""
	for {
		page, err := d.List(context.Background(), after, 100)
		require.NoError(t, err)
		out = append(out, page...)
		if len(page) < 100 {
			return out
		}
		after = page[len(page)-1].EntryID
	}
}

// dlLen returns the number of dead letters, -1 on error (safe inside
// waitFor conditions).
func dlLen(t *testing.T, d *group.DeadLetters) int64 {
	n, err := d.Len(context.Background())
	if err != nil {
		t.Logf("dead letters len: %v", err)
		return -1
	}
	return n
}

// streamIDs returns the entry ids of key in order.
func streamIDs(t *testing.T, rdb redis.UniversalClient, key, from string) []string {
	t.Helper()
	msgs, err := rdb.XRange(context.Background(), key, from, "+").Result()
	require.NoError(t, err)
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.ID
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// roundTrips is a go-redis hook that calls f with the commands of each
// round trip (one command, or a pipeline's) once it has returned.
type roundTrips func(cmds []redis.Cmder)

func (f roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		f([]redis.Cmder{cmd})
		return err
	}
}

func (f roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		f(cmds)
		return err
	}
}

// cmdCounter is a go-redis hook counting successful commands that match:
// a signal the production code emits, used to wait for "n more trim
// passes" without sleeping.
type cmdCounter struct {
	match func(args []any) bool
	n     atomic.Int64
}

// newScriptCounter counts runs of script s on key.
func newScriptCounter(s *redis.Script, key string) *cmdCounter {
	sha := s.Hash()
	return &cmdCounter{match: func(args []any) bool {
		if len(args) < 4 || fmt.Sprint(args[3]) != key {
			return false
		}
		switch strings.ToLower(fmt.Sprint(args[0])) {
		case "evalsha":
			return fmt.Sprint(args[1]) == sha
		case "eval":
			sum := sha1.Sum([]byte(fmt.Sprint(args[1])))
			return hex.EncodeToString(sum[:]) == sha
		}
		return false
	}}
}

// newCommandCounter counts command name on key.
func newCommandCounter(name, key string) *cmdCounter {
	return &cmdCounter{match: func(args []any) bool {
		return len(args) >= 2 && strings.EqualFold(fmt.Sprint(args[0]), name) && fmt.Sprint(args[1]) == key
	}}
}

func (c *cmdCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *cmdCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if err == nil && c.match(cmd.Args()) {
			c.n.Add(1)
		}
		return err
	}
}

func (c *cmdCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// ---- child process: a consumer that can be killed with SIGKILL ----

// helperConfig configures the consumer a child process runs. Its handler
// prints "held <message id> <entry id> <deliveries>" and then never returns.
type helperConfig struct {
	Addr       string
	Prefix     string
	Queue      string
	Group      string
	Name       string
	Shards     int // 0: 1
	Workers    int
	Prefetch   int           // 0: default (adaptive read-ahead)
	Visibility time.Duration // 0: default
	Reclaim    time.Duration // 0: default
	NoReclaim  bool
}

func helperMain(spec string) int {
	var cfg helperConfig
	if err := json.Unmarshal([]byte(spec), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "helper: bad config:", err)
		return 2
	}
	tc, err := redistest.LoadTLSConfig() // from the Env the parent gave
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 2
	}
	rdb := redis.NewClient(&redis.Options{Addr: cfg.Addr, TLSConfig: tc})
	defer rdb.Close()
	opts := []group.Option{
		group.WithPrefix(cfg.Prefix), group.WithWorkers(cfg.Workers), group.WithConsumerName(cfg.Name),
		group.WithDrainTimeout(100 * time.Millisecond), group.WithShards(max(cfg.Shards, 1)),
		group.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))),
	}
	if cfg.Prefetch > 0 {
		opts = append(opts, group.WithPrefetch(cfg.Prefetch))
	}
	if cfg.Visibility > 0 {
		opts = append(opts, group.WithVisibilityTimeout(cfg.Visibility))
	}
	if cfg.Reclaim > 0 {
		opts = append(opts, group.WithReclaimInterval(cfg.Reclaim))
	}
	if cfg.NoReclaim {
		opts = append(opts, group.WithoutReclaim())
	}
	c, err := group.New(rdb, cfg.Queue, cfg.Group, func(ctx context.Context, m *group.Message) error {
		fmt.Fprintf(os.Stdout, "held %s %s %d\n", m.ID, m.EntryID, m.Deliveries)
		<-ctx.Done() // hold the entry until the parent kills this process
		return ctx.Err()
	}, opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 2
	}
	// Safety net: the parent kills this process long before.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	return 0
}

// child is a consumer in a separate process.
type child struct {
	cmd    *exec.Cmd
	lines  chan heldLine
	stderr *lockedBuffer
	killed bool
}

type heldLine struct {
	ID, EntryID string
	Deliveries  int64
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (h *harness) startChild(g, name string, cfg helperConfig) *child {
	t := h.t
	t.Helper()
	cfg.Addr = redistest.Addr(t)
	cfg.Prefix, cfg.Queue, cfg.Group, cfg.Name, cfg.Shards = h.prefix, h.queue, g, name, h.shards
	spec, err := json.Marshal(cfg)
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), redistest.Env(t)...), helperEnv+"="+string(spec))
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	c := &child{cmd: cmd, lines: make(chan heldLine, 1024), stderr: &lockedBuffer{}}
	cmd.Stderr = c.stderr
	require.NoError(t, cmd.Start())
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) != 4 || f[0] != "held" {
				continue
			}
			d, _ := strconv.ParseInt(f[3], 10, 64)
			c.lines <- heldLine{ID: f[1], EntryID: f[2], Deliveries: d}
		}
	}()
	t.Cleanup(func() {
		c.kill(t)
		if t.Failed() {
			t.Logf("child %s stderr:\n%s", name, c.stderr.String())
		}
	})
	return c
}

// waitHeld waits until the child's handlers hold n entries.
func (c *child) waitHeld(t *testing.T, n int, limit time.Duration) []heldLine {
	t.Helper()
	var got []heldLine
	deadline := time.After(limit)
	for len(got) < n {
		select {
		case l, ok := <-c.lines:
			if !ok {
				require.FailNowf(t, "child exited", "after %d of %d held entries; stderr:\n%s", len(got), n, c.stderr.String())
			}
			got = append(got, l)
		case <-deadline:
			require.FailNowf(t, "child too slow", "%d of %d held entries after %s; stderr:\n%s", len(got), n, limit, c.stderr.String())
		}
	}
	return got
}

// kill sends SIGKILL and reaps the process.
func (c *child) kill(t *testing.T) {
	if c.killed {
		return
	}
	c.killed = true
	if err := c.cmd.Process.Kill(); err != nil {
		t.Logf("kill child: %v", err)
	}
	_ = c.cmd.Wait()
}

// loopTicks counts the iterations of a consumer's reclaim and trim loops
// (group.WithLoopTick): n more of them are n of that loop's intervals
// passed, as events, each one a chance for the loop to act. With watch
// set, it also counts the reclaim loop's consecutive iterations at whose
// end watch had not moved: quiet reaching n means nothing watch counts
// happened over n reclaim intervals.
type loopTicks struct {
	reclaims, trims atomic.Int64
	watch           func() int64
	last            int64 // watch at the last reclaim tick; the reclaim loop's goroutine only
	quiet           atomic.Int64
}

// option returns the consumer option that feeds l.
func (l *loopTicks) option() group.Option {
	l.last = -1
	return group.WithLoopTick(func(loop string) {
		switch loop {
		case "trim":
			l.trims.Add(1)
		case "reclaim":
			l.reclaims.Add(1)
			if l.watch == nil {
				return
			}
			if v := l.watch(); v != l.last {
				l.last = v
				l.quiet.Store(0)
			} else {
				l.quiet.Add(1)
			}
		}
	})
}

// waitReclaims waits for n more iterations of the reclaim loop.
func (l *loopTicks) waitReclaims(t *testing.T, n int64) {
	t.Helper()
	from := l.reclaims.Load()
	waitFor(t, 30*time.Second, func() bool { return l.reclaims.Load() >= from+n }, "%d reclaim loop iterations", n)
}

// waitTrims waits for n more iterations of the trim loop.
func (l *loopTicks) waitTrims(t *testing.T, n int64) {
	t.Helper()
	from := l.trims.Load()
	waitFor(t, 30*time.Second, func() bool { return l.trims.Load() >= from+n }, "%d trim loop iterations", n)
}

// waitSubscribers waits until each (classic) channel has at least n
// subscribers: the consumers listen for arrivals.
func waitSubscribers(t *testing.T, rdb redis.UniversalClient, n int64, channels ...string) {
	t.Helper()
	waitFor(t, 10*time.Second, func() bool {
		subs, err := rdb.PubSubNumSub(context.Background(), channels...).Result()
		if err != nil {
			return false
		}
		for _, ch := range channels {
			if subs[ch] < n {
				return false
			}
		}
		return true
	}, "%d subscribers on %d channels", n, len(channels))
}

// readGate is a go-redis hook that holds a client's XREADGROUP calls
// while it is shut (until opened, or the call's ctx ends).
type readGate struct{ shut atomic.Pointer[chan struct{}] }

func (g *readGate) close() {
	ch := make(chan struct{})
	g.shut.Store(&ch)
}

func (g *readGate) open() {
	if ch := g.shut.Swap(nil); ch != nil {
		close(*ch)
	}
}

func (g *readGate) wait(ctx context.Context, cmds ...redis.Cmder) {
	ch := g.shut.Load()
	if ch == nil {
		return
	}
	for _, cmd := range cmds {
		if cmd.Name() == "xreadgroup" {
			select {
			case <-*ch:
			case <-ctx.Done():
			}
			return
		}
	}
}

func (g *readGate) DialHook(next redis.DialHook) redis.DialHook { return next }

func (g *readGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		g.wait(ctx, cmd)
		return next(ctx, cmd)
	}
}

func (g *readGate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		g.wait(ctx, cmds...)
		return next(ctx, cmds)
	}
}

// commandTrace records a client's stream commands with their replies
// (pipelined ones too), for the message of a failed assertion.
type commandTrace struct {
	mu    sync.Mutex
	lines []string
}

func (c *commandTrace) record(cmd redis.Cmder) {
	switch strings.ToLower(cmd.Name()) {
	case "xreadgroup", "xclaim", "xautoclaim", "evalsha", "eval":
	default:
		return
	}
	s := cmd.String()
	if len(s) > 400 {
		s = s[:400] + "…"
	}
	c.mu.Lock()
	c.lines = append(c.lines, time.Now().Format("15:04:05.000000 ")+s)
	c.mu.Unlock()
}

// String returns the commands recorded, one per line.
func (c *commandTrace) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.lines, "\n")
}

func (c *commandTrace) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *commandTrace) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		c.record(cmd)
		return err
	}
}

func (c *commandTrace) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			c.record(cmd)
		}
		return err
	}
}
