package engine

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/internal/delay"
	"github.com/delaystream/delaystream/internal/redistest"
)

// A busy lane sets its lease a few times per lease TTL, not at every
// promote call, and its lease never comes near lapsing while it promotes:
// 150 messages due 10 ms apart (1.5 s of calls, a call for about each)
// cost a handful of SETs, and the lease's time to live, sampled
// throughout, stays above a third of the TTL. On a server of its own, so
// that its SET count is this test's.
func TestBusyLaneRenewsItsLeaseAFewTimesPerTTL(t *testing.T) {
	t.Parallel()
	srv, err := redistest.Spawn()
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	rdb := redis.NewClient(redistest.Options(t, srv.Addr))
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()

	q, err := delay.New(rdb, "q")
	require.NoError(t, err)
	m, err := New(rdb, "q")
	require.NoError(t, err)
	lease := m.lanes[0].keys.Lease
	const n = 150
	base := time.Now().Add(300 * time.Millisecond)
	items := make([]delay.Item, n)
	for i := range items {
		items[i] = delay.Item{Message: delay.Message{Payload: []byte("x")}, When: delay.At(base.Add(time.Duration(i) * 10 * time.Millisecond))}
	}
	_, err = q.ScheduleBatch(ctx, items)
	require.NoError(t, err)
	require.NoError(t, rdb.ConfigResetStat(ctx).Err())

	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- m.Run(runCtx) }()
	minTTL := time.Hour
	for time.Now().Before(base.Add(n*10*time.Millisecond - 50*time.Millisecond)) {
		if time.Now().After(base.Add(50 * time.Millisecond)) {
			ttl, err := rdb.PTTL(ctx, lease).Result()
			require.NoError(t, err)
			minTTL = min(minTTL, ttl)
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.Eventually(t, func() bool { return m.Counters().Promoted == n }, 10*time.Second, 10*time.Millisecond)
	cancel()
	require.NoError(t, <-done)

	cs := commandCalls(t, rdb)
	calls, sets := cs["evalsha"], cs["set"]
	t.Logf("%d promote (and probe) script calls, %d SETs of the lease; lowest lease TTL seen %s", calls, sets, minTTL)
	assert.Greater(t, calls, int64(n/3), "a call for about each message")
	assert.LessOrEqual(t, sets, int64(12), "1.5 s of work: renewed about every TTL/3 (417 ms), not at every call")
	assert.Greater(t, minTTL, DefaultLeaseTTL/3, "renewed well before it could lapse")
}
