package scripts_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/internal/redistest"
	"github.com/delaystream/delaystream/internal/scripts"
)

// On a server that refuses every write that may add memory (noeviction,
// maxmemory 1), the scripts that replace what they write still write it:
// a flow call under a cap or a rate, a movers' beat, a per-key permit. A
// plain SET is refused on the same server, so the test sees the limit.
func TestScriptsReplaceAtMemoryLimit(t *testing.T) {
	t.Parallel()
	s, err := redistest.Spawn("--maxmemory-policy", "noeviction")
	require.NoError(t, err)
	t.Cleanup(s.Stop)
	rdb := redis.NewClient(redistest.Options(t, s.Addr))
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()

	// The state each script replaces, written while memory is free.
	runFlow(t, rdb, "f:cap", "", flowCall{consumer: "a", want: 2, cap: 10})
	runFlow(t, rdb, "f:rate", "", flowCall{consumer: "a", want: 1, interval: time.Millisecond})
	_, err = scripts.Movers.Run(ctx, rdb, []string{"movers"}, "m1", 5000, "beat", "ch").Result()
	require.NoError(t, err)
	_, err = scripts.KeyRate.Run(ctx, rdb, []string{"k:state", "k:res"}, 1000, 1, 1000).Result()
	require.NoError(t, err)
	capBefore := rdb.HGet(ctx, "f:cap", "c:a").Val()
	tatBefore := rdb.HGet(ctx, "f:rate", "tat").Val()
	beatBefore := rdb.ZScore(ctx, "movers", "m1").Val()
	stateBefore := rdb.Get(ctx, "k:state").Val()

	require.NoError(t, rdb.ConfigSet(ctx, "maxmemory", "1").Err())
	require.ErrorContains(t, rdb.Set(ctx, "plain", "x", 0).Err(), "OOM", "the server refuses writes that add memory")

	r := runFlow(t, rdb, "f:cap", "", flowCall{consumer: "a", held: 2, want: 3, cap: 10})
	assert.Equal(t, int64(3), r.granted, "slots granted under the cap")
	assert.NotEqual(t, capBefore, rdb.HGet(ctx, "f:cap", "c:a").Val(), "the consumer's slots rewritten")
	assert.Contains(t, rdb.HGet(ctx, "f:cap", "c:a").Val(), "5 ", "held 2 + granted 3")

	r = runFlow(t, rdb, "f:rate", "", flowCall{consumer: "a", want: 1, interval: time.Millisecond})
	assert.Equal(t, int64(1), r.granted, "a rate permit granted")
	assert.NotEqual(t, tatBefore, rdb.HGet(ctx, "f:rate", "tat").Val(), "the rate's state rewritten")

	_, err = scripts.Movers.Run(ctx, rdb, []string{"movers"}, "m1", 8000, "beat", "ch").Result()
	require.NoError(t, err, "a beat")
	assert.Greater(t, rdb.ZScore(ctx, "movers", "m1").Val(), beatBefore, "the registration renewed")

	wait, err := scripts.KeyRate.Run(ctx, rdb, []string{"k:state", "k:res"}, 1000, 1, 1000).Int64()
	require.NoError(t, err, "a per-key permit")
	assert.Zero(t, wait, "the permit is due at once (1 ms between permits)")
	assert.NotEqual(t, stateBefore, rdb.Get(ctx, "k:state").Val(), "the key's state rewritten")
}
