package dsprom_test

import (
	"context"
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

// queue_evicting_servers counts the servers that can evict the queue's
// keys: 1 on an allkeys-lru server with maxmemory, 0 on noeviction.
func TestEvictingServers(t *testing.T) {
	t.Parallel()
	for policy, want := range map[string]float64{"allkeys-lru": 1, "noeviction": 0} {
		t.Run(policy, func(t *testing.T) {
			s, err := redistest.Spawn("--maxmemory", "8mb", "--maxmemory-policy", policy)
			require.NoError(t, err)
			defer s.Stop()
			rdb := redis.NewClient(redistest.Options(t, s.Addr))
			defer rdb.Close()
			prefix := redistest.Prefix(t)
			q, err := delaystream.New(rdb, "orders", delaystream.WithPrefix(prefix))
			require.NoError(t, err)
			_, err = q.Schedule(context.Background(), delaystream.Message{ID: "a"}, delaystream.After(time.Hour))
			require.NoError(t, err)

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
