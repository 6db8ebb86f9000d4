package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream"
)

// The recurring scenario: recurN schedules firing every minute, served by
// recurProcs processes (each its own client, promoting and handling one
// group), at the default horizon (1 min, topped up at half).
const (
	recurN     = 1000
	recurProcs = 2
)

// recurringCost measures the Redis cost of recurN schedules every minute:
// commands/s (inside scripts included) and Redis CPU over a whole minute
// (the occurrences fire at its start), then while idle between
// occurrences (from 10 s to 50 s past the minute: top-ups only); and how
// late the occurrences were handled.
func (b *bench) recurringCost(ctx context.Context, sysName string, run int) (map[string]float64, error) {
	if err := b.admin.FlushAll(ctx).Err(); err != nil {
		return nil, err
	}
	var (
		mu   sync.Mutex
		late []float64 // handled (local clock) - occurrence time, seconds
	)
	handle := func(_ context.Context, d *delaystream.Delivery) error {
		at, err := time.Parse(time.RFC3339Nano, d.Headers[delaystream.HeaderOccurrence])
		if err != nil {
			return err
		}
		mu.Lock()
		late = append(late, time.Since(at).Seconds())
		mu.Unlock()
		return nil
	}
	queues := make([]*delaystream.Queue, recurProcs)
	for i := range queues {
		rdb := redis.NewClient(&redis.Options{Addr: b.addr})
		defer rdb.Close()
		q, err := delaystream.New(rdb, "recurring")
		if err != nil {
			return nil, err
		}
		if _, err := q.Handle("g", handle); err != nil {
			return nil, err
		}
		queues[i] = q
	}
	payload := make([]byte, b.cfg.payload)
	t0 := time.Now()
	for i := range recurN {
		if _, err := queues[0].DefineRecurring(ctx, delaystream.Recurring{ID: fmt.Sprintf("s%04d", i), Spec: delaystream.Every(time.Minute), Payload: payload}); err != nil {
			return nil, err
		}
	}
	v := map[string]float64{"define_per_s": recurN / time.Since(t0).Seconds()}
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, q := range queues {
		wg.Go(func() { _ = q.Run(runCtx) })
	}
	defer func() {
		stop()
		wg.Wait()
	}()

	// From 5 s past the next minute, a whole minute.
	next := time.Now().Truncate(time.Minute).Add(time.Minute + 5*time.Second)
	time.Sleep(time.Until(next))
	mu.Lock()
	late = late[:0]
	mu.Unlock()
	cpu, calls, d, err := b.window(ctx, time.Minute)
	if err != nil {
		return nil, err
	}
	v["minute_cmds_per_s"], v["minute_redis_cpu_per_s"] = calls, cpu
	b.noteOnce("recurring", sysName, run, "over a minute: "+d.top(10, 60, "per s"))
	mu.Lock()
	v["fired_per_min"] = float64(len(late))
	slices.Sort(late)
	if len(late) > 0 {
		v["late_p50"], v["late_p99"] = late[len(late)/2], late[len(late)*99/100]
	}
	mu.Unlock()

	// Idle between occurrences: 10 s to 50 s past the minute.
	time.Sleep(5 * time.Second)
	cpu, calls, d, err = b.window(ctx, 40*time.Second)
	if err != nil {
		return nil, err
	}
	v["idle_cmds_per_s"], v["idle_redis_cpu_per_s"] = calls, cpu
	b.noteOnce("recurring", sysName, run, "between occurrences: "+d.top(10, 40, "per s"))
	return v, nil
}

// window measures Redis over span: CPU seconds per second, commands per
// second (commandstats, inside scripts included) and the delta.
func (b *bench) window(ctx context.Context, span time.Duration) (cpu, calls float64, d redisDelta, err error) {
	if err = b.admin.ConfigResetStat(ctx).Err(); err != nil {
		return
	}
	s0, err := takeSnap(ctx, b.admin)
	if err != nil {
		return
	}
	t0 := time.Now()
	time.Sleep(span)
	s1, err := takeSnap(ctx, b.admin)
	if err != nil {
		return
	}
	el := time.Since(t0).Seconds()
	d = s0.delta(s1)
	return d.cpu / el, float64(d.calls) / el, d, nil
}
