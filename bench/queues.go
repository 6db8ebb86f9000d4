package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream/internal/delay"
	"github.com/delaystream/delaystream/internal/group"
)

// manyQueues is the "queues" scenario: one process serving many queues,
// one group.Consumer each (promoting, as by default), all on one
// *redis.Client with go-redis's default pool. It measures the idle cost
// per queue, the connections the process holds, whether the pool ran out
// (go-redis pool timeouts), and that a message due at once on every queue
// is delivered promptly (no queue starved of connections).
func (b *bench) manyQueues(ctx context.Context, sysName string, run int) (map[string]float64, error) {
	if err := b.admin.FlushAll(ctx).Err(); err != nil {
		return nil, err
	}
	n := b.cfg.queuesN
	rdb := redis.NewClient(&redis.Options{Addr: b.addr, ClientName: "dsbench"})
	defer rdb.Close()

	var mu sync.Mutex
	got := map[string]time.Duration{} // queue -> lateness of its probe message
	producers := make([]*delay.Queue, n)
	consumers := make([]*group.Consumer, n)
	for i := range n {
		name := "q" + strconv.Itoa(i)
		q, err := delay.New(rdb, name)
		if err != nil {
			return nil, err
		}
		producers[i] = q
		c, err := group.New(rdb, name, benchGroup, func(_ context.Context, m *group.Message) error {
			mu.Lock()
			got[name] = time.Since(m.Due)
			mu.Unlock()
			return nil
		})
		if err != nil {
			return nil, err
		}
		consumers[i] = c
	}
	// One message per queue far ahead: every promotion engine sleeps to
	// the max idle, as an idle production queue's would.
	for _, q := range producers {
		if _, err := q.Schedule(ctx, delay.Message{Payload: []byte("later")}, delay.After(time.Hour)); err != nil {
			return nil, err
		}
	}
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for _, c := range consumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.Run(runCtx); err != nil {
				errs <- err
			}
		}()
	}
	defer func() { cancel(); wg.Wait() }()
	time.Sleep(3 * time.Second) // every consumer started and settled
	logf("queues: %d consumers running; measuring idle for %s", n, b.cfg.idle)

	if err := b.admin.ConfigResetStat(ctx).Err(); err != nil {
		return nil, err
	}
	s0, err := takeSnap(ctx, b.admin)
	if err != nil {
		return nil, err
	}
	p0 := rdb.PoolStats()
	t0 := time.Now()
	time.Sleep(b.cfg.idle)
	el := time.Since(t0).Seconds()
	s1, err := takeSnap(ctx, b.admin)
	if err != nil {
		return nil, err
	}
	d := s0.delta(s1)
	conns, err := clientConns(ctx, b.admin)
	if err != nil {
		return nil, err
	}
	v := map[string]float64{
		"cmds_per_s":           float64(d.calls) / el,
		"cmds_per_s_per_queue": float64(d.calls) / el / float64(n),
		"redis_cpu_per_s":      d.cpu / el,
		"conns":                float64(conns),
	}
	b.noteOnce("queues", sysName, run, fmt.Sprintf("%d idle queues: %s", n, d.top(8, el, "per s")))

	logf("queues: idle %.1f cmds/s; scheduling one message due on every queue", v["cmds_per_s"])
	// Then one message due now on every queue: each must be delivered
	// promptly, none held up by a pool its neighbours exhaust.
	// The calls go out concurrently (one request handler per queue, say),
	// each bounded: a starved pool shows as failed calls, not a hang.
	due := time.Now().Add(500 * time.Millisecond)
	var failed atomic.Int64
	var sched sync.WaitGroup
	for _, q := range producers {
		sched.Add(1)
		go func() {
			defer sched.Done()
			cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
			defer ccancel()
			if _, err := q.Schedule(cctx, delay.Message{Payload: []byte("now")}, delay.At(due)); err != nil {
				failed.Add(1)
			}
		}()
	}
	sched.Wait()
	v["sched_failed"] = float64(failed.Load())
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		k := len(got)
		mu.Unlock()
		if k == n || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	p1 := rdb.PoolStats()
	logf("queues: %d of %d delivered; stopping the consumers", len(got), n)
	mu.Lock()
	lat := make([]float64, 0, len(got))
	for _, l := range got {
		lat = append(lat, l.Seconds())
	}
	mu.Unlock()
	slices.Sort(lat)
	v["delivered"] = float64(len(lat))
	v["lost"] = float64(n - len(lat))
	if len(lat) > 0 {
		v["lat_p50"], v["lat_max"] = median(lat), lat[len(lat)-1]
	}
	v["pool_timeouts"] = float64(p1.Timeouts - p0.Timeouts)
	v["pool_conns"] = float64(p1.TotalConns)
	select {
	case err := <-errs:
		return nil, fmt.Errorf("a consumer stopped: %w", err)
	default:
	}
	return v, nil
}

// clientConns returns the number of clients connected to the server,
// the bench's own admin connection left out.
func clientConns(ctx context.Context, admin *redis.Client) (int, error) {
	info, err := admin.Info(ctx, "clients").Result()
	if err != nil {
		return 0, err
	}
	k, err := strconv.Atoi(infoField(info, "connected_clients"))
	if err != nil {
		return 0, fmt.Errorf("connected_clients: %w", err)
	}
	return k - 1, nil
}
