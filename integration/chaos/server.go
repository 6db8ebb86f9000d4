package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream/internal/redistest"
)

// server is the run's redis-server: append-only file on, RDB snapshots off,
// on a fixed port and directory, so that it can be killed and restarted
// from its AOF at the same address. Like redistest's servers it listens on
// TLS only in TLS mode (DELAYSTREAM_TLS=1).
type server struct {
	bin, dir, addr string
	port           int
	fsync          string
	tls            *tls.Config
	cmd            *exec.Cmd
	exited         chan struct{}
	log            *os.File
	onStart        func(pid int)
}

func newServer(dir, fsync string, tc *tls.Config, onStart func(pid int)) (*server, error) {
	bin, err := redistest.Binary()
	if err != nil {
		return nil, err
	}
	s := &server{bin: bin, dir: dir, fsync: fsync, tls: tc, onStart: onStart}
	if s.log, err = os.Create(filepath.Join(dir, "redis-server.log")); err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		s.port = l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		s.addr = "127.0.0.1:" + strconv.Itoa(s.port)
		if err = s.start(10 * time.Second); err == nil {
			return s, nil
		} else if attempt == 4 {
			return nil, err
		}
	}
}

// start starts the server on its port and directory (loading the AOF if
// there is one) and waits up to limit until it answers PING.
func (s *server) start(limit time.Duration) error {
	listen, err := listenArgs(s.port)
	if err != nil {
		return err
	}
	args := append([]string{"--bind", "127.0.0.1"}, listen...)
	args = append(args, "--dir", s.dir, "--save", "", "--appendonly", "yes", "--appendfsync", s.fsync,
		"--enable-debug-command", "yes", // DEBUG SLEEP
		"--daemonize", "no", "--protected-mode", "no", "--loglevel", "notice")
	cmd := exec.Command(s.bin, args...)
	// Its own process group (a terminal's ^C reaches the parent, which
	// kills it), killed when the parent dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	cmd.Stdout, cmd.Stderr = s.log, s.log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w (%s)", s.bin, err, redistest.InstallHint)
	}
	if s.onStart != nil {
		s.onStart(cmd.Process.Pid)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	c := redis.NewClient(&redis.Options{Addr: s.addr, TLSConfig: s.tls, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	deadline := time.Now().Add(limit)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			s.cmd, s.exited = cmd, exited
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("redis-server on %s exited (see %s)", s.addr, s.log.Name())
		default:
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
			return fmt.Errorf("redis-server on %s did not answer within %s: %v", s.addr, limit, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// kill SIGKILLs the server and waits until it is gone: a crash, not a
// shutdown; the restart has only what the AOF holds.
func (s *server) kill() {
	if s.cmd == nil {
		return
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.exited
	s.cmd = nil
}

// restart starts the server again after kill, on the same port (which may
// take a moment to be free) and directory.
func (s *server) restart(limit time.Duration) error {
	var err error
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if err = s.start(time.Until(deadline)); err == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return err
}

func (s *server) close() {
	s.kill()
	_ = s.log.Close()
}

// progTB lets the program call redistest's helpers that take a testing.TB
// (ListenArgs, Env) outside a test. Only Helper and Fatalf are called; the
// embedded nil TB is never used. Fatalf panics with the error, which
// callTB recovers.
type progTB struct{ testing.TB }

type tbFatal struct{ err error }

func (progTB) Helper() {}
func (progTB) Fatalf(format string, args ...any) {
	panic(tbFatal{fmt.Errorf(format, args...)})
}

func callTB[T any](f func(testing.TB) T) (out T, err error) {
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(tbFatal)
			if !ok {
				panic(r)
			}
			err = f.err
		}
	}()
	return f(progTB{}), nil
}

var tlsOnce sync.Mutex

// listenArgs returns the server's listen arguments: a plain port, or in
// TLS mode a TLS port only with redistest's certificates.
func listenArgs(port int) ([]string, error) {
	tlsOnce.Lock()
	defer tlsOnce.Unlock()
	return callTB(func(tb testing.TB) []string { return redistest.ListenArgs(tb, port) })
}

// childEnv returns the environment entries children need to reach the
// server (the TLS mode and certificate directory, in TLS mode).
func childEnv() ([]string, error) {
	tlsOnce.Lock()
	defer tlsOnce.Unlock()
	return callTB(func(tb testing.TB) []string { return redistest.Env(tb) })
}

// isNoGroup reports a NOGROUP reply (a stream or group not there yet).
func isNoGroup(err error) bool {
	return err != nil && !errors.Is(err, redis.Nil) && redis.HasErrorPrefix(err, "NOGROUP")
}
