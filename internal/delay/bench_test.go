package delay_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream/internal/delay"
	"github.com/delaystream/delaystream/internal/redistest"
)

// redisCPU returns the server's used_cpu_sys + used_cpu_user, in seconds.
func redisCPU(tb testing.TB, rdb redis.UniversalClient) float64 {
	tb.Helper()
	info, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		tb.Fatal(err)
	}
	var sum float64
	for _, line := range strings.Split(info, "\r\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				tb.Fatal(err)
			}
			sum += f
		}
	}
	return sum
}

// BenchmarkScheduleBatch schedules calls of 1000 messages (128 B payloads,
// due in an hour) on one goroutine against the shared redis-server. Besides
// ns/op (per call) it reports msg/s and the Redis CPU per message, which is
// what bounds the rate on a small machine. The -8-shards cases spread each
// call over 8 shards of the same server (one pipeline). Run it alone (-run '^$'): tests
// would share the server and its CPU figures.
//
//	go test -run '^$' -bench ScheduleBatch -benchmem ./delay/
func BenchmarkScheduleBatch(b *testing.B) {
	payload := []byte(strings.Repeat("p", 128))
	generated := func(int, int) string { return "" }
	newIDs := func(call, i int) string { return "order:" + strconv.Itoa(call*1000+i) + ":cancel" }
	for _, bc := range []struct {
		name   string
		id     func(call, i int) string // "" = generated
		shards int
	}{
		{"generated-ids", generated, 1},
		{"new-ids", newIDs, 1},
		{"existing-ids", func(_, i int) string { return "order:" + strconv.Itoa(i) + ":cancel" }, 1}, // Kept after the first call
		// Sharded: one call per shard (of ~125 messages) in one pipeline.
		{"generated-ids-8-shards", generated, 8},
		{"new-ids-8-shards", newIDs, 8},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			rdb := redistest.Client(b)
			q, err := delay.New(rdb, "bench", delay.WithPrefix(redistest.Prefix(b)), delay.WithShards(bc.shards))
			if err != nil {
				b.Fatal(err)
			}
			items := make([]delay.Item, 1000)
			b.ReportAllocs()
			cpu0 := redisCPU(b, rdb)
			call := 0
			for b.Loop() {
				for i := range items {
					items[i] = delay.Item{Message: delay.Message{ID: bc.id(call, i), Payload: payload}, When: delay.After(time.Hour)}
				}
				if _, err := q.ScheduleBatch(ctx, items); err != nil {
					b.Fatal(err)
				}
				call++
			}
			msgs := float64(call * len(items))
			b.ReportMetric(msgs/b.Elapsed().Seconds(), "msg/s")
			b.ReportMetric((redisCPU(b, rdb)-cpu0)/msgs*1e6, "redis-µs/msg")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/msgs, "ns/msg")
		})
	}
}

// BenchmarkScheduleConcurrent makes single Schedule calls (generated ids,
// 128 B payloads, due in an hour) from 1 and from 64 goroutines, with group
// commit (the default) and without it (each call alone, as ScheduleBatch
// of one item). It reports msg/s and the Redis CPU per message like
// BenchmarkScheduleBatch. Run it alone (-run '^$'); -count interleaves the
// cases, which an A/B on a noisy machine needs.
//
//	go test -run '^$' -bench ScheduleConcurrent -benchmem -count 6 ./delay/
func BenchmarkScheduleConcurrent(b *testing.B) {
	payload := []byte(strings.Repeat("p", 128))
	for _, goroutines := range []int{1, 64} {
		for _, bc := range []struct {
			name string
			opts []delay.Option
		}{
			{"group-commit", nil},
			{"alone", []delay.Option{delay.WithoutGroupCommit()}},
		} {
			b.Run(fmt.Sprintf("%d-goroutines/%s", goroutines, bc.name), func(b *testing.B) {
				ctx := context.Background()
				rdb := redis.NewClient(redistest.Options(b, redistest.Addr(b)))
				b.Cleanup(func() { _ = rdb.Close() })
				q, err := delay.New(rdb, "bench", append([]delay.Option{delay.WithPrefix(redistest.Prefix(b))}, bc.opts...)...)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := q.Schedule(ctx, delay.Message{Payload: payload}, delay.After(time.Hour)); err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				cpu0 := redisCPU(b, rdb)
				var n atomic.Int64
				b.ResetTimer()
				var wg sync.WaitGroup
				for range goroutines {
					wg.Go(func() {
						for n.Add(1) <= int64(b.N) {
							if _, err := q.Schedule(ctx, delay.Message{Payload: payload}, delay.After(time.Hour)); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				b.StopTimer()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msg/s")
				b.ReportMetric((redisCPU(b, rdb)-cpu0)/float64(b.N)*1e6, "redis-µs/msg")
			})
		}
	}
}
