package health

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/admin"
)

// collect runs one check function and returns what it added.
func collect(f func(add adder)) []Check {
	var out []Check
	f(func(s Status, subject, format string, args ...any) {
		out = append(out, Check{Status: s, Subject: subject, Detail: fmt.Sprintf(format, args...)})
	})
	return out
}

func TestCheckServer(t *testing.T) {
	t.Parallel()
	mem := func(used, max int64, policy string) delaystream.RedisMemory {
		return delaystream.RedisMemory{Addr: "r:6379", Used: used, Max: max, Policy: policy, Known: true}
	}
	tests := []struct {
		name   string
		s      delaystream.RedisMemory
		status Status
		detail string
	}{
		{"no limit", mem(1<<20, 0, "noeviction"), OK, "used 1.0 MiB, no maxmemory"},
		{"room", mem(1<<20, 8<<20, "noeviction"), OK, "used 1.0 MiB of maxmemory 8.0 MiB, policy noeviction"},
		{"nearly full", mem(15<<20, 16<<20, "noeviction"), Warn, "nearly full: used 15.0 MiB of maxmemory 16.0 MiB"},
		{"full", mem(16<<20, 16<<20, "noeviction"), Fail, "full: used 16.0 MiB of maxmemory 16.0 MiB; with noeviction, Schedule is refused until the groups drain"},
		{"evicts", mem(1<<20, 16<<20, "allkeys-lru"), Fail, "maxmemory-policy allkeys-lru can evict the queues' keys (messages are lost): set noeviction"},
		{"unknown", delaystream.RedisMemory{Addr: "r:6379", Why: "INFO refused"}, OK, "answers; memory settings unknown (INFO refused)"},
	}
	for _, tt := range tests {
		got := collect(func(add adder) { checkServer(add, tt.s, DefaultLimits) })
		assert.Equal(t, []Check{{Status: tt.status, Subject: "redis r:6379", Detail: tt.detail}}, got, tt.name)
	}
}

func TestCheckQueue(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		q      admin.QueueReport
		status Status
	}{
		{"keeping up", admin.QueueReport{Queue: "q", Now: now, Waiting: 5, Overdue: 1, NextDue: now.Add(-time.Second)}, OK},
		{"stalled", admin.QueueReport{Queue: "q", Now: now, Waiting: 5, Overdue: 2, NextDue: now.Add(-2 * time.Minute)}, Fail},
		{"paused", admin.QueueReport{Queue: "q", Now: now, Overdue: 2, NextDue: now.Add(-time.Hour), PausedSince: now.Add(-time.Hour)}, Warn},
		{"quarantine", admin.QueueReport{Queue: "q", Now: now, Quarantined: 1}, Warn},
	}
	for _, tt := range tests {
		got := collect(func(add adder) { checkQueue(add, tt.q, DefaultLimits) })
		if assert.Len(t, got, 1, tt.name) {
			assert.Equal(t, tt.status, got[0].Status, "%s: %s", tt.name, got[0].Detail)
			assert.Equal(t, "queue q", got[0].Subject)
		}
	}
}

func TestCheckGroup(t *testing.T) {
	t.Parallel()
	live := []admin.ConsumerInfo{{Name: "a", Live: false}, {Name: "b", Live: true}}
	gone := []admin.ConsumerInfo{{Name: "a", Live: false}}
	tests := []struct {
		name   string
		g      admin.GroupReport
		status Status
	}{
		{"served", admin.GroupReport{Group: "g", Lag: 10, ConsumerList: live}, OK},
		{"idle, nobody", admin.GroupReport{Group: "g", ConsumerList: gone}, OK},
		{"work, nobody", admin.GroupReport{Group: "g", Lag: 10, ConsumerList: gone}, Fail},
		{"retries, nobody", admin.GroupReport{Group: "g", RetryWaiting: 1}, Fail},
		{"paused", admin.GroupReport{Group: "g", Lag: 10, PausedSince: time.Now()}, Warn},
		{"foreign", admin.GroupReport{Group: "g x", Lag: 10, Foreign: true}, OK},
	}
	for _, tt := range tests {
		got := collect(func(add adder) { checkGroup(add, "q", tt.g) })
		if assert.Len(t, got, 1, tt.name) {
			assert.Equal(t, tt.status, got[0].Status, "%s: %s", tt.name, got[0].Detail)
		}
	}
}
