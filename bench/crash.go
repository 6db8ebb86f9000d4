package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream/internal/delay"
	"github.com/delaystream/delaystream/internal/group"
	"github.com/delaystream/delaystream/internal/wire"
)

// childFlag, as the first argument, runs this binary as a consumer process.
// For the crash scenario it prints "ready", then "got <seq>" for every
// message its handlers receive, and holds every message (its handlers
// block; the read-ahead waits behind them) until it is killed. With
// -system crashdup it is crashdup's child (crashdupChild), with -system
// limit a consumer of the limit scenarios (limitChild).
const childFlag = "-bench-child"

// childCommand returns the command that runs this binary as a child
// process (childFlag) with args, its stderr written to stderr. The child is
// killed if this process dies.
func childCommand(stderr io.Writer, args ...string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, append([]string{childFlag}, args...)...)
	cmd.Stderr = stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd, nil
}

func childMain(args []string) int {
	fs := flag.NewFlagSet("child", flag.ContinueOnError)
	sys := fs.String("system", sysDS, "")
	addr := fs.String("addr", "", "")
	workers := fs.Int("workers", 8, "")
	prefetch := fs.Int("prefetch", -1, "group.WithPrefetch; -1: the library default (adaptive)")
	var spec limitSpec
	fs.IntVar(&spec.rate, "limit-rate", 0, "limit: the group's rate limit per second; 0: none")
	fs.IntVar(&spec.burst, "limit-burst", 1, "limit: the rate limit's burst")
	fs.IntVar(&spec.concurrency, "limit-concurrency", 0, "limit: the group's concurrency cap; 0: none")
	fs.DurationVar(&spec.hold, "limit-hold", 0, "limit: how long each handler takes")
	promote := fs.Bool("promote", false, "limit: this process promotes the queue")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	spec.workers = *workers
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: *addr})
	out := make(chan string, 1024)
	flushed := make(chan struct{})
	go func() {
		defer close(flushed)
		w := bufio.NewWriter(os.Stdout)
		for l := range out {
			w.WriteString(l + "\n")
			if len(out) == 0 {
				w.Flush()
			}
		}
		w.Flush()
	}()
	hold := func(ctx context.Context, p []byte) error {
		out <- "got " + strconv.Itoa(payloadSeq(p))
		<-ctx.Done() // hold the message until killed
		return ctx.Err()
	}
	switch *sys {
	case sysLimit:
		err := limitChild(ctx, rdb, out, spec, *promote)
		close(out)
		<-flushed
		if err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 1
		}
		return 0
	case sysCrashdup:
		if err := crashdupChild(ctx, rdb); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 1
		}
		select {} // until killed
	case sysDS:
		q, err := delay.New(rdb, benchQueue)
		if err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 1
		}
		key := q.Keys().Main().Stream
		if err := rdb.XGroupCreateMkStream(ctx, key, benchGroup, "0").Err(); err != nil && !redis.HasErrorPrefix(err, "BUSYGROUP") {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 1
		}
		opts := []group.Option{group.WithWorkers(*workers), group.WithoutPromotion()}
		if *prefetch >= 0 {
			opts = append(opts, group.WithPrefetch(*prefetch))
		}
		c, err := group.New(rdb, benchQueue, benchGroup, func(ctx context.Context, m *group.Message) error {
			return hold(ctx, m.Payload)
		}, opts...)
		if err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 1
		}
		go func() { _ = c.Run(ctx) }()
	case sysAsynq:
		srv := asynq.NewServerFromRedisClient(rdb, asynqConfig(*workers))
		if err := srv.Start(asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
			return hold(ctx, t.Payload())
		})); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 1
		}
	default:
		fmt.Fprintln(os.Stderr, "child: unknown system", *sys)
		return 2
	}
	out <- "ready"
	select {} // until killed
}

// crash: a consumer child process takes crashWorkers + crashPrefetch
// messages and holds them: crashWorkers in its handlers (which block), the
// rest read ahead, queued behind them (asynq reads no more than it has
// workers: its child gets as many workers as messages, all in handlers).
// After a random pause (so that the kill falls anywhere in the child's
// lease-extension cycle), the child is killed with SIGKILL and a second
// consumer, with default options, is started just after the kill. We
// measure, for each held message, the time from the kill to the start of
// its handler in the second consumer: p50 and max over the held messages.
func (b *bench) crash(ctx context.Context, sysName string, run int) (map[string]float64, error) {
	sys, err := b.fresh(ctx, sysName)
	if err != nil {
		return nil, err
	}
	defer sys.Close()
	k := b.cfg.crashWorkers + b.cfg.crashPrefetch // messages the child holds
	childWorkers, childPrefetch := b.cfg.crashWorkers, b.cfg.crashPrefetch
	if sysName == sysAsynq {
		childWorkers, childPrefetch = k, 0 // no read-ahead: every held task is in a handler
	}
	if ds, ok := sys.(*dsSystem); ok {
		if err := ds.startMoverOnly(ctx); err != nil { // promotes the queue in this process
			return nil, err
		}
	}
	childSys := sysName
	if sysName == sysRaw {
		childSys = sysDS // the killed consumer is a group.Consumer; only the survivor is the floor
	}
	cmd, err := childCommand(os.Stderr, "-system", childSys, "-addr", b.addr,
		"-workers", strconv.Itoa(childWorkers), "-prefetch", strconv.Itoa(childPrefetch))
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
	killed := false
	defer func() {
		if !killed {
			_ = cmd.Process.Kill()
		}
		_ = cmd.Wait()
	}()
	lines := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	waitLines := func(prefix string, n int, d time.Duration) error {
		deadline := time.After(d)
		for got := 0; got < n; {
			select {
			case l, ok := <-lines:
				if !ok {
					return errors.New("child exited")
				}
				if strings.HasPrefix(l, prefix) {
					got++
				}
			case <-deadline:
				return fmt.Errorf("child: %d of %d %q lines within %s", got, n, prefix, d)
			}
		}
		return nil
	}
	if err := waitLines("ready", 1, 10*time.Second); err != nil {
		return nil, err
	}
	ps := make([][]byte, k)
	ws := make([]when, k)
	for i := range ps {
		ps[i] = payloadFor(i, time.Now(), b.cfg.payload)
	}
	if err := sys.ScheduleMany(ctx, ps, ws); err != nil {
		return nil, err
	}
	if err := waitLines("got", childWorkers, 10*time.Second); err != nil {
		return nil, err
	}
	held := k
	if ds, ok := sys.(*dsSystem); ok {
		// The read-ahead: every message is pending with the child.
		if held, err = ds.waitPending(ctx, k, 10*time.Second); err != nil {
			return nil, err
		}
	}
	pause := 200*time.Millisecond + time.Duration(rand.Int64N(int64(group.DefaultVisibility)))
	time.Sleep(pause)
	load := loadAvg()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return nil, err
	}
	killed = true
	tKill := time.Now()
	// The survivor, started just after the kill.
	tr := newTracker(k)
	if ds, ok := sys.(*dsSystem); ok && ds.raw {
		ds.goRun(ctx, func(ctx context.Context) error { return ds.rawReclaim(ctx, tr.handler) })
	} else if ok {
		err = ds.startConsumer(ctx, tr.handler)
	} else {
		err = sys.Start(ctx, tr.handler)
	}
	if err != nil {
		return nil, err
	}
	limit := 30 * time.Second
	if sysName == sysAsynq {
		limit = 200 * time.Second
	}
	complete := tr.wait(limit)
	sum := tr.summarize()
	survivor := fmt.Sprintf("a group.Consumer with %d workers, other options default", b.cfg.workers)
	switch sysName {
	case sysAsynq:
		survivor = fmt.Sprintf("an asynq server with %d workers, the bench's settings", b.cfg.workers)
	case sysRaw:
		survivor = "a bare XAUTOCLAIM loop"
	}
	b.noteOnce("crash", sysName, run, fmt.Sprintf("the killed consumer held %d messages (%d in handlers, %d read ahead); the survivor (%s) started just after the kill",
		held, childWorkers, held-childWorkers, survivor))
	since := tr.since(tKill)
	b.res.note("crash", sysName, fmt.Sprintf("run %d: held %d, killed %s after the child held them; kill -> handler start in the survivor: p50 %.2f s, max %.2f s, first %.2f s, %d of %d handled, %d duplicates (load %s)",
		run, held, pause.Round(time.Millisecond), since.p50.Seconds(), since.max.Seconds(), since.first.Seconds(), sum.delivered, k, sum.dups, load))
	v := map[string]float64{"held": float64(held)}
	if !complete {
		// Recorded as the limit: a lower bound, and a failed target.
		b.res.note("crash", sysName, fmt.Sprintf("run %d: only %d of %d held messages handled elsewhere within %s of the kill; recorded as %s (a lower bound)",
			run, sum.delivered, k, limit, limit))
		l := limit.Seconds()
		v["redeliver"], v["redeliver_worst"], v["redeliver_p50"], v["redeliver_first"] = l, l, l, l
		if sum.delivered > 0 {
			v["redeliver_first"] = since.first.Seconds()
		}
		if 2*sum.delivered > k {
			v["redeliver_p50"] = since.p50.Seconds()
		}
		return v, nil
	}
	v["redeliver"], v["redeliver_worst"] = since.max.Seconds(), since.max.Seconds()
	v["redeliver_p50"], v["redeliver_first"] = since.p50.Seconds(), since.first.Seconds()
	return v, nil
}

// waitPending waits until the group has n entries pending (read and not
// acknowledged), and returns how many it has.
func (s *dsSystem) waitPending(ctx context.Context, n int, d time.Duration) (int, error) {
	key := s.keys.Main().Stream
	deadline := time.Now().Add(d)
	for {
		p, err := s.rdb.XPending(ctx, key, benchGroup).Result()
		if err != nil {
			return 0, err
		}
		if int(p.Count) >= n {
			return int(p.Count), nil
		}
		if time.Now().After(deadline) {
			return int(p.Count), fmt.Errorf("child: %d of %d messages pending within %s", p.Count, n, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// rawReclaim is the floor reference for crash redelivery: what the group
// package's defaults promise (visibility 2 s, reclaim every 1 s, the first
// pass at start) done with bare XAUTOCLAIM and XACK, nothing else. A pass
// continues while the cursor says there is more.
func (s *dsSystem) rawReclaim(ctx context.Context, h handler) error {
	key := s.keys.Main().Stream
	t := time.NewTicker(group.DefaultReclaimEvery)
	defer t.Stop()
	for {
		for start := "0-0"; ctx.Err() == nil; {
			msgs, next, err := s.rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{
				Stream: key, Group: benchGroup, Consumer: "raw-survivor", MinIdle: group.DefaultVisibility, Start: start, Count: 100,
			}).Result()
			if err != nil {
				break
			}
			var ids []string
			for _, x := range msgs {
				if e, err := wire.Decode(key, x.ID, x.Values); err == nil {
					_ = h(ctx, delivery{payload: e.Envelope.Payload, due: e.Envelope.Due, appended: e.Appended()})
				}
				ids = append(ids, x.ID)
			}
			if len(ids) > 0 {
				_ = s.rdb.XAck(ctx, key, benchGroup, ids...).Err()
			}
			if start = next; start == "0-0" {
				break
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
