package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// ownCommands are the commands the bench itself sends while measuring; they
// are left out of every command count.
var ownCommands = map[string]bool{
	"info": true, "config|resetstat": true, "config|get": true, "flushall": true,
	"memory|usage": true, "memory|purge": true, "monitor": true, "dbsize": true,
	"client|list": true, "config|set": true, "slowlog|get": true, "slowlog|reset": true,
	"latency|reset": true, "latency|latest": true,
}

// redisSnap is what INFO says at one instant.
type redisSnap struct {
	cpu   float64          // used_cpu_sys + used_cpu_user, seconds
	sys   float64          // used_cpu_sys: the kernel's share of cpu
	calls map[string]int64 // commandstats calls, by command (inside scripts included)
	usec  map[string]int64 // commandstats usec, by command (a script's includes its inner commands)
	mem   int64            // used_memory
	// reads and writes are total_reads_processed and
	// total_writes_processed: the read and write events the server handled
	// (a pipeline of commands arriving together is one read), which is what
	// a trickle's Redis CPU per message follows.
	reads, writes int64
}

func takeSnap(ctx context.Context, rdb *redis.Client) (redisSnap, error) {
	info, err := rdb.Info(ctx, "cpu", "commandstats", "memory", "stats").Result()
	if err != nil {
		return redisSnap{}, fmt.Errorf("info: %w", err)
	}
	s := redisSnap{calls: map[string]int64{}, usec: map[string]int64{}}
	sys, _ := strconv.ParseFloat(infoField(info, "used_cpu_sys"), 64)
	usr, _ := strconv.ParseFloat(infoField(info, "used_cpu_user"), 64)
	s.cpu, s.sys = sys+usr, sys
	s.mem, _ = strconv.ParseInt(infoField(info, "used_memory"), 10, 64)
	s.reads, _ = strconv.ParseInt(infoField(info, "total_reads_processed"), 10, 64)
	s.writes, _ = strconv.ParseInt(infoField(info, "total_writes_processed"), 10, 64)
	for _, l := range strings.Split(info, "\n") {
		l = strings.TrimSpace(l)
		rest, ok := strings.CutPrefix(l, "cmdstat_")
		if !ok {
			continue
		}
		name, stats, ok := strings.Cut(rest, ":")
		if !ok {
			continue
		}
		for _, kv := range strings.Split(stats, ",") {
			if v, ok := strings.CutPrefix(kv, "calls="); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				s.calls[name] = n
			}
			if v, ok := strings.CutPrefix(kv, "usec="); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				s.usec[name] = n
			}
		}
	}
	return s, nil
}

// redisDelta is the difference between two snapshots.
type redisDelta struct {
	cpu float64
	sys float64 // the kernel's share of cpu (used_cpu_sys)
	// reads and writes count the server's read and write events (INFO
	// stats), the bench's own INFO calls included (a few per snapshot).
	reads, writes int64
	calls         int64
	by            map[string]int64
	usec          map[string]int64
}

func (a redisSnap) delta(b redisSnap) redisDelta {
	d := redisDelta{cpu: b.cpu - a.cpu, sys: b.sys - a.sys, reads: b.reads - a.reads, writes: b.writes - a.writes, by: map[string]int64{}, usec: map[string]int64{}}
	for k, v := range b.calls {
		if ownCommands[k] {
			continue
		}
		if n := v - a.calls[k]; n > 0 {
			d.by[k] = n
			d.calls += n
			d.usec[k] = b.usec[k] - a.usec[k]
		}
	}
	return d
}

// topUsec returns the commands with the most execution time as "cmd µs"
// per div (commandstats usec: a script's time includes its inner commands).
func (d redisDelta) topUsec(k int, div float64, unit string) string {
	return redisDelta{by: d.usec}.top(k, div, unit)
}

// top returns the most frequent commands as "cmd n/unit" with n = calls/div.
func (d redisDelta) top(k int, div float64, unit string) string {
	type kv struct {
		k string
		v int64
	}
	var xs []kv
	for c, n := range d.by {
		xs = append(xs, kv{c, n})
	}
	sort.Slice(xs, func(i, j int) bool { return xs[i].v > xs[j].v || xs[i].v == xs[j].v && xs[i].k < xs[j].k })
	var parts []string
	for i, x := range xs {
		if i == k {
			break
		}
		parts = append(parts, fmt.Sprintf("%s %.2f", x.k, float64(x.v)/div))
	}
	return strings.Join(parts, ", ") + " " + unit
}

func infoField(info, key string) string {
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), key+":"); ok {
			return v
		}
	}
	return ""
}

// clientCPU returns this process's user+system CPU time.
func clientCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// monitor counts the commands Redis executes while it runs, split into those
// sent by clients and those called inside scripts ("[n lua]" in MONITOR
// output). Stop it with the returned function.
func monitor(addr string) (stop func() (client, script int64, err error), err error) {
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		conn.Close()
		return nil, err
	}
	type counts struct{ client, script int64 }
	done := make(chan counts, 1)
	go func() {
		var c counts
		sc := bufio.NewScanner(conn)
		sc.Buffer(make([]byte, 1<<16), 1<<24)
		for sc.Scan() {
			l := sc.Text()
			if !strings.HasPrefix(l, "+") || l == "+OK" {
				continue
			}
			// +1700000000.123456 [0 127.0.0.1:5555] "cmd" ...
			_, rest, ok := strings.Cut(l, "[")
			if !ok {
				continue
			}
			src, cmd, _ := strings.Cut(rest, "]")
			name, _, _ := strings.Cut(strings.TrimSpace(cmd), " ")
			name = strings.ToLower(strings.Trim(name, `"`))
			if name == "info" || name == "config" {
				continue
			}
			if strings.HasSuffix(src, " lua") {
				c.script++
			} else {
				c.client++
			}
		}
		done <- c
	}()
	return func() (int64, int64, error) {
		time.Sleep(50 * time.Millisecond) // let the last lines arrive
		conn.Close()
		c := <-done
		return c.client, c.script, nil
	}, nil
}
