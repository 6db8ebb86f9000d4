// Package redistest starts throwaway redis-server processes for tests: a
// single server or a local Cluster, on free loopback ports, with persistence
// off, killed when the test binary ends (and when it dies: Pdeathsig).
//
// It never skips: when redis-server cannot be found or started, the test
// fails with a message naming what to install.
//
// With DELAYSTREAM_TLS=1 the servers listen on TLS only and the clients
// handed out use TLS (see [TLS]); tests that build clients of their own
// take [Options] or [TLSConfig], and tests that start child processes give
// them [Env].
package redistest

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

// InstallHint is printed when redis-server is missing.
const InstallHint = "redis-server (Redis >= 7.0) is required: install it with `apt-get install -y redis-server` (Debian/Ubuntu), `brew install redis` (macOS), or set REDIS_ADDR to a server the tests may write to"

// Server is one redis-server child process.
type Server struct {
	Addr string // host:port to connect to
	TLS  bool   // Addr is a TLS port (TLS mode); the server has no plain port
	cmd  *exec.Cmd
	dir  string
}

var (
	mu      sync.Mutex
	started []*Server
)

// Binary returns the path of redis-server or an error carrying InstallHint.
func Binary() (string, error) {
	p, err := exec.LookPath("redis-server")
	if err != nil {
		return "", fmt.Errorf("redistest: %s", InstallHint)
	}
	return p, nil
}

// Spawn starts a redis-server with extra arguments and waits until it
// answers PING. The caller must Stop it (or call StopAll). In TLS mode the
// server listens on a TLS port only, and replicates over TLS.
func Spawn(extra ...string) (*Server, error) {
	return spawn(TLS(), extra...)
}

// spawn is Spawn with TLS on or off whatever the mode.
func spawn(useTLS bool, extra ...string) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	var certs *tlsFiles
	if useTLS {
		if certs, err = loadCerts(); err != nil {
			return nil, err
		}
	}
	for attempt := 0; attempt < 5; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		dir, err := os.MkdirTemp("", "redistest-")
		if err != nil {
			return nil, err
		}
		listen := []string{"--port", strconv.Itoa(port)}
		if certs != nil {
			listen = certs.serverArgs(port)
		}
		args := append(append([]string{"--bind", "127.0.0.1"}, listen...),
			"--save", "", "--appendonly", "no", "--dir", dir, "--daemonize", "no",
			"--protected-mode", "no", "--loglevel", "warning")
		args = append(args, extra...)
		cmd := exec.Command(bin, args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
		out, _ := cmd.StdoutPipe()
		cmd.Stderr = cmd.Stdout
		if err := cmd.Start(); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("redistest: start %s: %w (%s)", bin, err, InstallHint)
		}
		var logBuf strings.Builder
		var logMu sync.Mutex
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				logMu.Lock()
				logBuf.WriteString(sc.Text() + "\n")
				logMu.Unlock()
			}
		}()
		s := &Server{Addr: "127.0.0.1:" + strconv.Itoa(port), TLS: certs != nil, cmd: cmd, dir: dir}
		var tc *tls.Config
		if certs != nil {
			tc = certs.client.Clone()
		}
		if err := waitPing(s.Addr, tc, 5*time.Second); err != nil {
			s.Stop()
			logMu.Lock()
			l := logBuf.String()
			logMu.Unlock()
			if strings.Contains(l, "Address already in use") {
				continue
			}
			return nil, fmt.Errorf("redistest: redis-server on %s did not answer: %w; log:\n%s", s.Addr, err, l)
		}
		mu.Lock()
		started = append(started, s)
		mu.Unlock()
		return s, nil
	}
	return nil, fmt.Errorf("redistest: could not find a free port for redis-server")
}

// Stop kills the server and removes its directory. It is idempotent.
func (s *Server) Stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
		s.cmd = nil
	}
	if s.dir != "" {
		os.RemoveAll(s.dir)
		s.dir = ""
	}
}

// StopAll stops every server started by this process, then removes the
// TLS certificates it generated.
func StopAll() {
	mu.Lock()
	defer mu.Unlock()
	for _, s := range started {
		s.Stop()
	}
	started = nil
	removeCerts()
}

// Main runs the tests, stops every server they started, and fails the run
// if a goroutine the tests started is still running (goleak). Use it as
// TestMain: func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }.
func Main(m *testing.M) int {
	before := goleak.IgnoreCurrent()
	code := m.Run()
	StopAll()
	if code == 0 {
		// Every goroutine a test started (movers, consumers, clients'
		// pools) must be gone once the tests are: a leak fails the run.
		if err := goleak.Find(before); err != nil {
			fmt.Fprintln(os.Stderr, "redistest: goroutines leaked by the tests:", err)
			code = 1
		}
	}
	return code
}

var (
	sharedOnce sync.Once
	sharedAddr string
	sharedErr  error
)

// Addr returns the address of the package's shared server: REDIS_ADDR when
// set, else one redis-server started on first use. Tests share it and keep
// apart by unique key prefixes (see Prefix). It fails tb when no server can be had.
func Addr(tb testing.TB) string {
	tb.Helper()
	if a := os.Getenv("REDIS_ADDR"); a != "" {
		return a
	}
	sharedOnce.Do(func() {
		var s *Server
		s, sharedErr = Spawn()
		if s != nil {
			sharedAddr = s.Addr
		}
	})
	if sharedErr != nil {
		tb.Fatalf("%v", sharedErr)
	}
	return sharedAddr
}

// Client returns a client of the shared server (over TLS in TLS mode),
// closed when tb ends.
func Client(tb testing.TB) *redis.Client {
	tb.Helper()
	c := redis.NewClient(Options(tb, Addr(tb)))
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Prefix returns a key prefix unique to tb: its name (sanitized) plus a
// random suffix, so parallel tests never share keys.
func Prefix(tb testing.TB) string {
	var b strings.Builder
	for _, r := range tb.Name() {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	s := b.String()
	if len(s) > 60 {
		s = s[len(s)-60:]
	}
	return fmt.Sprintf("t.%s.%d", s, time.Now().UnixNano()%1e9)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func waitPing(addr string, tc *tls.Config, limit time.Duration) error {
	c := redis.NewClient(&redis.Options{Addr: addr, TLSConfig: tc, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	deadline := time.Now().Add(limit)
	var err error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		err = c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return err
}

// Keys returns every key under prefix with a digest of its content (its
// type and DUMP), for tests that check that a call wrote nothing.
func Keys(tb testing.TB, rdb redis.UniversalClient, prefix string) map[string]string {
	tb.Helper()
	ctx := context.Background()
	out := map[string]string{}
	scan := func(ctx context.Context, c *redis.Client) error {
		it := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for it.Next(ctx) {
			k := it.Val()
			typ, err := c.Type(ctx, k).Result()
			if err != nil {
				return err
			}
			dump, err := c.Dump(ctx, k).Result()
			if err != nil && err != redis.Nil {
				return err
			}
			out[k] = typ + ":" + dump
		}
		return it.Err()
	}
	var err error
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		var mu sync.Mutex
		err = c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
			mu.Lock() // out is shared
			defer mu.Unlock()
			return scan(ctx, n)
		})
	case *redis.Client:
		err = scan(ctx, c)
	default:
		tb.Fatalf("redistest.Keys: unsupported client %T", rdb)
	}
	if err != nil {
		tb.Fatalf("redistest.Keys: %v", err)
	}
	return out
}
