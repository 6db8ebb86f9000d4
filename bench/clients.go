package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream"
)

// The producers the clients scenario compares: the Go library and the
// clients in other languages, on the same scripts.
const (
	sysGo     = "go"
	sysPython = "python"
	sysNode   = "node"
)

var clientSystems = []string{sysGo, sysPython, sysNode}

// clientRun is what one producer took for one phase.
type clientRun struct {
	Elapsed float64 `json:"elapsed_s"`
	CPU     float64 `json:"cpu_s"`
}

// clients: the scheduling rate, Redis CPU and commands per message, and
// the client's CPU per message of each language's producer, one call at a
// time and in batches of 100 (generated ids, due in 1 h). The scripts are
// the same, so Redis's cost per message should be too; the client's CPU is
// the language's.
func (b *bench) clients(ctx context.Context, sysName string, run int) (map[string]float64, error) {
	v := map[string]float64{}
	for _, ph := range []struct {
		mode string
		n    int
	}{{"one", b.cfg.oneN}, {"batch", b.cfg.n}} {
		if err := b.admin.FlushAll(ctx).Err(); err != nil {
			return nil, err
		}
		s0, err := takeSnap(ctx, b.admin)
		if err != nil {
			return nil, err
		}
		r, err := b.clientPhase(ctx, sysName, ph.mode, ph.n)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", sysName, ph.mode, err)
		}
		s1, err := takeSnap(ctx, b.admin)
		if err != nil {
			return nil, err
		}
		d := s0.delta(s1)
		n := float64(ph.n)
		v[ph.mode+"_rate"] = n / r.Elapsed
		v[ph.mode+"_redis_cpu"] = d.cpu / n
		v[ph.mode+"_cmds"] = float64(d.calls) / n
		v[ph.mode+"_client_cpu"] = r.CPU / n
		b.noteOnce("clients", sysName, run, ph.mode+": Redis execution time (commandstats usec): "+d.topUsec(4, n, "µs per msg"))
	}
	return v, nil
}

// clientPhase schedules n messages with one producer: the Go library in
// this process, or another language's bench program.
func (b *bench) clientPhase(ctx context.Context, sysName, mode string, n int) (clientRun, error) {
	if sysName == sysGo {
		return b.goPhase(ctx, mode, n)
	}
	var cmd *exec.Cmd
	args := []string{"--addr", b.addr, "--n", strconv.Itoa(n), "--mode", mode, "--payload", strconv.Itoa(b.cfg.payload)}
	switch sysName {
	case sysPython:
		cmd = exec.CommandContext(ctx, b.cfg.python, append([]string{filepath.Join("..", "clients", "python", "bench", "schedule.py")}, args...)...)
	case sysNode:
		cmd = exec.CommandContext(ctx, "node", append([]string{filepath.Join("..", "clients", "node", "bench", "schedule.mjs")}, args...)...)
	default:
		return clientRun{}, fmt.Errorf("unknown producer %q", sysName)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return clientRun{}, fmt.Errorf("%v: %s", err, stderr.String())
	}
	var r clientRun
	return r, json.Unmarshal(out, &r)
}

// goPhase is the Go producer's phase, timed as the other languages time
// theirs (the queue's record checked before the clock starts).
func (b *bench) goPhase(ctx context.Context, mode string, n int) (clientRun, error) {
	rdb := redis.NewClient(&redis.Options{Addr: b.addr})
	defer rdb.Close()
	q, err := delaystream.New(rdb, "bench", delaystream.WithoutPromotion())
	if err != nil {
		return clientRun{}, err
	}
	if _, err := q.Locate(ctx, "warm-up"); err != nil {
		return clientRun{}, err
	}
	payload := bytes.Repeat([]byte("x"), b.cfg.payload)
	c0, t0 := clientCPU(), time.Now()
	if mode == "one" {
		for range n {
			if _, err := q.Schedule(ctx, delaystream.Message{Payload: payload}, delaystream.After(time.Hour)); err != nil {
				return clientRun{}, err
			}
		}
	} else {
		for i := 0; i < n; i += 100 {
			items := make([]delaystream.Item, min(100, n-i))
			for k := range items {
				items[k] = delaystream.Item{Message: delaystream.Message{Payload: payload}, When: delaystream.After(time.Hour)}
			}
			if _, err := q.ScheduleBatch(ctx, items); err != nil {
				return clientRun{}, err
			}
		}
	}
	return clientRun{Elapsed: time.Since(t0).Seconds(), CPU: (clientCPU() - c0).Seconds()}, nil
}
