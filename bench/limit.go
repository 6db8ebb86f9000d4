package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream"
)

// limitRun: one group rate-limited to -limit-rate per second with burst
// -limit-burst, consumed by -limit-consumers independent consumers (each
// a Queue with its own client, as separate processes would be; the first
// also promotes) with a backlog that keeps the limit busy for the whole
// -limit-duration. It reports the handled rate over the window, how far
// above the limit the handler starts went in any window of 100 ms, 1 s and
// 10 s (rate·w plus the burst is the most GCRA allows), and the Redis
// commands per second (inside scripts included) while limited.
func (b *bench) limitRun(ctx context.Context, _ string, _ int) (map[string]float64, error) {
	cfg := b.cfg
	if err := b.admin.FlushAll(ctx).Err(); err != nil {
		return nil, err
	}
	const queue, warm = "limited", time.Second
	backlog := int(float64(cfg.limitRate)*(cfg.limitDuration+warm).Seconds()*1.2) + 1000
	var mu sync.Mutex
	starts := make([]time.Time, 0, backlog)
	handler := func(context.Context, *delaystream.Delivery) error {
		now := time.Now()
		mu.Lock()
		starts = append(starts, now)
		mu.Unlock()
		return nil
	}
	var groups []*delaystream.Group
	var clients []*redis.Client
	defer func() {
		for _, c := range clients {
			_ = c.Close()
		}
	}()
	rctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	var producer *delaystream.Queue
	for i := range cfg.limitConsumers {
		rdb := redis.NewClient(&redis.Options{Addr: b.addr})
		clients = append(clients, rdb)
		opts := []delaystream.Option{}
		if i > 0 {
			opts = append(opts, delaystream.WithoutPromotion())
		}
		q, err := delaystream.New(rdb, queue, opts...)
		if err != nil {
			return nil, err
		}
		g, err := q.Handle("limited", handler, delaystream.WithWorkers(cfg.workers),
			delaystream.WithRateLimit(cfg.limitRate, time.Second, cfg.limitBurst))
		if err != nil {
			return nil, err
		}
		groups = append(groups, g)
		if producer == nil {
			producer = q
		}
		wg.Go(func() { _ = q.Run(rctx) })
	}
	items := make([]delaystream.Item, 0, 1000)
	for i := 0; i < backlog; i++ {
		items = append(items, delaystream.Item{Message: delaystream.Message{ID: "m" + strconv.Itoa(i), Payload: make([]byte, cfg.payload)},
			When: delaystream.After(0)})
		if len(items) == cap(items) || i == backlog-1 {
			if _, err := producer.ScheduleBatch(ctx, items); err != nil {
				return nil, err
			}
			items = items[:0]
		}
	}
	sleepFor(ctx, warm)
	s0, err := takeSnap(ctx, b.admin)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	var wait0 time.Duration
	for _, g := range groups {
		wait0 += g.Counters().LimitWait
	}
	sleepFor(ctx, cfg.limitDuration)
	s1, err := takeSnap(ctx, b.admin)
	if err != nil {
		return nil, err
	}
	t1 := time.Now()
	var wait1 time.Duration
	for _, g := range groups {
		wait1 += g.Counters().LimitWait
	}
	mu.Lock()
	all := slices.Clone(starts)
	mu.Unlock()
	slices.SortFunc(all, func(a, b time.Time) int { return a.Compare(b) })
	if len(all) >= backlog {
		return nil, fmt.Errorf("the backlog (%d) ran out: the limit was not busy all along", backlog)
	}
	var in []time.Time
	for _, t := range all {
		if !t.Before(t0) && t.Before(t1) {
			in = append(in, t)
		}
	}
	window := t1.Sub(t0)
	d := s0.delta(s1)
	rate := float64(len(in)) / window.Seconds()
	vals := map[string]float64{
		"limit_rate":       rate,
		"limit_off":        (rate - float64(cfg.limitRate)) / float64(cfg.limitRate) * 100,
		"limit_cmds_per_s": float64(d.calls) / window.Seconds(),
		"limit_cmds_msg":   float64(d.calls) / float64(max(len(in), 1)),
		"limit_redis_cpu":  d.cpu / window.Seconds(),
		"limit_wait_share": (wait1 - wait0).Seconds() / window.Seconds() / float64(len(groups)),
	}
	for _, w := range []time.Duration{100 * time.Millisecond, time.Second, 10 * time.Second} {
		if w <= window {
			// Over the whole run (warm-up and its first burst included).
			vals["limit_excess_"+w.String()] = mostIn(all, w) - float64(cfg.limitRate)*w.Seconds()
		}
	}
	logf("limit: %d starts in %s; most commands: %s", len(in), window.Round(time.Millisecond), d.top(6, float64(max(len(in), 1)), "/msg"))
	return vals, nil
}

// mostIn returns the most of the sorted times ts within any window of
// length w.
func mostIn(ts []time.Time, w time.Duration) float64 {
	most, j := 0, 0
	for i := range ts {
		for j < len(ts) && ts[j].Sub(ts[i]) < w {
			j++
		}
		most = max(most, j-i)
	}
	return float64(most)
}

// sleepFor waits d or until ctx ends.
func sleepFor(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
