package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
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

	"github.com/delaystream/delaystream/delay"
	"github.com/delaystream/delaystream/group"
	"github.com/delaystream/delaystream/internal/wire"
)

// childFlag, as the first argument, runs this binary as a consumer process
// for the crash scenario: it prints "ready", then "got <seq>" for every
// message it receives, and holds every message (its handler blocks) until
// it is killed.
const childFlag = "-bench-child"

func childMain(args []string) int {
	fs := flag.NewFlagSet("child", flag.ContinueOnError)
	sys := fs.String("system", sysDS, "")
	addr := fs.String("addr", "", "")
	workers := fs.Int("workers", 8, "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: *addr})
	out := make(chan string, 1024)
	go func() {
		w := bufio.NewWriter(os.Stdout)
		for l := range out {
			w.WriteString(l + "\n")
			if len(out) == 0 {
				w.Flush()
			}
		}
	}()
	hold := func(ctx context.Context, p []byte) error {
		out <- "got " + strconv.Itoa(payloadSeq(p))
		<-ctx.Done() // hold the message until killed
		return ctx.Err()
	}
	switch *sys {
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
		c, err := group.New(rdb, benchQueue, benchGroup, func(ctx context.Context, m *group.Message) error {
			return hold(ctx, m.Payload)
		}, group.WithWorkers(*workers), group.WithoutPromotion())
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

// crash: a consumer child process takes `workers` messages and holds them;
// a second consumer (in this process) is started; the child is killed with
// SIGKILL at a random moment within the visibility timeout; we measure how
// long until the second consumer has handled all of them.
func (b *bench) crash(ctx context.Context, sysName string, run int) (map[string]float64, error) {
	sys, err := b.fresh(ctx, sysName)
	if err != nil {
		return nil, err
	}
	defer sys.Close()
	k := b.cfg.workers
	if ds, ok := sys.(*dsSystem); ok {
		if err := ds.startMoverOnly(ctx); err != nil { // promotes the queue in this process
			return nil, err
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	childSys := sysName
	if sysName == sysRaw {
		childSys = sysDS // the killed consumer is a group.Consumer; only the survivor is the floor
	}
	cmd := exec.Command(exe, childFlag, "-system", childSys, "-addr", b.addr, "-workers", strconv.Itoa(b.cfg.workers))
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
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
	for i := 0; i < k; i++ {
		if err := sys.ScheduleOne(ctx, payloadFor(i, time.Now(), b.cfg.payload), when{in: 0}); err != nil {
			return nil, err
		}
	}
	if err := waitLines("got", k, 10*time.Second); err != nil {
		return nil, err
	}
	// The survivor.
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
	hold := 200*time.Millisecond + time.Duration(rand.Int64N(int64(group.DefaultVisibility)))
	time.Sleep(hold)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return nil, err
	}
	killed = true
	tKill := time.Now()
	limit := 30 * time.Second
	if sysName == sysAsynq {
		limit = 200 * time.Second
	}
	complete := tr.wait(limit)
	sum := tr.summarize()
	b.noteOnce("crash", sysName, run, fmt.Sprintf("%d messages held by the killed consumer; killed %s after the survivor started", k, hold.Round(time.Millisecond)))
	if !complete {
		// Recorded as the limit: a lower bound, and a failed target.
		b.res.note("crash", sysName, fmt.Sprintf("run %d: only %d of %d held messages handled elsewhere within %s of the kill; recorded as %s (a lower bound)",
			run, sum.delivered, k, limit, limit))
		l := limit.Seconds()
		v := map[string]float64{"redeliver": l, "redeliver_worst": l, "redeliver_first": l}
		if sum.delivered > 0 {
			v["redeliver_first"] = sum.first.Sub(tKill).Seconds()
		}
		return v, nil
	}
	last := sum.last.Sub(tKill).Seconds()
	return map[string]float64{
		"redeliver":       last,
		"redeliver_first": sum.first.Sub(tKill).Seconds(),
		"redeliver_worst": last,
	}, nil
}

// rawReclaim is the floor reference for crash redelivery: what the group
// package's defaults promise (visibility 2 s, reclaim every 1 s) done with
// bare XAUTOCLAIM and XACK, nothing else.
func (s *dsSystem) rawReclaim(ctx context.Context, h handler) error {
	key := s.q.Keys().Main().Stream
	t := time.NewTicker(group.DefaultReclaimEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		msgs, _, err := s.rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{
			Stream: key, Group: benchGroup, Consumer: "raw-survivor", MinIdle: group.DefaultVisibility, Start: "0-0", Count: 100,
		}).Result()
		if err != nil {
			continue
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
	}
}
