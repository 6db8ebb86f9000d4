package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/internal/stream"
)

// sysCrashdup is the child system of the crashdup scenario: a delaystream
// consumer whose handlers take 10 ms and say which message they handled.
const sysCrashdup = "crashdup"

// crashdupHandler is how long each handler of the crashdup scenario runs.
const crashdupHandler = 10 * time.Millisecond

// crashdupWorkers is the workers of each crashdup consumer.
const crashdupWorkers = 8

// crashdupChild runs the crashdup child consumer: it prints "ready", then
// "done <seq>" after each handler returns (before its acknowledgement is
// sent), one write per line so that a SIGKILL loses none already printed.
func crashdupChild(ctx context.Context, rdb *redis.Client) error {
	q, err := delaystream.New(rdb, benchQueue, delaystream.WithoutPromotion())
	if err != nil {
		return err
	}
	var mu sync.Mutex
	_, err = q.Handle(benchGroup, func(ctx context.Context, d *delaystream.Delivery) error {
		time.Sleep(crashdupHandler) // the handler's work
		mu.Lock()
		defer mu.Unlock()
		_, err := io.WriteString(os.Stdout, "done "+strconv.Itoa(payloadSeq(d.Payload))+"\n")
		return err
	}, delaystream.WithWorkers(crashdupWorkers))
	if err != nil {
		return err
	}
	go func() { _ = q.Run(ctx) }()
	if err := waitGroup(ctx, rdb); err != nil {
		return err
	}
	_, err = io.WriteString(os.Stdout, "ready\n")
	return err
}

// waitGroup waits until the bench group exists on the queue's stream.
func waitGroup(ctx context.Context, rdb *redis.Client) error {
	layout, err := stream.NewLayout(delaystream.DefaultPrefix, benchQueue, 1)
	if err != nil {
		return err
	}
	key := layout.Shard(0).Main().Stream
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if gs, err := rdb.XInfoGroups(ctx, key).Result(); err == nil && len(gs) > 0 {
			return nil
		}
	}
	return errors.New("the group was not created within 10 s")
}

// handled records who handled which message when: who 0 is the survivor,
// k > 0 the k-th child.
type handled struct {
	mu  sync.Mutex
	evs map[int][]handleEvent // by message seq
}

type handleEvent struct {
	who int
	at  time.Time
}

func (h *handled) add(seq, who int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.evs[seq] = append(h.evs[seq], handleEvent{who, time.Now()})
}

func (h *handled) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.evs)
}

// dupsOf returns how many messages child who handled that another
// consumer handled again after at (the child's kill).
func (h *handled) dupsOf(who int, at time.Time) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, evs := range h.evs {
		mine, again := false, false
		for _, e := range evs {
			mine = mine || e.who == who
			again = again || e.who != who && e.at.After(at)
		}
		if mine && again {
			n++
		}
	}
	return n
}

// byChild returns how many messages child who handled.
func (h *handled) byChild(who int) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, evs := range h.evs {
		for _, e := range evs {
			if e.who == who {
				n++
			}
		}
	}
	return n
}

// child is one running crashdup child process.
type child struct {
	cmd     *exec.Cmd
	started time.Time
	done    chan struct{} // its stdout ended
}

// startChild starts child who and returns once it is ready.
func (b *bench) startChild(who int, h *handled) (*child, error) {
	cmd, err := childCommand(os.Stderr, "-system", sysCrashdup, "-addr", b.addr)
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, started: time.Now(), done: make(chan struct{})}
	ready := make(chan struct{})
	go func() {
		defer close(c.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			l := sc.Text()
			if l == "ready" {
				close(ready)
				continue
			}
			if s, ok := strings.CutPrefix(l, "done "); ok {
				if seq, err := strconv.Atoi(s); err == nil {
					h.add(seq, who)
				}
			}
		}
	}()
	select {
	case <-ready:
		return c, nil
	case <-c.done:
		_ = cmd.Wait()
		return nil, errors.New("child exited before ready")
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, errors.New("child not ready within 15 s")
	}
}

// kill kills c with SIGKILL and returns when: its stdout is read to the
// end afterwards, so every line it printed before is counted.
func (c *child) kill() time.Time {
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	at := time.Now()
	<-c.done
	_ = c.cmd.Wait()
	return at
}

// crashdup: messages due at once arrive at a steady rate and are handled
// by two consumers of one group, 8 workers each, 10 ms handlers: a child
// process, SIGKILLed several times a run (and started again at once), and
// a survivor in this process. For each kill we count the messages the
// killed child had handled (its handler returned) that are handled again
// afterwards: acknowledgements lost with the process. Every message must
// be handled at least once.
func (b *bench) crashdup(ctx context.Context, sysName string, run int) (map[string]float64, error) {
	sys, err := b.fresh(ctx, sysName)
	if err != nil {
		return nil, err
	}
	defer sys.Close()
	ds := sys.(*dsSystem)
	if err := ds.startMoverOnly(ctx); err != nil {
		return nil, err
	}
	h := &handled{evs: map[int][]handleEvent{}}
	q, err := delaystream.New(ds.rdb, benchQueue, delaystream.WithoutPromotion())
	if err != nil {
		return nil, err
	}
	_, err = q.Handle(benchGroup, func(ctx context.Context, d *delaystream.Delivery) error {
		time.Sleep(crashdupHandler)
		h.add(payloadSeq(d.Payload), 0)
		return nil
	}, delaystream.WithWorkers(crashdupWorkers))
	if err != nil {
		return nil, err
	}
	ds.goRun(ctx, q.Run)
	if err := waitGroup(ctx, ds.rdb); err != nil {
		return nil, err
	}

	cur, err := b.startChild(1, h)
	if err != nil {
		return nil, err
	}
	defer func() { cur.kill() }()
	n, err := b.crashdupProduce(ctx, ds, func(k int) error {
		at := cur.kill()
		killed := cur
		b.crashdupKilled = append(b.crashdupKilled, killedChild{who: k, at: at, alive: at.Sub(killed.started)})
		cur, err = b.startChild(k+1, h)
		return err
	})
	if err != nil {
		return nil, err
	}
	// Every message handled, then every entry acknowledged: the killed
	// children's entries have been taken over and handled again.
	deadline := time.Now().Add(30 * time.Second)
	for h.count() < n || ds.pendingCount(ctx) > 0 {
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	return b.crashdupResult(sysName, run, n, h), nil
}

// killedChild is a child killed in the current run.
type killedChild struct {
	who   int
	at    time.Time
	alive time.Duration
}

// crashdupProduce schedules messages due at once at the scenario's rate
// for its duration (a batch every 10 ms), calling kill(k) for the k-th
// kill at evenly spaced moments, and returns how many it scheduled.
func (b *bench) crashdupProduce(ctx context.Context, ds *dsSystem, kill func(k int) error) (int, error) {
	b.crashdupKilled = b.crashdupKilled[:0]
	const tick = 10 * time.Millisecond
	per := max(1, b.cfg.crashdupRate*int(tick)/int(time.Second))
	every := b.cfg.crashdupDuration / time.Duration(b.cfg.crashdupKills+1)
	start := time.Now()
	nextKill, k := start.Add(every), 1
	seq := 0
	for i := 0; time.Since(start) < b.cfg.crashdupDuration; i++ {
		if d := time.Until(start.Add(time.Duration(i) * tick)); d > 0 {
			time.Sleep(d)
		}
		ps := make([][]byte, per)
		ws := make([]when, per)
		for j := range ps {
			ps[j] = payloadFor(seq, time.Now(), b.cfg.payload)
			seq++
		}
		if err := ds.ScheduleMany(ctx, ps, ws); err != nil {
			return seq, err
		}
		if k <= b.cfg.crashdupKills && time.Now().After(nextKill) {
			if err := kill(k); err != nil {
				return seq, err
			}
			k++
			nextKill = nextKill.Add(every)
		}
	}
	return seq, nil
}

// pendingCount returns the group's entries read and not acknowledged, -1
// on error.
func (s *dsSystem) pendingCount(ctx context.Context) int64 {
	p, err := s.rdb.XPending(ctx, s.keys.Main().Stream, benchGroup).Result()
	if err != nil {
		return -1
	}
	return p.Count
}

// crashdupResult counts one run's duplicates per kill and lost messages.
func (b *bench) crashdupResult(sysName string, run, n int, h *handled) map[string]float64 {
	var perKill []float64
	var rates []string
	for _, kc := range b.crashdupKilled {
		d := h.dupsOf(kc.who, kc.at)
		perKill = append(perKill, float64(d))
		b.res.add("crashdup", sysName+" kills", run, map[string]float64{"dups": float64(d)})
		rates = append(rates, fmt.Sprintf("%.0f", float64(h.byChild(kc.who))/kc.alive.Seconds()))
	}
	lost := 0
	h.mu.Lock()
	for seq := range n {
		if len(h.evs[seq]) == 0 {
			lost++
		}
	}
	h.mu.Unlock()
	b.res.note("crashdup", sysName, fmt.Sprintf("run %d: %d messages, %d kills; duplicates per kill %v; lost %d; each killed child handled %s msg/s while it lived (load %s)",
		run, n, len(perKill), perKill, lost, strings.Join(rates, ", "), loadAvg()))
	return map[string]float64{"dups_kill_p50": median(perKill), "dups_kill_max": slices.Max(append(perKill, 0)), "lost": float64(lost)}
}

// printCrashdupTable prints the duplicates per kill over every kill of
// every run.
func printCrashdupTable(w io.Writer, r *results) {
	xs := r.vals["crashdup"][sysDS+" kills"]["dups"]
	if len(xs) == 0 {
		return
	}
	lost, _ := r.value(metricDef{scenario: "crashdup", key: "lost", agg: "max"}, sysDS)
	mx := math.Inf(-1)
	for _, x := range xs {
		mx = max(mx, x)
	}
	fmt.Fprintf(w, "\ncrashdup: a child consumer (%d workers, %s handlers) beside a survivor, SIGKILLed and restarted; messages it handled that were handled again after its kill:\n",
		crashdupWorkers, crashdupHandler)
	fmt.Fprintf(w, "  duplicates per kill: median %.0f, max %.0f, over %d kills; lost (worst run): %.0f\n", median(xs), mx, len(xs), lost)
	printNotes(w, r, func(sc string) bool { return sc == "crashdup" })
}
