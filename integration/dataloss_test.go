package integration

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os/exec"
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
	"github.com/delaystream/delaystream/internal/stream"
)

// plainServer is a redis-server without persistence on a fixed port, so
// that it can be restarted empty at the same address.
type plainServer struct {
	port int
	cmd  *exec.Cmd
}

func startPlainServer(t *testing.T, port int) *plainServer {
	t.Helper()
	bin, err := redistest.Binary()
	require.NoError(t, err)
	args := append([]string{"--bind", "127.0.0.1"}, redistest.ListenArgs(t, port)...) // TLS only in TLS mode
	cmd := exec.Command(bin, append(args, "--save", "",
		"--appendonly", "no", "--dir", t.TempDir(), "--protected-mode", "no", "--loglevel", "warning")...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start())
	s := &plainServer{port: port, cmd: cmd}
	t.Cleanup(s.kill)
	c := redis.NewClient(redistest.Options(t, s.addr()))
	defer c.Close()
	require.Eventually(t, func() bool { return c.Ping(context.Background()).Err() == nil }, 5*time.Second, 10*time.Millisecond)
	return s
}

func (s *plainServer) addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

func (s *plainServer) kill() {
	if s.cmd != nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
		s.cmd = nil
	}
}

// logLines is a slog handler that keeps the messages logged at error level.
type logLines struct {
	mu     sync.Mutex
	errors []string
}

func (l *logLines) Enabled(_ context.Context, lv slog.Level) bool { return lv >= slog.LevelError }
func (l *logLines) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	l.errors = append(l.errors, r.Message)
	l.mu.Unlock()
	return nil
}
func (l *logLines) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logLines) WithGroup(string) slog.Handler      { return l }

func (l *logLines) count(msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, m := range l.errors {
		if m == msg {
			n++
		}
	}
	return n
}

// Redis restarted empty (no persistence) under a running mover and
// consumer: both report it once, through the logger (error level) and
// their OnDataLoss hook, with an error wrapping stream.ErrDataLost; the
// consumer recreates its group and messages scheduled afterwards are
// delivered. A group deleted by hand while the data stays is recreated
// without a data-loss report.
func TestRedisRestartedEmpty(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	srv := startPlainServer(t, port)
	rdb := redis.NewClient(redistest.Options(t, srv.addr()))
	t.Cleanup(func() { _ = rdb.Close() })
	prefix := redistest.Prefix(t)

	q, err := delay.New(rdb, "q", delay.WithPrefix(prefix))
	require.NoError(t, err)
	moverLog, consumerLog := &logLines{}, &logLines{}
	var moverLost, consumerLost atomic.Int32
	var lostErrs sync.Map
	// The mover has a client of its own, so that its connections can be
	// dropped and its checks of the queue's record counted (see the end).
	layout, err := stream.NewLayout(prefix, "q", 1)
	require.NoError(t, err)
	mopt := redistest.Options(t, srv.addr())
	mopt.ClientName = moverClientName
	mrdb := redis.NewClient(mopt)
	// The mover's checks of the queue's record (the meta script, whose first
	// key is the record) answered without error: one per check, as an
	// EVALSHA answered NOSCRIPT (then sent again as EVAL) is not counted.
	var checks atomic.Int64
	mrdb.AddHook(afterCalls(func(cmds []redis.Cmder, err error) {
		if err == nil && len(cmds) == 1 && isScriptOn(cmds[0], layout.Meta()) {
			checks.Add(1)
		}
	}))
	t.Cleanup(func() { _ = mrdb.Close() })
	var reportedAt atomic.Int64 // the mover's checks answered when it first reported a loss (at least its first check)
	mv, err := mover.New(mrdb, "q", mover.WithPrefix(prefix), mover.WithLogger(slog.New(moverLog)),
		mover.WithHooks(mover.Hooks{OnDataLoss: func(err error) {
			reportedAt.CompareAndSwap(0, checks.Load()) // the first report's
			moverLost.Add(1)
			lostErrs.Store("mover", err)
		}}))
	require.NoError(t, err)
	var mu sync.Mutex
	handled := map[string]int{}
	c, err := group.New(rdb, "q", "g", func(_ context.Context, m *group.Message) error {
		mu.Lock()
		handled[m.ID]++
		mu.Unlock()
		return nil
	}, group.WithPrefix(prefix), group.WithLogger(slog.New(consumerLog)),
		group.WithHooks(group.Hooks{OnDataLoss: func(err error) { consumerLost.Add(1); lostErrs.Store("consumer", err) }}),
		group.WithoutPromotion()) // the mover above promotes, and reports its own loss
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, run := range []func(context.Context) error{mv.Run, c.Run} {
		wg.Add(1)
		go func() { defer wg.Done(); assert.NoError(t, run(runCtx)) }()
	}
	t.Cleanup(func() { stop(); wg.Wait() })
	delivered := func(ids ...string) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			for _, id := range ids {
				if handled[id] == 0 {
					return false
				}
			}
			return true
		}
	}
	schedule := func(ids ...string) {
		for _, id := range ids {
			_, err := q.Schedule(ctx, delay.Message{ID: id}, delay.After(0))
			require.NoError(t, err)
		}
	}

	schedule("before-1", "before-2")
	require.Eventually(t, delivered("before-1", "before-2"), 10*time.Second, 10*time.Millisecond)

	// A group deleted by hand, the data kept: recreated, no loss reported.
	require.NoError(t, rdb.XGroupDestroy(ctx, q.Keys().Main().Stream, "g").Err())
	schedule("kept-1")
	require.Eventually(t, delivered("kept-1"), 10*time.Second, 10*time.Millisecond)
	assert.Zero(t, moverLost.Load()+consumerLost.Load(), "a deleted group is not a data loss")

	// Restart empty.
	srv.kill()
	restarted := time.Now()
	startPlainServer(t, port) // stopped at cleanup
	if !assert.Eventually(t, func() bool { return moverLost.Load() == 1 && consumerLost.Load() == 1 },
		15*time.Second, 10*time.Millisecond, "both report the loss") {
		t.Fatalf("mover reported %d, consumer %d; mover errors %v; consumer errors %v",
			moverLost.Load(), consumerLost.Load(), moverLog.errors, consumerLog.errors)
	}
	t.Logf("loss reported within %s of the restart", time.Since(restarted).Round(time.Millisecond))
	for _, who := range []string{"mover", "consumer"} {
		v, ok := lostErrs.Load(who)
		require.True(t, ok)
		err := v.(error)
		assert.True(t, errors.Is(err, stream.ErrDataLost), "%s: %v", who, err)
		assert.Contains(t, err.Error(), "q", who)
	}

	schedule("after-1", "after-2")
	require.Eventually(t, delivered("after-1", "after-2"), 10*time.Second, 10*time.Millisecond,
		"delivery goes on after the loss")

	// Reported once: each part checks the queue's record again after its
	// report, and says nothing. The consumer checks when a read finds its
	// group missing: delete the group by hand, and a message delivered
	// afterwards was read after the check.
	require.NoError(t, rdb.XGroupDestroy(ctx, q.Keys().Main().Stream, "g").Err())
	schedule("after-3")
	require.Eventually(t, delivered("after-3"), 10*time.Second, 10*time.Millisecond, "delivery goes on after the group is recreated")
	// The mover checks whenever its client dropped connections (at most
	// once a second), one check after the other: drop its connections until
	// two more checks were answered since the report. The second began
	// after the first one's outcome was reported, or not.
	require.Eventually(t, func() bool {
		return killClients(ctx, rdb, moverClientName) == nil && checks.Load() >= reportedAt.Load()+2
	}, 10*time.Second, 250*time.Millisecond, "the mover checks the queue's record twice more")
	assert.Equal(t, int32(1), moverLost.Load(), "reported once")
	assert.Equal(t, int32(1), consumerLost.Load(), "reported once")
	assert.Equal(t, 1, moverLog.count("Redis lost the queue's data"))
	assert.Equal(t, 1, consumerLog.count("Redis lost the queue's data"))
}

// moverClientName names the connections of the mover's client in
// TestRedisRestartedEmpty.
const moverClientName = "dataloss-mover"

// isScriptOn reports whether cmd runs a script whose first key is key.
func isScriptOn(cmd redis.Cmder, key string) bool {
	args := cmd.Args()
	return len(args) > 3 && args[3] == key &&
		slices.Contains([]string{"eval", "evalsha", "eval_ro", "evalsha_ro"}, strings.ToLower(fmt.Sprint(args[0])))
}

// killClients closes, on the server, every connection named name.
func killClients(ctx context.Context, rdb redis.UniversalClient, name string) error {
	list, err := rdb.ClientList(ctx).Result()
	if err != nil {
		return err
	}
	for _, line := range strings.Split(list, "\n") {
		fields := strings.Fields(line)
		if !slices.Contains(fields, "name="+name) {
			continue
		}
		for _, f := range fields {
			if id, ok := strings.CutPrefix(f, "id="); ok {
				_ = rdb.Do(ctx, "CLIENT", "KILL", "ID", id).Err() // it may be gone already
			}
		}
	}
	return nil
}
