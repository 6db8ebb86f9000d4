package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/internal/group"
	"github.com/delaystream/delaystream/internal/mover"
	"github.com/delaystream/delaystream/internal/redistest"
)

// childEnv carries a childSpec (JSON) to a re-executed test binary, which
// then runs one mover or one consumer instead of the tests (see TestMain),
// so that a test can stop it with SIGTERM or kill it with SIGKILL.
const childEnv = "DELAYSTREAM_INTEGRATION_CHILD"

// childSpec configures what a child process runs.
type childSpec struct {
	Role   string   // "mover", "consumer", "recurring" (see recurring_children_test.go) or "capped" (capped_children_test.go)
	Addrs  []string // Cluster seed addresses
	Prefix string
	Queue  string
	Shards int

	// Consumer only: a consumer of Group named Name with Workers handlers
	// and no read-ahead, so that it holds exactly Workers entries.
	Group   string
	Name    string
	Workers int

	// Recurring only: the schedule's interval (0: 1 s) and the version of
	// its definition.
	Every   time.Duration
	Version uint64
}

// Lines a child prints on stdout, one per event:
//
//	owned <shard> <shard> ...   a mover's OnOwnership (the new owned set; empty when none)
//	stopped                     a mover's Run returned nil after SIGTERM
//	held <id> <stream> <entry>  a consumer's handler got an entry (and never returns)
const (
	lineOwned   = "owned"
	lineStopped = "stopped"
	lineHeld    = "held"
)

// childMain runs the child described by spec until SIGTERM (a clean stop:
// the ctx given to Run is cancelled) or SIGKILL. It is the program a
// library user would write; only the program, never the library, handles
// signals.
func childMain(spec string) int {
	var cfg childSpec
	if err := json.Unmarshal([]byte(spec), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "child: bad spec:", err)
		return 2
	}
	tc, err := redistest.LoadTLSConfig() // from the Env the parent gave
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cfg.Addrs, MaxRedirects: 8, TLSConfig: tc})
	defer rdb.Close()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	// Safety net: the parent stops or kills this process long before.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM)
	defer stop()
	var out sync.Mutex // one line per write
	say := func(s string) {
		out.Lock()
		defer out.Unlock()
		fmt.Fprintln(os.Stdout, s)
	}

	var run func(context.Context) error
	switch cfg.Role {
	case "mover":
		m, err := mover.New(rdb, cfg.Queue, mover.WithPrefix(cfg.Prefix), mover.WithShards(cfg.Shards), mover.WithLogger(logger),
			mover.WithHooks(mover.Hooks{OnOwnership: func(owned []int) {
				say(strings.TrimSpace(lineOwned + " " + strings.Trim(fmt.Sprint(owned), "[]")))
			}}))
		if err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 2
		}
		run = m.Run
	case "recurring":
		if run, err = recurringChild(cfg, tc, logger); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 2
		}
	case "capped":
		if run, err = cappedChild(cfg, tc, logger); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 2
		}
	case "consumer":
		c, err := group.New(rdb, cfg.Queue, cfg.Group, func(ctx context.Context, m *group.Message) error {
			say(strings.Join([]string{lineHeld, m.ID, m.Stream, m.EntryID}, " "))
			<-ctx.Done() // hold the entry until the parent kills this process
			return ctx.Err()
		}, group.WithPrefix(cfg.Prefix), group.WithShards(cfg.Shards), group.WithConsumerName(cfg.Name),
			group.WithWorkers(cfg.Workers), group.WithPrefetch(0), group.WithLogger(logger),
			group.WithoutPromotion()) // the "mover" children promote
		if err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 2
		}
		run = c.Run
	default:
		fmt.Fprintf(os.Stderr, "child: unknown role %q\n", cfg.Role)
		return 2
	}
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	say(lineStopped)
	return 0
}

// proc is a child process running a childSpec.
type proc struct {
	name   string
	cmd    *exec.Cmd
	lines  chan procLine // closed when stdout ends
	stderr *lockedBuffer
	exited chan struct{} // closed once the process is reaped
	err    error         // Wait's result, after exited
	once   sync.Once
}

// procLine is a line a child printed and when the test received it.
type procLine struct {
	text string
	at   time.Time
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

// startProc re-executes the test binary as a child running spec. The
// child is killed when the test ends (and when this process dies).
func startProc(t *testing.T, name string, spec childSpec) *proc {
	t.Helper()
	js, err := json.Marshal(spec)
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), redistest.Env(t)...), childEnv+"="+string(js))
	return startCmd(t, name, cmd)
}

// startCmd starts cmd as a child whose stdout lines the test reads (a
// program in another language, or this test binary). The child is killed
// when the test ends (and when this process dies).
func startCmd(t *testing.T, name string, cmd *exec.Cmd) *proc {
	t.Helper()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	p := &proc{name: name, cmd: cmd, lines: make(chan procLine, 1024), stderr: &lockedBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = p.stderr
	require.NoError(t, cmd.Start())
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- procLine{text: sc.Text(), at: time.Now()}
		}
		close(p.lines)
		p.err = cmd.Wait() // after every read from the pipe
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("child %s (%v) stderr:\n%s", name, p.err, p.stderr.String())
		}
	})
	return p
}

// signal sends sig to the child (a no-op once it exited).
func (p *proc) signal(sig syscall.Signal) {
	select {
	case <-p.exited:
	default:
		_ = p.cmd.Process.Signal(sig)
	}
}

// kill sends SIGKILL and waits until the child is reaped.
func (p *proc) kill() {
	p.once.Do(func() { p.signal(syscall.SIGKILL) })
	<-p.exited
}

// waitExit waits up to limit for the child to exit and returns Wait's
// result.
func (p *proc) waitExit(t *testing.T, limit time.Duration) error {
	t.Helper()
	select {
	case <-p.exited:
		return p.err
	case <-time.After(limit):
		t.Fatalf("child %s did not exit within %s; stderr:\n%s", p.name, limit, p.stderr.String())
		return nil
	}
}
