package main

import (
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
