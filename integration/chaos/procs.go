package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// proc is one child process (one incarnation of a slot).
type proc struct {
	name   string
	cmd    *exec.Cmd
	log    string
	exited chan struct{}
	err    error // Wait's result, once exited is closed
	killed bool  // we killed it (SIGKILL or SIGTERM): its exit is expected
}

func (p *proc) done() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// kill SIGKILLs the process and waits until it is reaped.
func (p *proc) kill() {
	p.killed = true
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// stop asks the process to stop (SIGTERM: its Run's ctx is cancelled) and
// kills it if it has not exited within limit.
func (p *proc) stop(limit time.Duration) (clean bool) {
	p.killed = true
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return p.err == nil
	case <-time.After(limit):
		p.kill()
		return false
	}
}

// procs starts children (this program, re-executed with -child) and
// remembers every one, so that none outlives the run.
type procs struct {
	self string   // this program's executable
	env  []string // the children's environment
	dir  string   // work directory: ledger/ and logs/ under it
	mu   sync.Mutex
	all  []*proc
	pids []int // every process started, redis-server included
}

func (ps *procs) notePid(pid int) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.pids = append(ps.pids, pid)
}

// start runs a child with spec. Its stdout and stderr go to logs/<name>.log.
func (ps *procs) start(name string, spec childSpec) (*proc, error) {
	js, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(ps.dir, "logs", name+".log")
	lf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer lf.Close() // the child has its own descriptor
	cmd := exec.Command(ps.self, "-child", string(js))
	cmd.Env = ps.env
	cmd.Stdout, cmd.Stderr = lf, lf
	// Killed if the parent dies, whatever the way.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	ps.mu.Lock()
	ps.all = append(ps.all, p)
	ps.pids = append(ps.pids, cmd.Process.Pid)
	ps.mu.Unlock()
	return p, nil
}

// killAll SIGKILLs every child still running and waits for each.
func (ps *procs) killAll() {
	ps.mu.Lock()
	all := append([]*proc(nil), ps.all...)
	ps.mu.Unlock()
	for _, p := range all {
		if !p.done() {
			p.kill()
		}
	}
}

// slot is a long-running child role (a mover or a consumer) that the fault
// injector kills and that is restarted at once, each time as a new
// incarnation with a name (and, for consumers, a consumer name) of its own.
type slot struct {
	ps    *procs
	base  string // e.g. "billing-c1", "mover-2"
	spec  childSpec
	mu    sync.Mutex
	inc   int
	cur   *proc
	crash []string // unexpected exits: name, status and the log's tail
}

func (s *slot) launch() error {
	s.inc++
	name := fmt.Sprintf("%s-%d", s.base, s.inc)
	spec := s.spec
	if spec.Role == "consumer" {
		spec.Name = name
		spec.Ledger = filepath.Join(s.ps.dir, "ledger", name+".log")
	}
	p, err := s.ps.start(name, spec)
	if err != nil {
		return err
	}
	s.cur = p
	return nil
}

// killAndRestart SIGKILLs the current incarnation, calls between (with the
// dead incarnation's name) and starts the next one.
func (s *slot) killAndRestart(between func(name string)) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.cur
	p.kill()
	if between != nil {
		between(p.name)
	}
	return p.name, s.launch()
}

// supervise restarts the slot if its process exited without being killed
// (a child that gave up: its Run returned an error), and records why.
func (s *slot) supervise() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil || !s.cur.done() || s.cur.killed {
		return nil
	}
	b, _ := os.ReadFile(s.cur.log)
	if len(b) > 400 {
		b = b[len(b)-400:]
	}
	s.crash = append(s.crash, fmt.Sprintf("%s exited (%v): %s", s.cur.name, s.cur.err, b))
	return s.launch()
}

func (s *slot) stop(limit time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil || s.cur.done() {
		return s.cur == nil || s.cur.killed || s.cur.err == nil
	}
	return s.cur.stop(limit)
}
