package engine

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/codec"
	"github.com/delaystream/delaystream/internal/scripts"
	"github.com/delaystream/delaystream/internal/stream"
	"github.com/delaystream/delaystream/internal/wire"
)

// These tests run inside a testing/synctest bubble: time is fake and
// advances only when every goroutine of the bubble is blocked, so timings
// are exact and minutes take no real time. miniredis is served over
// net.Pipe (Miniredis.Dial); its TIME and key expiry follow the fake clock.

// pipeRedis returns an in-bubble miniredis and a client of it.
func pipeRedis(t *testing.T) (*miniredis.Miniredis, *redis.Client) {
	mr := miniredis.NewMiniRedis()
	mr.ClockTTL(true)
	t.Cleanup(mr.Close) // after the clients' cleanups
	return mr, pipeClient(t, mr)
}

// pipeClient returns a client of the in-bubble miniredis mr, closed when
// t ends.
func pipeClient(t *testing.T, mr *miniredis.Miniredis) *redis.Client {
	rdb := redis.NewClient(&redis.Options{
		// An IP address and no maintenance notifications: no DNS in a bubble.
		Addr:                     "127.0.0.1:6379",
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		Dialer:                   func(context.Context, string, string) (net.Conn, error) { return mr.Dial() },
	})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// probeLog records, per key, when the client probed a delayed set's head
// (ZRANGE), and counts promote calls and registry beats.
type probeLog struct {
	mu      sync.Mutex
	probes  map[string][]time.Time
	promote atomic.Int64
	beats   atomic.Int64
}

func newProbeLog() *probeLog { return &probeLog{probes: map[string][]time.Time{}} }

func (h *probeLog) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *probeLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		switch cmd.Name() {
		case "zrange":
			h.mu.Lock()
			key := args[1].(string)
			h.probes[key] = append(h.probes[key], time.Now())
			h.mu.Unlock()
		case "evalsha":
			switch args[1] {
			case scripts.Promote.Hash():
				h.promote.Add(1)
			case scripts.Movers.Hash():
				h.beats.Add(1)
			}
		}
		return next(ctx, cmd)
	}
}
func (h *probeLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// stats returns the number of probes, and the longest time any of the
// delayed sets went without one after since.
func (h *probeLog) stats(keys []string, since, until time.Time) (total int, longest time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, k := range keys {
		last := since
		for _, at := range h.probes[k] {
			total++
			longest = max(longest, at.Sub(last))
			last = at
		}
		longest = max(longest, until.Sub(last))
	}
	return total, longest
}

// startEngine runs e until the test's cleanup (inside the bubble).
func startEngine(t *testing.T, e *Engine) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			require.NoError(t, <-done)
		})
	}
	t.Cleanup(stop)
	return stop
}

// The idle lanes of an engine share one probe per max idle: with 16 idle
// shards each is probed every 16 s, and the engine probes once a second;
// with 128, the per-lane cap of 30 s wins, and the engine probes 128 / 30
// times a second. No promote call is made while idle.
func TestFakeClockShardsIdleProbes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		shards  int
		perLane time.Duration // the probe period of each lane
		rate    float64       // probes per second of the engine
	}{
		{shards: 16, perLane: 16 * time.Second, rate: 1},
		{shards: 128, perLane: 30 * time.Second, rate: 128.0 / 30},
	} {
		t.Run(fmt.Sprintf("shards=%d", tc.shards), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				_, rdb := pipeRedis(t)
				log := newProbeLog()
				rdb.AddHook(log)
				e, err := New(rdb, "q", WithShards(tc.shards))
				require.NoError(t, err)
				startEngine(t, e)
				time.Sleep(time.Second) // registered, every lane checked: idle now
				synctest.Wait()
				require.Len(t, e.Owned(), tc.shards, "the only mover owns every shard")
				// A call per lane when owned, and one when its wake channel's
				// subscription is confirmed after that.
				calls := log.promote.Load()
				assert.GreaterOrEqual(t, calls, int64(tc.shards))
				assert.LessOrEqual(t, calls, int64(2*tc.shards))
				beats := log.beats.Load()
				idleFrom := time.Now()

				const window = 2 * time.Minute
				time.Sleep(window)
				synctest.Wait()
				var keys []string
				for _, l := range e.lanes {
					keys = append(keys, l.keys.Delayed)
				}
				total, longest := log.stats(keys, idleFrom, time.Now())
				want := window.Seconds() * tc.rate
				assert.InDelta(t, want, float64(total), want*0.05+2, "probes in %s", window)
				assert.LessOrEqual(t, longest, tc.perLane+time.Second, "no lane waits longer than its period")
				assert.Equal(t, calls, log.promote.Load(), "no promote call while idle")
				beatsPerSec := float64(log.beats.Load()-beats) / window.Seconds()
				assert.InDelta(t, 3/DefaultLeaseTTL.Seconds(), beatsPerSec, 0.05, "a beat every third of the lease TTL")
			})
		})
	}
}

// A message scheduled into one of 16 idle shards without its wake-up (as
// if the pub/sub connection were down) is found by that shard's next probe,
// within 16 s, and promoted exactly when due.
func TestFakeClockShardsLostWakeUp(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		_, rdb := pipeRedis(t)
		layout, err := stream.NewLayout(stream.DefaultPrefix, "q", 16)
		require.NoError(t, err)
		e, err := New(rdb, "q", WithShards(16))
		require.NoError(t, err)
		startEngine(t, e)
		time.Sleep(30 * time.Second) // idle, the probe turns going
		synctest.Wait()

		lane := layout.Shard(5).Main()
		env := wire.MarshalEnvelope(&codec.Envelope{Payload: []byte("p"), Attempt: 1, Created: time.Now()})
		due := time.Now().Add(20 * time.Second)
		require.NoError(t, rdb.ZAdd(ctx, lane.Delayed, redis.Z{Member: "lost", Score: float64(due.UnixMilli())}).Err())
		require.NoError(t, rdb.HSet(ctx, lane.Envelopes, "lost", env).Err())
		// And one due at once in another shard: found within a lane period.
		other := layout.Shard(11).Main()
		written := time.Now()
		require.NoError(t, rdb.ZAdd(ctx, other.Delayed, redis.Z{Member: "now", Score: float64(written.UnixMilli())}).Err())
		require.NoError(t, rdb.HSet(ctx, other.Envelopes, "now", env).Err())

		time.Sleep(time.Until(due) - time.Millisecond)
		synctest.Wait()
		n, err := rdb.XLen(ctx, lane.Stream).Result()
		require.NoError(t, err)
		assert.Zero(t, n, "promoted early")
		time.Sleep(time.Millisecond)
		synctest.Wait()
		n, err = rdb.XLen(ctx, lane.Stream).Result()
		require.NoError(t, err)
		assert.Equal(t, int64(1), n, "promoted when due, found by a probe")

		xs, err := rdb.XRange(ctx, other.Stream, "-", "+").Result()
		require.NoError(t, err)
		require.Len(t, xs, 1)
		late := stream.EntryTime(xs[0].ID).Sub(written)
		assert.LessOrEqual(t, late, 16*time.Second+time.Second, "a lost wake-up costs at most a lane's probe period")
		t.Logf("a due entry without wake-up was promoted %s late", late)
	})
}

// While its beats fail (here the registry is not a ZSET), a mover keeps
// promoting the shards of its last view, says so at a bounded rate and
// reports the failures; once the key is fixed it beats again.
func TestFakeClockShardsBeatsFail(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		_, rdb := pipeRedis(t)
		layout, err := stream.NewLayout(stream.DefaultPrefix, "q", 4)
		require.NoError(t, err)
		logs := &syncBuffer{}
		var mu sync.Mutex
		var owned [][]int
		var failures, stuck atomic.Int64
		e, err := New(rdb, "q", WithShards(4), WithLogger(slog.New(slog.NewTextHandler(logs, nil))), WithHooks(Hooks{
			OnOwnership: func(o []int) {
				mu.Lock()
				owned = append(owned, o)
				mu.Unlock()
			},
			OnError: func(lane string, err error, isStuck bool) {
				assert.Equal(t, layout.Movers(), lane)
				failures.Add(1)
				if isStuck {
					stuck.Add(1)
					assert.ErrorIs(t, err, stream.ErrWrongType)
				}
			},
		}))
		require.NoError(t, err)
		startEngine(t, e)
		time.Sleep(time.Second)
		synctest.Wait()
		require.Equal(t, []int{0, 1, 2, 3}, e.Owned())

		require.NoError(t, rdb.Del(ctx, layout.Movers()).Err())
		require.NoError(t, rdb.Set(ctx, layout.Movers(), "not a zset", 0).Err())
		broken := time.Now()
		time.Sleep(DefaultLeaseTTL - DefaultLeaseTTL/3 - 10*time.Millisecond)
		synctest.Wait()
		assert.Equal(t, []int{0, 1, 2, 3}, e.Owned(), "the view holds for a lease TTL after the last beat")
		time.Sleep(DefaultLeaseTTL)
		synctest.Wait()
		assert.Equal(t, []int{0, 1, 2, 3}, e.Owned(), "and is kept after that while beats fail")

		// An entry due meanwhile is promoted by the kept view.
		lane := layout.Shard(2).Main()
		env := wire.MarshalEnvelope(&codec.Envelope{Payload: []byte("p"), Attempt: 1, Created: time.Now()})
		require.NoError(t, rdb.ZAdd(ctx, lane.Delayed, redis.Z{Member: "x", Score: float64(time.Now().UnixMilli())}).Err())
		require.NoError(t, rdb.HSet(ctx, lane.Envelopes, "x", env).Err())
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		n, err := rdb.XLen(ctx, lane.Stream).Result()
		require.NoError(t, err)
		assert.Equal(t, int64(1), n, "promoted while the registry is broken")
		out := logs.String()
		lines := strings.Count(out, `msg="mover registry stuck`)
		assert.GreaterOrEqual(t, lines, 10, out)
		assert.LessOrEqual(t, lines, 12, "at once, then once a minute")
		assert.Equal(t, 1, strings.Count(out, `msg="mover registration not renewed`), out)
		assert.Equal(t, failures.Load(), stuck.Load())
		beats := failures.Load()
		perSec := float64(beats) / time.Since(broken).Seconds()
		assert.InDelta(t, 3/DefaultLeaseTTL.Seconds(), perSec, 0.1, "failing beats retry at the beat period")

		require.NoError(t, rdb.Del(ctx, layout.Movers()).Err())
		time.Sleep(time.Second)
		synctest.Wait()
		assert.Equal(t, []int{0, 1, 2, 3}, e.Owned(), "recovered")
		n, err = rdb.XLen(ctx, lane.Stream).Result()
		require.NoError(t, err)
		assert.Equal(t, int64(1), n, "promoted once")
		assert.Contains(t, logs.String(), `msg="mover registry beat recovered"`)
		mu.Lock()
		assert.Equal(t, [][]int{{0, 1, 2, 3}}, owned, "ownership never changed")
		mu.Unlock()
		assert.True(t, slices.Equal([]int{0, 1, 2, 3}, e.Owned()))
	})
}

// With an idle probe interval of 30 s (a consumer's movers), an idle lane
// is probed once per 30 s, not once per max idle, and makes no promote
// call; an entry whose wake-up was lost is still found by the next probe.
func TestFakeClockIdleProbeInterval(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		_, rdb := pipeRedis(t)
		log := newProbeLog()
		rdb.AddHook(log)
		e, err := New(rdb, "q", WithIdleProbe(30*time.Second))
		require.NoError(t, err)
		startEngine(t, e)
		time.Sleep(time.Second) // subscribed, lane checked: idle now
		synctest.Wait()
		calls := log.promote.Load()
		idleFrom := time.Now()
		const window = 5 * time.Minute
		time.Sleep(window)
		synctest.Wait()
		ln := e.lanes[0].keys
		total, longest := log.stats([]string{ln.Delayed}, idleFrom, time.Now())
		assert.InDelta(t, 10, total, 1, "one probe per 30 s in %s (not one per second)", window)
		assert.LessOrEqual(t, longest, 30*time.Second+time.Second)
		assert.Equal(t, calls, log.promote.Load(), "no promote call while idle")

		// An entry due at once, its wake-up lost: found by the next probe.
		env := wire.MarshalEnvelope(&codec.Envelope{Payload: []byte("p"), Attempt: 1, Created: time.Now()})
		written := time.Now()
		require.NoError(t, rdb.ZAdd(ctx, ln.Delayed, redis.Z{Member: "lost", Score: float64(written.UnixMilli())}).Err())
		require.NoError(t, rdb.HSet(ctx, ln.Envelopes, "lost", env).Err())
		time.Sleep(31 * time.Second)
		synctest.Wait()
		xs, err := rdb.XRange(ctx, ln.Stream, "-", "+").Result()
		require.NoError(t, err)
		require.Len(t, xs, 1, "found by a probe")
		assert.LessOrEqual(t, stream.EntryTime(xs[0].ID).Sub(written), 30*time.Second+time.Second)
	})
}

// Whatever its options, an engine looks at the head of every lane it owns
// at least every maxLookGap: the bound that lets a schedule call spare the
// wake-up of a message due beyond scripts.WakeHorizon (wake.lua). Here
// with the max idle and the idle probe interval at their longest, for one
// idle lane and for 128.
func TestFakeClockLookGapAtLongestOptions(t *testing.T) {
	t.Parallel()
	require.LessOrEqual(t, maxLookGap+20*time.Second, scripts.WakeHorizon, "the wake horizon leaves a margin over the look bound")
	for _, tc := range []struct {
		name string
		opts []Option
	}{
		{"max idle", []Option{WithMaxIdle(maxInterval), WithLeaseTTL(2 * maxInterval)}},
		{"idle probe", []Option{WithIdleProbe(maxInterval)}},
		{"both", []Option{WithMaxIdle(maxInterval), WithIdleProbe(maxInterval), WithLeaseTTL(2 * maxInterval)}},
	} {
		for _, shards := range []int{1, 128} {
			t.Run(fmt.Sprintf("%s/shards=%d", tc.name, shards), func(t *testing.T) {
				t.Parallel()
				synctest.Test(t, func(t *testing.T) {
					_, rdb := pipeRedis(t)
					log := newProbeLog()
					rdb.AddHook(log)
					e, err := New(rdb, "q", append([]Option{WithShards(shards)}, tc.opts...)...)
					require.NoError(t, err)
					startEngine(t, e)
					time.Sleep(time.Second) // every lane checked: idle now
					synctest.Wait()
					require.Len(t, e.Owned(), shards)
					idleFrom := time.Now()
					time.Sleep(5 * time.Minute)
					synctest.Wait()
					var keys []string
					for _, l := range e.lanes {
						keys = append(keys, l.keys.Delayed)
					}
					total, longest := log.stats(keys, idleFrom, time.Now())
					assert.Positive(t, total)
					t.Logf("%d looks, longest gap %s", total, longest)
					assert.LessOrEqual(t, longest, maxLookGap+time.Second, "no lane goes longer than the look bound without a look")
				})
			})
		}
	}
}
