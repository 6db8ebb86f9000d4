package dsprom_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
	dsprom "github.com/delaystream/delaystream/contrib/prometheus"
	"github.com/delaystream/delaystream/internal/redistest"
)

// A watched queue's recurring schedules: their count, and per schedule
// the next and last occurrence, how late the last fired and whether it is
// paused.
func TestRecurringGauges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	m, err := dsprom.New()
	require.NoError(t, err)
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(m))
	q, err := delaystream.New(rdb, "jobs", delaystream.WithPrefix(prefix), delaystream.WithLogger(quiet))
	require.NoError(t, err)
	require.NoError(t, m.Watch(rdb, prefix, "jobs"))

	_, err = q.DefineRecurring(ctx, delaystream.Recurring{ID: "tick", Spec: delaystream.Every(time.Second)})
	require.NoError(t, err)
	_, err = q.DefineRecurring(ctx, delaystream.Recurring{ID: "nightly", Spec: delaystream.Every(24 * time.Hour)})
	require.NoError(t, err)
	require.NoError(t, q.PauseRecurring(ctx, "nightly"))
	_, err = q.Handle("g", func(context.Context, *delaystream.Delivery) error { return nil })
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- q.Run(runCtx) }()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		s := scrape(t, reg)
		assert.Equal(c, 2.0, s["delaystream_queue_recurring_schedules{queue=jobs}"])
		assert.Equal(c, 1.0, s["delaystream_recurring_paused{queue=jobs,schedule=nightly}"])
		assert.Equal(c, 0.0, s["delaystream_recurring_paused{queue=jobs,schedule=tick}"])
		assert.NotContains(c, s, "delaystream_recurring_next_occurrence_timestamp_seconds{queue=jobs,schedule=nightly}")
		next := s["delaystream_recurring_next_occurrence_timestamp_seconds{queue=jobs,schedule=tick}"]
		last := s["delaystream_recurring_last_occurrence_timestamp_seconds{queue=jobs,schedule=tick}"]
		now := float64(time.Now().UnixMilli()) / 1000
		assert.InDelta(c, now, next, 2)
		assert.InDelta(c, now, last, 5)
		assert.Equal(c, 1.0, next-last, "one second apart")
		late, ok := s["delaystream_recurring_last_lateness_seconds{queue=jobs,schedule=tick}"]
		assert.True(c, ok, "the last occurrence's lateness is known once it fired")
		assert.GreaterOrEqual(c, late, 0.0, "never early")
		assert.Less(c, late, 5.0)
		assert.Equal(c, 1.0, s["delaystream_recurring_paused_schedules{queue=jobs}"])
		assert.Equal(c, late, s["delaystream_recurring_max_lateness_seconds{queue=jobs}"], "tick's, the only one known")
	}, 20*time.Second, 100*time.Millisecond)
}

// A queue with more recurring schedules than WithMaxScheduleSeries reports
// the per-queue aggregates only: no series per schedule, however many.
func TestRecurringSeriesBound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	m, err := dsprom.New(dsprom.WithMaxScheduleSeries(2))
	require.NoError(t, err)
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(m))
	for _, c := range []struct {
		queue string
		n     int
	}{{"few", 2}, {"many", 3}} {
		q, err := delaystream.New(rdb, c.queue, delaystream.WithPrefix(prefix), delaystream.WithLogger(quiet))
		require.NoError(t, err)
		for i := range c.n {
			_, err := q.DefineRecurring(ctx, delaystream.Recurring{ID: fmt.Sprintf("s%d", i), Spec: delaystream.Every(24 * time.Hour)})
			require.NoError(t, err)
		}
		require.NoError(t, q.PauseRecurring(ctx, "s0"))
		require.NoError(t, m.Watch(rdb, prefix, c.queue))
	}

	s := scrape(t, reg)
	assert.Equal(t, 2.0, s["delaystream_queue_recurring_schedules{queue=few}"])
	assert.Equal(t, 1.0, s["delaystream_recurring_paused_schedules{queue=few}"])
	assert.Equal(t, 1.0, s["delaystream_recurring_paused{queue=few,schedule=s0}"], "within the bound: a series per schedule")
	assert.Equal(t, 0.0, s["delaystream_recurring_paused{queue=few,schedule=s1}"])
	assert.Equal(t, 3.0, s["delaystream_queue_recurring_schedules{queue=many}"])
	assert.Equal(t, 1.0, s["delaystream_recurring_paused_schedules{queue=many}"])
	for k := range s {
		assert.False(t, strings.Contains(k, "schedule=") && strings.Contains(k, "queue=many"), "a series per schedule beyond the bound: %s", k)
	}
}
