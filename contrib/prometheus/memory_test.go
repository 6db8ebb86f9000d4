package dsprom_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
	dsprom "github.com/delaystream/delaystream/contrib/prometheus"
	"github.com/delaystream/delaystream/internal/redistest"
)

// ordersOn starts a redis-server of the test's own with maxmemory and
// policy (stopped at the test's end, or before by the test) and schedules
// one message on queue "orders" under a prefix of the test's.
func ordersOn(t *testing.T, maxmemory, policy string) (*redistest.Server, *redis.Client, string) {
	t.Helper()
	s, err := redistest.Spawn("--maxmemory", maxmemory, "--maxmemory-policy", policy)
	require.NoError(t, err)
	t.Cleanup(s.Stop)
	rdb := redis.NewClient(redistest.Options(t, s.Addr))
	t.Cleanup(func() { _ = rdb.Close() })
	prefix := redistest.Prefix(t)
	q, err := delaystream.New(rdb, "orders", delaystream.WithPrefix(prefix))
	require.NoError(t, err)
	_, err = q.Schedule(context.Background(), delaystream.Message{ID: "a"}, delaystream.After(time.Hour))
	require.NoError(t, err)
	return s, rdb, prefix
}

// queue_evicting_servers counts the servers that can evict the queue's
// keys: 1 on an allkeys-lru server with maxmemory, 0 on noeviction.
func TestEvictingServers(t *testing.T) {
	t.Parallel()
	for policy, want := range map[string]float64{"allkeys-lru": 1, "noeviction": 0} {
		t.Run(policy, func(t *testing.T) {
			_, rdb, prefix := ordersOn(t, "8mb", policy)

			m, err := dsprom.New()
			require.NoError(t, err)
			reg := prometheus.NewPedanticRegistry()
			require.NoError(t, reg.Register(m))
			require.NoError(t, m.Watch(rdb, prefix, "orders"))
			got := scrape(t, reg)
			require.Contains(t, got, "delaystream_queue_evicting_servers{queue=orders}")
			assert.Equal(t, want, got["delaystream_queue_evicting_servers{queue=orders}"])
		})
	}
}

// Each server's memory is reported at each scrape (used, maxmemory and
// whether its policy can evict), and up says whether Redis could be
// read: when the server stops, a scrape still answers, with up 0 and
// every series there, repeating the last figures read, whose age grows.
func TestMemoryAndUp(t *testing.T) {
	t.Parallel()
	s, rdb, prefix := ordersOn(t, "64mb", "allkeys-lru")

	m, err := dsprom.New(dsprom.WithStatsTimeout(2 * time.Second))
	require.NoError(t, err)
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(m))
	require.NoError(t, m.WatchAll(rdb, prefix))
	got := scrape(t, reg)
	server := "{server=" + s.Addr + "}"
	assert.Equal(t, 1.0, got["delaystream_up{}"])
	assert.Equal(t, float64(64<<20), got["delaystream_redis_memory_max_bytes"+server])
	assert.Positive(t, got["delaystream_redis_memory_used_bytes"+server])
	assert.Less(t, got["delaystream_redis_memory_used_bytes"+server], float64(64<<20))
	assert.Equal(t, 1.0, got["delaystream_redis_memory_evicts"+server], "allkeys-lru can evict")
	assert.Equal(t, 1.0, got["delaystream_queue_waiting_messages{queue=orders}"])
	assert.Equal(t, 0.0, got["delaystream_queue_figures_age_seconds{queue=orders}"], "read by this scrape")

	require.NoError(t, rdb.ConfigSet(context.Background(), "maxmemory-policy", "noeviction").Err())
	read := time.Now() // before the last scrape that reads Redis
	before := scrape(t, reg)
	assert.Equal(t, 0.0, before["delaystream_redis_memory_evicts"+server], "noeviction does not")

	s.Stop()
	got = scrape(t, reg)
	assert.Equal(t, 0.0, got["delaystream_up{}"], "Redis down")
	assert.Equal(t, 1.0, got["delaystream_discovery_errors_total{}"])
	assert.Equal(t, 1.0, got["delaystream_stats_errors_total{queue=orders}"], "the queue, kept from the last discovery, was tried")
	for k, v := range before {
		if k == "delaystream_up{}" || k == "delaystream_queue_figures_age_seconds{queue=orders}" ||
			strings.HasPrefix(k, "delaystream_discovery_errors_total") || strings.HasPrefix(k, "delaystream_stats_errors_total") {
			continue
		}
		if assert.Contains(t, got, k, "a series of the last scrape that read Redis") {
			assert.Equal(t, v, got[k], "%s: the last figure read", k)
		}
	}
	age := got["delaystream_queue_figures_age_seconds{queue=orders}"]
	assert.Positive(t, age, "the figures are from an earlier scrape")
	assert.LessOrEqual(t, age, time.Since(read).Seconds())
	require.Eventually(t, func() bool {
		return scrape(t, reg)["delaystream_queue_figures_age_seconds{queue=orders}"] > age
	}, 10*time.Second, 50*time.Millisecond, "the age grows while Redis is down")
}
