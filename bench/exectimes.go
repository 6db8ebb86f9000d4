package main

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream/internal/scripts"
)

// execLogMax bounds the slow log -exec-times keeps (each entry holds up to
// 32 arguments of up to 128 bytes): a longer run keeps its last entries.
const execLogMax = 500000

// execLog records every command's execution time on the server while a
// run lasts (-exec-times): the slow log with a threshold of 0. Unlike
// commandstats it tells scripts apart (by SHA1) and commands run by
// scripts from commands sent by clients. Its own cost is in the run's
// Redis CPU.
type execLog struct {
	rdb  *redis.Client
	prev [][2]string // the server's slow log settings before, to put back
}

// startExecLog resets the slow log and has it record every command.
func startExecLog(ctx context.Context, rdb *redis.Client) (*execLog, error) {
	l := &execLog{rdb: rdb}
	for _, kv := range [][2]string{{"slowlog-max-len", fmt.Sprint(execLogMax)}, {"slowlog-log-slower-than", "0"}} {
		was, err := rdb.ConfigGet(ctx, kv[0]).Result()
		if err != nil {
			return nil, fmt.Errorf("exec times: CONFIG GET %s: %w", kv[0], err)
		}
		if err := rdb.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
			return nil, fmt.Errorf("exec times: CONFIG SET %s: %w", kv[0], err)
		}
		l.prev = append([][2]string{{kv[0], was[kv[0]]}}, l.prev...)
	}
	if err := rdb.SlowLogReset(ctx).Err(); err != nil {
		return nil, fmt.Errorf("exec times: SLOWLOG RESET: %w", err)
	}
	return l, nil
}

// execStat is the execution time of one kind of command over a run.
type execStat struct {
	name  string
	calls int64
	usec  int64
}

// stop reads the slow log, puts the server's settings back and returns the commands' execution times, the largest total
// first.
func (l *execLog) stop(ctx context.Context) ([]execStat, error) {
	logs, err := l.rdb.SlowLogGet(ctx, execLogMax).Result()
	for _, kv := range l.prev {
		_ = l.rdb.ConfigSet(ctx, kv[0], kv[1]).Err()
	}
	_ = l.rdb.SlowLogReset(ctx).Err()
	if err != nil {
		return nil, fmt.Errorf("exec times: SLOWLOG GET: %w", err)
	}
	return execStats(logs), nil
}

// execStats groups slow log entries by command: EVALSHA by script (this
// library's by file, any other by the first 8 characters of its SHA1), and a command a script ran apart from the same command sent
// by a client (the slow log names a script's client "?:0").
func execStats(logs []redis.SlowLog) []execStat {
	by := map[string]*execStat{}
	for _, e := range logs {
		if len(e.Args) == 0 || strings.EqualFold(e.Args[0], "slowlog") || strings.EqualFold(e.Args[0], "config") {
			continue
		}
		name := strings.ToLower(e.Args[0])
		if name == "evalsha" && len(e.Args) > 1 {
			if f := scripts.Name(e.Args[1]); f != "" {
				name += " " + f
			} else {
				name += " " + e.Args[1][:min(8, len(e.Args[1]))]
			}
		}
		if e.ClientAddr == "?:0" {
			name += " (in scripts)"
		}
		s := by[name]
		if s == nil {
			s = &execStat{name: name}
			by[name] = s
		}
		s.calls++
		s.usec += e.Duration.Microseconds()
	}
	out := make([]execStat, 0, len(by))
	for _, s := range by {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].usec != out[j].usec {
			return out[i].usec > out[j].usec
		}
		return out[i].name < out[j].name
	})
	return out
}

// execNote describes the first k stats: execution µs per call and per
// message (of n messages), and calls per message.
func execNote(stats []execStat, k int, n float64) string {
	parts := make([]string, 0, k)
	for _, s := range stats[:min(k, len(stats))] {
		parts = append(parts, fmt.Sprintf("%s %.1f µs/msg (%.2f calls/msg, %.1f µs each)", s.name, float64(s.usec)/n, float64(s.calls)/n, float64(s.usec)/float64(s.calls)))
	}
	return strings.Join(parts, ", ")
}
