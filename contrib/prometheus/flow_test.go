package dsprom_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/admin"
	dsprom "github.com/delaystream/delaystream/contrib/prometheus"
	"github.com/delaystream/delaystream/internal/redistest"
)

// The flow gauges: how long a queue and a group have been paused (0 when
// they are not), the group's limits and the time waited for them.
func TestPausedGauges(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	ctx := context.Background()
	m, err := dsprom.New()
	require.NoError(t, err)
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(m))
	require.NoError(t, m.Watch(rdb, prefix, "orders"))

	q, err := delaystream.New(rdb, "orders", delaystream.WithPrefix(prefix))
	require.NoError(t, err)
	require.NoError(t, q.Pause(ctx)) // records the queue
	require.NoError(t, rdb.XGroupCreateMkStream(ctx, prefix+":1:{orders}:s", "billing", "0").Err())
	in, err := admin.New(rdb, prefix)
	require.NoError(t, err)
	_, err = in.Pause(ctx, "orders", "billing")
	require.NoError(t, err)

	// Limits as a consumer records them (cap 3, 200 per 1 s, burst 20),
	// and the time waited for them, through the hook.
	require.NoError(t, rdb.HSet(ctx, prefix+":1:{orders}:f:billing", "limits", "3 200 1000000 20").Err())
	m.GroupHooks("orders", "billing").OnLimitWait(1500 * time.Millisecond)

	s := scrape(t, reg)
	assert.Equal(t, 3.0, s["delaystream_group_concurrency_limit{group=billing,queue=orders}"])
	held, ok := s["delaystream_group_concurrency_slots_held{group=billing,queue=orders}"]
	assert.True(t, ok)
	assert.Zero(t, held)
	assert.Equal(t, 200.0, s["delaystream_group_rate_limit_per_second{group=billing,queue=orders}"])
	assert.Equal(t, 20.0, s["delaystream_group_rate_limit_burst{group=billing,queue=orders}"])
	assert.Equal(t, 1.5, s["delaystream_group_limit_wait_seconds_total{group=billing,queue=orders}"])
	assert.Greater(t, s["delaystream_queue_paused_seconds{queue=orders}"], 0.0)
	assert.Less(t, s["delaystream_queue_paused_seconds{queue=orders}"], 60.0)
	assert.Greater(t, s["delaystream_group_paused_seconds{group=billing,queue=orders}"], 0.0)

	require.NoError(t, q.Resume(ctx))
	_, err = in.Resume(ctx, "orders", "billing")
	require.NoError(t, err)
	s = scrape(t, reg)
	v, ok := s["delaystream_queue_paused_seconds{queue=orders}"]
	assert.True(t, ok)
	assert.Zero(t, v)
	v, ok = s["delaystream_group_paused_seconds{group=billing,queue=orders}"]
	assert.True(t, ok)
	assert.Zero(t, v)
}
