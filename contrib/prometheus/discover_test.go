package dsprom_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
	dsprom "github.com/delaystream/delaystream/contrib/prometheus"
	"github.com/delaystream/delaystream/internal/redistest"
)

// WatchAll reports every queue under the prefix, those created after it
// too, each once even when also watched by name, with its
// stats_errors_total series at 0.
func TestWatchAll(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	schedule := func(queue string, n int) {
		q, err := delaystream.New(rdb, queue, delaystream.WithPrefix(prefix))
		require.NoError(t, err)
		for i := range n {
			_, err = q.Schedule(ctx, delaystream.Message{ID: string(rune('a' + i))}, delaystream.After(time.Hour))
			require.NoError(t, err)
		}
	}
	schedule("orders", 2)

	m, err := dsprom.New()
	require.NoError(t, err)
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(m))
	require.NoError(t, m.WatchAll(rdb, prefix))
	require.NoError(t, m.WatchAll(rdb, prefix), "again: no change")
	require.NoError(t, m.Watch(rdb, prefix, "orders"))

	s := scrape(t, reg)
	assert.Equal(t, 2.0, s["delaystream_queue_waiting_messages{queue=orders}"])
	assert.Contains(t, s, "delaystream_stats_errors_total{queue=orders}")
	assert.Zero(t, s["delaystream_discovery_errors_total{}"])

	schedule("invoices", 3)
	s = scrape(t, reg) // a pedantic registry fails on a duplicate series
	assert.Equal(t, 3.0, s["delaystream_queue_waiting_messages{queue=invoices}"])
	assert.Contains(t, s, "delaystream_stats_errors_total{queue=invoices}")
	assert.Zero(t, s["delaystream_stats_errors_total{queue=invoices}"])

	require.ErrorIs(t, m.WatchAll(rdb, "bad prefix"), dsprom.ErrInvalidOption)
}
