package group_test

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/codec"
	"github.com/delaystream/delaystream/internal/group"
	"github.com/delaystream/delaystream/internal/redistest"
	"github.com/delaystream/delaystream/internal/stream"
	"github.com/delaystream/delaystream/internal/wire"
)

// BenchmarkConsumerBurst measures the consumer alone: each iteration fills
// a fresh queue stream with a burst of 128 B messages (untimed), then times
// one Consumer (8 workers, other options default, a handler that does
// nothing) from start until every message is acknowledged. Besides ns/op it
// reports per message: client CPU of this process, Redis CPU, and
// XREADGROUP / XACK calls. Run it alone (-run '^$'), since the Redis
// figures are server-wide:
//
//	go test -run '^$' -bench ConsumerBurst -benchtime 5x ./group/
func BenchmarkConsumerBurst(b *testing.B) {
	const burst = 20000
	rdb := redistest.Client(b)
	ctx := context.Background()
	payload := []byte(strings.Repeat("x", 128))
	var clientCPU, redisCPU time.Duration
	var reads, acks int64
	for i := range b.N {
		b.StopTimer()
		prefix := redistest.Prefix(b) + "." + strconv.Itoa(i)
		keys, err := stream.NewKeys(prefix, "q", 0, 1)
		require.NoError(b, err)
		pipe := rdb.Pipeline()
		now := time.Now()
		for j := range burst {
			env := codec.Envelope{ID: "m" + strconv.Itoa(j), Payload: payload, Attempt: 1, Created: now, Due: now}
			pipe.XAdd(ctx, &redis.XAddArgs{Stream: keys.Main().Stream, Values: wire.Encode(&env)})
			if pipe.Len() == 1000 {
				_, err := pipe.Exec(ctx)
				require.NoError(b, err)
			}
		}
		_, err = pipe.Exec(ctx)
		require.NoError(b, err)

		var handled atomic.Int64
		done := make(chan struct{})
		c, err := group.New(rdb, "q", "g", func(context.Context, *group.Message) error {
			if handled.Add(1) == burst {
				close(done)
			}
			return nil
		}, group.WithPrefix(prefix), group.WithWorkers(8), group.WithLogger(testLogger()))
		require.NoError(b, err)
		runCtx, cancel := context.WithCancel(ctx)
		ran := make(chan error, 1)

		r0, c0, s0 := redisCPUTime(b, rdb), processCPUTime(), commandCalls(b, rdb)
		b.StartTimer()
		go func() { ran <- c.Run(runCtx) }()
		<-done
		require.Eventually(b, func() bool { return c.Counters().Acked == burst }, 10*time.Second, time.Millisecond)
		b.StopTimer()
		clientCPU += processCPUTime() - c0
		redisCPU += redisCPUTime(b, rdb) - r0
		s1 := commandCalls(b, rdb)
		reads += s1["xreadgroup"] - s0["xreadgroup"]
		acks += s1["xack"] - s0["xack"]
		cancel()
		require.NoError(b, <-ran)
		require.NoError(b, rdb.Del(ctx, keys.Main().Stream, keys.Retry("g").Stream).Err())
	}
	msgs := float64(b.N * burst)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(msgs/b.Elapsed().Seconds(), "msg/s")
	b.ReportMetric(float64(clientCPU.Nanoseconds())/1e3/msgs, "client-µs/msg")
	b.ReportMetric(float64(redisCPU.Nanoseconds())/1e3/msgs, "redis-µs/msg")
	b.ReportMetric(float64(reads)/msgs, "xreadgroup/msg")
	b.ReportMetric(float64(acks)/msgs, "xack/msg")
}

func processCPUTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func redisCPUTime(tb testing.TB, rdb *redis.Client) time.Duration {
	tb.Helper()
	info, err := rdb.Info(context.Background(), "cpu").Result()
	require.NoError(tb, err)
	var total float64
	for _, line := range strings.Split(info, "\r\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, err := strconv.ParseFloat(v, 64)
			require.NoError(tb, err)
			total += f
		}
	}
	return time.Duration(total * float64(time.Second))
}

// commandCalls returns INFO commandstats calls by command name.
func commandCalls(tb testing.TB, rdb *redis.Client) map[string]int64 {
	tb.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	require.NoError(tb, err)
	out := map[string]int64{}
	for _, line := range strings.Split(info, "\r\n") {
		name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":calls=")
		if !ok {
			continue
		}
		n, _, _ := strings.Cut(rest, ",")
		v, err := strconv.ParseInt(n, 10, 64)
		require.NoError(tb, err)
		out[name] = v
	}
	return out
}
