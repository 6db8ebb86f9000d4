package main

import (
	"bytes"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/internal/redistest"
)

// The example on a real local cluster of three masters: every message is
// delivered, none early, every message promoted once, and every master
// holds shards and promotes.
func TestRun(t *testing.T) {
	c, err := redistest.SpawnCluster(3, 0)
	require.NoError(t, err)
	t.Cleanup(c.Stop)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs, MaxRedirects: 8, TLSConfig: c.TLSConfig()})
	t.Cleanup(func() { _ = rdb.Close() })

	var out bytes.Buffer
	rep, err := run(t.Context(), rdb, &out)
	t.Logf("output:\n%s", out.String())
	require.NoError(t, err)
	assert.Equal(t, messages, rep.Delivered)
	assert.Zero(t, rep.Early, "delivered before due")
	require.Len(t, rep.ShardsOn, 3, "shards on every master")
	promoted := 0
	for m, n := range rep.ShardsOn {
		assert.InDelta(t, shards/3, n, 1, "shards on %s", m)
		assert.Positive(t, rep.Promoted[m], "master %s promoted nothing", m)
		promoted += rep.Promoted[m]
	}
	assert.Equal(t, messages, promoted, "every message promoted once")
}
