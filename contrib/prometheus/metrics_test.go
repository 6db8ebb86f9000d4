package dsprom_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
	dsprom "github.com/delaystream/delaystream/contrib/prometheus"
	"github.com/delaystream/delaystream/internal/redistest"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

var quiet = slog.New(slog.DiscardHandler)

// scrape gathers reg and returns every sample by series: counters and
// gauges as "name{k=v,...}", histograms as name_count{...} and name_sum{...}.
func scrape(t *testing.T, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	fams, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			labels := make([]string, 0, len(m.GetLabel()))
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			sort.Strings(labels)
			ls := "{" + strings.Join(labels, ",") + "}"
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				out[f.GetName()+ls] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[f.GetName()+ls] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[f.GetName()+"_count"+ls] = float64(m.GetHistogram().GetSampleCount())
				out[f.GetName()+"_sum"+ls] = m.GetHistogram().GetSampleSum()
			}
		}
	}
	return out
}

// A known workload against a real Redis: 100 messages due at once, 10 of
// them failing their first attempt, 1 dead-lettered by its handler, 5
// waiting an hour; and a queue without a mover holding 3 overdue messages.
// The figures are the same on a queue of one shard and of four.
func TestWorkload(t *testing.T) {
	t.Parallel()
	for _, shards := range []int{1, 4} {
		t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) {
			t.Parallel()
			testWorkload(t, shards)
		})
	}
}

func testWorkload(t *testing.T, shards int) {
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	ctx := context.Background()

	m, err := dsprom.New()
	require.NoError(t, err)
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(m))

	q, err := delaystream.New(rdb, "orders", delaystream.WithPrefix(prefix), delaystream.WithLogger(quiet), delaystream.WithShards(shards),
		delaystream.WithMoverHooks(m.MoverHooks("orders")))
	require.NoError(t, err)
	const work = 2 * time.Millisecond
	c, err := q.Handle("billing", func(_ context.Context, d *delaystream.Delivery) error {
		// Not a wait: the handler's run time is what the duration
		// histogram records, so the handler takes real time (at least
		// work: a lower bound no load can break).
		time.Sleep(work)
		var n int
		_, _ = fmt.Sscanf(d.ID, "m%03d", &n)
		switch {
		case n == 99:
			return delaystream.DeadLetter(errors.New("poison"))
		case n < 10 && d.Attempt == 1:
			return errors.New("transient")
		}
		return nil
	}, delaystream.WithHooks(m.GroupHooks("orders", "billing")), delaystream.WithoutTrim(),
		delaystream.WithBackoff(delaystream.ConstantBackoff(10*time.Millisecond)))
	require.NoError(t, err)

	idle, err := delaystream.New(rdb, "idle", delaystream.WithPrefix(prefix), delaystream.WithoutPromotion())
	require.NoError(t, err)
	require.NoError(t, m.Watch(rdb, prefix, "orders", "idle"))
	require.NoError(t, m.Watch(rdb, prefix, "never", "orders"), "watching again adds only the new queue")

	items := make([]delaystream.Item, 0, 105)
	for i := range 100 {
		items = append(items, delaystream.Item{Message: delaystream.Message{ID: fmt.Sprintf("m%03d", i), Payload: []byte("x")}, When: delaystream.After(0)})
	}
	for i := range 5 {
		items = append(items, delaystream.Item{Message: delaystream.Message{ID: fmt.Sprintf("later%d", i)}, When: delaystream.After(time.Hour)})
	}
	_, err = q.ScheduleBatch(ctx, items)
	require.NoError(t, err)
	for i := range 3 {
		_, err := idle.Schedule(ctx, delaystream.Message{ID: fmt.Sprintf("late%d", i)}, delaystream.At(time.Now().Add(-time.Minute)))
		require.NoError(t, err)
	}

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- q.Run(runCtx) }()
	require.Eventually(t, func() bool {
		x := c.Counters()
		return x.Acked == 99 && x.DeadLettered == 1
	}, 20*time.Second, 10*time.Millisecond)

	s := scrape(t, reg) // while running: the mover owns its shard
	stop()
	require.NoError(t, <-done)

	orders := func(name, labels string) float64 {
		t.Helper()
		ls := []string{"group=billing", "queue=orders"}
		if labels != "" {
			ls = append(ls, strings.TrimPrefix(labels, ","))
		}
		sort.Strings(ls)
		key := name + "{" + strings.Join(ls, ",") + "}"
		v, ok := s[key]
		require.True(t, ok, "missing %s", key)
		return v
	}
	mover := func(name string) float64 {
		t.Helper()
		v, ok := s[name+"{queue=orders}"]
		require.True(t, ok, "missing %s", name)
		return v
	}

	// Hooks: every handler run by outcome, lags by lane, dead letters by reason.
	for outcome, want := range map[string]float64{"acked": 99, "retried": 10, "dead_lettered": 1,
		"dropped": 0, "reclaimed": 0, "handed_back": 0, "unsettled": 0} {
		assert.Equal(t, want, orders("delaystream_handler_duration_seconds_count", ",outcome="+outcome), outcome)
	}
	assert.GreaterOrEqual(t, orders("delaystream_handler_duration_seconds_sum", ",outcome=acked"), 99*work.Seconds())
	for lane, want := range map[string]float64{"main": 100, "retry": 10} {
		assert.Equal(t, want, orders("delaystream_delivery_lag_seconds_count", ",lane="+lane), lane)
		assert.Equal(t, want, orders("delaystream_promotion_lag_seconds_count", ",lane="+lane), lane)
		promo := orders("delaystream_promotion_lag_seconds_sum", ",lane="+lane)
		deliv := orders("delaystream_delivery_lag_seconds_sum", ",lane="+lane)
		assert.GreaterOrEqual(t, promo, 0.0, lane)
		assert.Less(t, promo, want*5, "%s: promotion lag under 5 s a message", lane)
		assert.GreaterOrEqual(t, deliv, promo, "%s: the handler starts after the append", lane)
	}
	assert.Equal(t, 1.0, orders("delaystream_dead_lettered_total", ",reason=handler"))
	for _, r := range []string{"attempts", "deliveries", "undecodable", "deleted", "expired", "other"} {
		assert.Zero(t, orders("delaystream_dead_lettered_total", ",reason="+r), r)
	}
	assert.Zero(t, orders("delaystream_reclaimed_total", ""))
	assert.Zero(t, orders("delaystream_deleted_while_pending_total", ""))
	assert.Zero(t, orders("delaystream_group_data_loss_total", ""))

	// Mover: 100 promoted (retries go through the group's own lane).
	assert.Equal(t, 100.0, mover("delaystream_mover_promoted_total"))
	assert.Equal(t, 100.0, mover("delaystream_mover_batch_size_sum"))
	assert.GreaterOrEqual(t, mover("delaystream_mover_batch_size_count"), float64(shards), "one call at least per shard")
	assert.Equal(t, mover("delaystream_mover_batch_size_count"), mover("delaystream_mover_promote_duration_seconds_count"))
	assert.Greater(t, mover("delaystream_mover_promote_duration_seconds_sum"), 0.0)
	assert.Zero(t, mover("delaystream_mover_quarantined_total"))
	assert.Equal(t, float64(shards), mover("delaystream_mover_owned_shards"))
	assert.Zero(t, s["delaystream_mover_errors_total{queue=orders,stuck=false}"])
	assert.Zero(t, s["delaystream_mover_errors_total{queue=orders,stuck=true}"])

	// Figures read from Redis at the scrape.
	assert.Equal(t, 5.0, mover("delaystream_queue_waiting_messages"))
	assert.Zero(t, mover("delaystream_queue_overdue_messages"))
	assert.Zero(t, mover("delaystream_queue_overdue_seconds"))
	assert.Equal(t, 100.0, mover("delaystream_queue_stream_entries"))
	assert.Zero(t, mover("delaystream_queue_quarantined_entries"))
	assert.Equal(t, 1.0, orders("delaystream_group_consumers", ""))
	assert.Zero(t, orders("delaystream_group_pending_messages", ""))
	assert.Zero(t, orders("delaystream_group_oldest_pending_seconds", ""))
	assert.Zero(t, orders("delaystream_group_lag_messages", ""))
	assert.Zero(t, orders("delaystream_group_retry_waiting_messages", ""))
	assert.Equal(t, 1.0, orders("delaystream_group_dead_letters", ""))
	assert.Equal(t, 3.0, s["delaystream_queue_waiting_messages{queue=idle}"])
	assert.Equal(t, 3.0, s["delaystream_queue_overdue_messages{queue=idle}"])
	assert.InDelta(t, 60, s["delaystream_queue_overdue_seconds{queue=idle}"], 10, "due a minute ago")
	assert.Zero(t, s["delaystream_queue_stream_entries{queue=idle}"])
	checkIdleAndUnused(t, s)

	// The counters Redis keeps: the same work, counted by the scripts
	// that did it (the scrape came after the consumer counted the last
	// acknowledgement, whose count went with it).
	assert.Equal(t, 100.0, mover("delaystream_history_promoted_total"))
	assert.Zero(t, mover("delaystream_history_quarantined_total"))
	assert.Equal(t, 99.0, orders("delaystream_history_handled_total", ""))
	assert.Equal(t, 10.0, orders("delaystream_history_retried_total", ""))
	assert.Equal(t, 1.0, orders("delaystream_history_dead_lettered_total", ""))
	assert.Zero(t, orders("delaystream_history_dropped_total", ""))
	assert.Zero(t, s["delaystream_history_promoted_total{queue=idle}"])
	assert.NotContains(t, s, "delaystream_history_promoted_total{queue=never}", "a queue Redis does not hold has no counts")

	// After Run, the mover owns nothing.
	assert.Zero(t, scrape(t, reg)["delaystream_mover_owned_shards{queue=orders}"])

	// Names, units and help follow the Prometheus conventions.
	problems, err := testutil.GatherAndLint(reg)
	require.NoError(t, err)
	assert.Empty(t, problems)
}

// checkIdleAndUnused checks the scrape s of TestWorkload for the queue
// idle, which has no group, and never, which was never used: it holds
// nothing, and is no error.
func checkIdleAndUnused(t *testing.T, s map[string]float64) {
	t.Helper()
	for k := range s {
		assert.False(t, strings.HasPrefix(k, "delaystream_group_") && strings.Contains(k, "queue=idle"), "idle has no group, yet %s", k)
	}
	for _, name := range []string{"waiting_messages", "overdue_messages", "overdue_seconds", "stream_entries", "quarantined_entries"} {
		k := "delaystream_queue_" + name + "{queue=never}"
		require.Contains(t, s, k)
		assert.Zero(t, s[k], k)
	}
	for _, queue := range []string{"orders", "idle", "never"} {
		k := "delaystream_stats_errors_total{queue=" + queue + "}"
		require.Contains(t, s, k, "the series exists from Watch on")
		assert.Zero(t, s[k], k)
	}
}

// A scrape whose Redis reads fail still answers, within the stats timeout,
// without the figures, and counts the failures.
func TestStatsErrors(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 50 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	m, err := dsprom.New(dsprom.WithStatsTimeout(200 * time.Millisecond))
	require.NoError(t, err)
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(m))
	require.NoError(t, m.Watch(rdb, "", "gone"))
	require.NoError(t, m.Watch(rdb, "ds", "gone"), "the default prefix, named")

	t0 := time.Now()
	s := scrape(t, reg)
	assert.Less(t, time.Since(t0), 2*time.Second)
	assert.Equal(t, 1.0, s["delaystream_stats_errors_total{queue=gone}"], "one failed read of the queue")
	assert.NotContains(t, s, "delaystream_queue_waiting_messages{queue=gone}")
	assert.Equal(t, 2.0, scrape(t, reg)["delaystream_stats_errors_total{queue=gone}"], "and one per scrape")
}

// Watch refuses what would not name a queue, or would report two queues
// as one, and watches nothing then.
func TestWatchRefuses(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 50 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	m, err := dsprom.New(dsprom.WithStatsTimeout(100 * time.Millisecond))
	require.NoError(t, err)
	require.NoError(t, m.Watch(rdb, "app", "orders"))
	for name, watch := range map[string]func() error{
		"nil client":          func() error { return m.Watch(nil, "", "q") },
		"invalid prefix":      func() error { return m.Watch(rdb, "a{b}", "q") },
		"no queue":            func() error { return m.Watch(rdb, "") },
		"empty queue name":    func() error { return m.Watch(rdb, "", "x", "") },
		"invalid queue name":  func() error { return m.Watch(rdb, "", "x", "a b") },
		"queue in two places": func() error { return m.Watch(rdb, "", "x", "orders") },
	} {
		t.Run(name, func(t *testing.T) {
			assert.ErrorIs(t, watch(), dsprom.ErrInvalidOption)
		})
	}
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(m))
	fams, err := reg.Gather()
	require.NoError(t, err)
	var queues []string
	for _, f := range fams {
		if f.GetName() == "delaystream_stats_errors_total" {
			for _, mt := range f.GetMetric() {
				queues = append(queues, mt.GetLabel()[0].GetValue())
			}
		}
	}
	assert.Equal(t, []string{"orders"}, queues, "the refused calls watched nothing")
}

// Each hook moves the series it should, with the values it was given.
func TestHooks(t *testing.T) {
	t.Parallel()
	m, err := dsprom.New(dsprom.WithNamespace("ds"))
	require.NoError(t, err)
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(m))
	gh, mh := m.GroupHooks("q", "g"), m.MoverHooks("q")
	now := time.Now()
	entry := fmt.Sprintf("%d-0", now.Add(-2*time.Second).UnixMilli()) // appended 2 s ago
	first := &delaystream.Delivery{ID: "a", Attempt: 1, Deliveries: 1, Due: now.Add(-3 * time.Second), EntryID: entry}
	again := &delaystream.Delivery{ID: "a", Attempt: 1, Deliveries: 2, Due: first.Due, EntryID: entry}
	retry := &delaystream.Delivery{ID: "a", Attempt: 2, Deliveries: 1, Due: now.Add(-time.Second), EntryID: fmt.Sprintf("%d-0", now.UnixMilli())}
	gh.OnDelivered(first)
	gh.OnDelivered(again) // a redelivery: no second promotion lag
	gh.OnDelivered(retry)
	gh.OnHandled(first, delaystream.HandlerAcked, 250*time.Millisecond)
	gh.OnHandled(first, delaystream.HandlerOutcome(42), time.Second) // an outcome of a later release
	gh.OnDeadLettered(nil, delaystream.ReasonUndecodable)
	gh.OnDeadLettered(first, "some new reason")
	gh.OnReclaimed("stream", 3, 1)
	gh.OnDataLoss(errors.New("lost"))
	mh.OnPromote("lane", 10, 2, 3*time.Millisecond)
	mh.OnPromote("lane", 0, 1, time.Millisecond) // only quarantined: no batch size
	mh.OnError("lane", errors.New("x"), true)
	mh.OnError("lane", errors.New("x"), false)
	mh.OnError("lane", errors.New("x"), false)
	mh.OnOwnership([]int{0, 2, 5})

	s := scrape(t, reg)
	want := map[string]float64{
		"ds_promotion_lag_seconds_count{group=g,lane=main,queue=q}":          1,
		"ds_promotion_lag_seconds_count{group=g,lane=retry,queue=q}":         1,
		"ds_delivery_lag_seconds_count{group=g,lane=main,queue=q}":           2,
		"ds_delivery_lag_seconds_count{group=g,lane=retry,queue=q}":          1,
		"ds_handler_duration_seconds_count{group=g,outcome=acked,queue=q}":   1,
		"ds_handler_duration_seconds_sum{group=g,outcome=acked,queue=q}":     0.25,
		"ds_handler_duration_seconds_count{group=g,outcome=unknown,queue=q}": 1,
		"ds_handler_duration_seconds_count{group=g,outcome=retried,queue=q}": 0,
		"ds_dead_lettered_total{group=g,queue=q,reason=undecodable}":         1,
		"ds_dead_lettered_total{group=g,queue=q,reason=other}":               1,
		"ds_dead_lettered_total{group=g,queue=q,reason=attempts}":            0,
		"ds_reclaimed_total{group=g,queue=q}":                                3,
		"ds_deleted_while_pending_total{group=g,queue=q}":                    1,
		"ds_group_data_loss_total{group=g,queue=q}":                          1,
		"ds_mover_promoted_total{queue=q}":                                   10,
		"ds_mover_quarantined_total{queue=q}":                                3,
		"ds_mover_batch_size_count{queue=q}":                                 1,
		"ds_mover_batch_size_sum{queue=q}":                                   10,
		"ds_mover_promote_duration_seconds_count{queue=q}":                   2,
		"ds_mover_promote_duration_seconds_sum{queue=q}":                     0.004,
		"ds_mover_errors_total{queue=q,stuck=true}":                          1,
		"ds_mover_errors_total{queue=q,stuck=false}":                         2,
		"ds_mover_owned_shards{queue=q}":                                     3,
		"ds_mover_data_loss_total{queue=q}":                                  0,
	}
	for k, v := range want {
		require.Contains(t, s, k)
		assert.InDelta(t, v, s[k], 1e-9, k)
	}
	// Promotion lag: entry time - due = 1 s on each lane; delivery lag is
	// measured by this host's clock, at least 3 s and 1 s.
	assert.InDelta(t, 1.0, s["ds_promotion_lag_seconds_sum{group=g,lane=main,queue=q}"], 0.01)
	assert.InDelta(t, 1.0, s["ds_promotion_lag_seconds_sum{group=g,lane=retry,queue=q}"], 0.01)
	assert.GreaterOrEqual(t, s["ds_delivery_lag_seconds_sum{group=g,lane=main,queue=q}"], 6.0)
	assert.GreaterOrEqual(t, s["ds_delivery_lag_seconds_sum{group=g,lane=retry,queue=q}"], 1.0)
	for k := range s {
		assert.False(t, strings.HasPrefix(k, "ds_queue_") || strings.HasPrefix(k, "ds_group_pending"), "nothing watched, yet %s", k)
	}
}

// The hooks allocate nothing per message.
func TestHooksDoNotAllocate(t *testing.T) {
	m, err := dsprom.New()
	require.NoError(t, err)
	gh, mh := m.GroupHooks("q", "g"), m.MoverHooks("q")
	msg := &delaystream.Delivery{ID: "a", Attempt: 1, Deliveries: 1, Due: time.Now(), EntryID: fmt.Sprintf("%d-0", time.Now().UnixMilli())}
	var n atomic.Int64
	allocs := testing.AllocsPerRun(100, func() {
		gh.OnDelivered(msg)
		gh.OnHandled(msg, delaystream.HandlerRetried, time.Millisecond)
		gh.OnDeadLettered(msg, delaystream.ReasonAttempts)
		gh.OnReclaimed("s", 1, 0)
		mh.OnPromote("l", 5, 0, time.Millisecond)
		n.Add(1)
	})
	assert.Zero(t, allocs)
}

func TestOptions(t *testing.T) {
	t.Parallel()
	for name, opt := range map[string]dsprom.Option{
		"empty namespace":      dsprom.WithNamespace(""),
		"namespace with colon": dsprom.WithNamespace("a:b"),
		"no lag buckets":       dsprom.WithLagBuckets(nil),
		"decreasing buckets":   dsprom.WithLagBuckets([]float64{1, 0.5}),
		"zero bucket":          dsprom.WithDurationBuckets([]float64{0, 1}),
		"timeout too short":    dsprom.WithStatsTimeout(time.Millisecond),
		"timeout too long":     dsprom.WithStatsTimeout(time.Hour),
		"negative series":      dsprom.WithMaxScheduleSeries(-1),
		"too many series":      dsprom.WithMaxScheduleSeries(100001),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := dsprom.New(opt)
			assert.ErrorIs(t, err, dsprom.ErrInvalidOption)
		})
	}
	_, err := dsprom.New(dsprom.WithNamespace("app_ds"), dsprom.WithLagBuckets([]float64{.01, 1}),
		dsprom.WithDurationBuckets([]float64{.5}), dsprom.WithStatsTimeout(time.Second))
	assert.NoError(t, err)
}
