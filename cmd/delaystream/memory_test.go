package main

import (
	"encoding/json"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/internal/redistest"
	"github.com/delaystream/delaystream/internal/seedtest"
)

// memory shows each server's settings and exits 1 when one can evict;
// stats and queues warn about it.
func TestMemoryCommand(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		policy string
		code   int
	}{{"allkeys-lru", 1}, {"noeviction", 0}} {
		t.Run(c.policy, func(t *testing.T) {
			s, err := redistest.Spawn("--maxmemory", "8mb", "--maxmemory-policy", c.policy)
			require.NoError(t, err)
			defer s.Stop()
			tg := newTarget(t, s.Addr)
			r := tg.run(t, "memory")
			require.Equal(t, c.code, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
			assert.Regexp(t, `(?m)^SERVER\s+USED\s+MAXMEMORY\s+POLICY\s+EVICTED KEYS\s+EVICTS$`, r.stdout)
			assert.Regexp(t, `(?m)^`+s.Addr+`\s+[\d.]+ [KM]iB\s+8\.0 MiB\s+`+c.policy+`\s`, r.stdout)

			r = tg.run(t, "memory", "--json")
			require.Equal(t, c.code, r.code)
			var list []delaystream.RedisMemory
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &list))
			require.Len(t, list, 1)
			assert.Equal(t, c.policy, list[0].Policy)
			assert.Zero(t, list[0].Evicted, "a fresh server evicted nothing (and says so: not -1)")

			rdb := redis.NewClient(redistest.Options(t, s.Addr))
			defer rdb.Close()
			seedtest.Seed(t, rdb, tg.prefix)
			stats := tg.run(t, "stats", "orders")
			queues := tg.run(t, "queues")
			require.Equal(t, 0, stats.code, stats.stderr)
			require.Equal(t, 0, queues.code, queues.stderr)
			if c.code == 1 {
				assert.Contains(t, r.stderr, "may evict the queues' keys")
				assert.Contains(t, stats.stderr, "WARNING: Redis "+s.Addr+" has maxmemory-policy allkeys-lru")
				assert.Contains(t, queues.stderr, "WARNING: Redis "+s.Addr+" has maxmemory-policy allkeys-lru")
			} else {
				assert.NotContains(t, stats.stderr, "WARNING")
				assert.NotContains(t, queues.stderr, "WARNING")
			}
		})
	}
}

// A full server (noeviction, used memory at maxmemory) is said so: memory
// exits 1, and queues and stats warn, queues also when it finds no queue.
func TestMemoryFull(t *testing.T) {
	t.Parallel()
	s, err := redistest.Spawn("--maxmemory-policy", "noeviction")
	require.NoError(t, err)
	defer s.Stop()
	tg := newTarget(t, s.Addr)
	r := tg.run(t, "queues")
	require.Equal(t, 0, r.code, r.stderr)
	assert.NotContains(t, r.stderr, "WARNING")

	rdb := redis.NewClient(redistest.Options(t, s.Addr))
	defer rdb.Close()
	require.NoError(t, rdb.ConfigSet(t.Context(), "maxmemory", "1").Err())
	full := "WARNING: Redis " + s.Addr + " is full"
	r = tg.run(t, "memory")
	assert.Equal(t, exitError, r.code, r.stdout)
	assert.Contains(t, r.stderr, "a Redis server is full")
	r = tg.run(t, "queues")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "no queues under prefix")
	assert.Contains(t, r.stderr, full, "no queue found, the server full")

	require.NoError(t, rdb.ConfigSet(t.Context(), "maxmemory", "0").Err())
	seedtest.Seed(t, rdb, tg.prefix)
	require.NoError(t, rdb.ConfigSet(t.Context(), "maxmemory", "1").Err())
	r = tg.run(t, "stats", "orders")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stderr, full)
}
