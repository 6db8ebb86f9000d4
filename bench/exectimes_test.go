package main

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"

	"github.com/delaystream/delaystream/internal/scripts"
)

// execStats names this library's scripts by file and others by SHA1,
// keeps commands run by scripts apart, skips its own SLOWLOG and CONFIG
// calls, and sorts by total time.
func TestExecStats(t *testing.T) {
	entry := func(addr string, d time.Duration, args ...string) redis.SlowLog {
		return redis.SlowLog{Args: args, Duration: d, ClientAddr: addr}
	}
	logs := []redis.SlowLog{
		entry("127.0.0.1:5000", 100*time.Microsecond, "evalsha", scripts.ScheduleGenerated.Hash(), "1"),
		entry("127.0.0.1:5000", 80*time.Microsecond, "EVALSHA", scripts.ScheduleGenerated.Hash(), "1"),
		entry("127.0.0.1:5001", 50*time.Microsecond, "evalsha", "0123456789abcdef0123456789abcdef01234567"),
		entry("?:0", 9*time.Microsecond, "ZCOUNT", "z", "-inf", "1"),
		entry("127.0.0.1:5001", 4*time.Microsecond, "zcount", "z", "-inf", "1"),
		entry("127.0.0.1:5002", 999*time.Microsecond, "slowlog", "get"),
		entry("127.0.0.1:5002", 999*time.Microsecond, "config", "set"),
		{},
	}
	got := execStats(logs)
	assert.Equal(t, []execStat{
		{name: "evalsha schedule_generated.lua", calls: 2, usec: 180},
		{name: "evalsha 01234567", calls: 1, usec: 50},
		{name: "zcount (in scripts)", calls: 1, usec: 9},
		{name: "zcount", calls: 1, usec: 4},
	}, got)
	assert.Equal(t, "evalsha schedule_generated.lua 90.0 µs/msg (1.00 calls/msg, 90.0 µs each), evalsha 01234567 25.0 µs/msg (0.50 calls/msg, 50.0 µs each)",
		execNote(got, 2, 2))
}

// An exec log records a command run while it lasts, with its script's
// commands apart, and puts the server's slow log settings back as they were.
func TestExecLogRestoresSettings(t *testing.T) {
	t.Parallel()
	_, admin := floorServer(t)
	ctx := context.Background()
	assert.NoError(t, admin.ConfigSet(ctx, "slowlog-log-slower-than", "12345").Err())
	assert.NoError(t, admin.ConfigSet(ctx, "slowlog-max-len", "77").Err())
	l, err := startExecLog(ctx, admin)
	assert.NoError(t, err)
	assert.Equal(t, "0", admin.ConfigGet(ctx, "slowlog-log-slower-than").Val()["slowlog-log-slower-than"])
	assert.NoError(t, scriptFloorSchedule.Run(ctx, admin, []string{scriptFloorKey}, "m", 1000).Err())
	stats, err := l.stop(ctx)
	assert.NoError(t, err)
	names := map[string]int64{}
	for _, s := range stats {
		names[s.name] = s.calls
	}
	assert.Equal(t, int64(1), names["zadd (in scripts)"], "the script's ZADD, apart: %v", names)
	assert.Equal(t, int64(1), names["time (in scripts)"], "%v", names)
	assert.Equal(t, "12345", admin.ConfigGet(ctx, "slowlog-log-slower-than").Val()["slowlog-log-slower-than"])
	assert.Equal(t, "77", admin.ConfigGet(ctx, "slowlog-max-len").Val()["slowlog-max-len"])
}
