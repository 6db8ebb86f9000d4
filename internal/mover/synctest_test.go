package mover_test

import (
	"context"
	"log/slog"
	"net"
	"strconv"
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
	"github.com/delaystream/delaystream/internal/delay"
	"github.com/delaystream/delaystream/internal/mover"
	"github.com/delaystream/delaystream/internal/scripts"
	"github.com/delaystream/delaystream/internal/stream"
	"github.com/delaystream/delaystream/internal/wire"
)

// These tests run inside a testing/synctest bubble: time is fake and
// advances only when every goroutine of the bubble is blocked, so timings
// are exact and the tests take no real time. miniredis is served over
// net.Pipe (Miniredis.Dial), because a real socket would not count as
// blocked; its TIME and, with ClockTTL, its key expiry follow the fake clock.

// pipeRedis returns an in-bubble miniredis and a client of it.
func pipeRedis(t *testing.T) (*miniredis.Miniredis, *redis.Client) {
	mr := miniredis.NewMiniRedis()
	mr.ClockTTL(true) // the lease's PX expires with the fake clock
	rdb := redis.NewClient(&redis.Options{
		// An IP address, and no maintenance notifications: go-redis would
		// otherwise resolve a host name, and DNS cannot run in a bubble.
		Addr:                     "127.0.0.1:6379",
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		Dialer:                   func(context.Context, string, string) (net.Conn, error) { return mr.Dial() },
	})
	t.Cleanup(func() {
		_ = rdb.Close()
		mr.Close()
	})
	return mr, rdb
}

// evalCounter counts commands other than connection handshakes, and
// script calls (EVALSHA), promote calls among them and head probes (ZRANGE).
type evalCounter struct{ cmds, evals, promotes, probes atomic.Int64 }

func (h *evalCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *evalCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() != "hello" { // connection handshakes (commands and pub/sub)
			h.cmds.Add(1)
		}
		switch cmd.Name() {
		case "evalsha":
			h.evals.Add(1)
			if a := cmd.Args(); len(a) > 1 && a[1] == scripts.Promote.Hash() {
				h.promotes.Add(1)
			}
		case "zrange":
			h.probes.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (h *evalCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// startMover runs m until the test's cleanup (inside the bubble).
func startMover(t *testing.T, m *mover.Mover) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		require.NoError(t, <-done)
	}
	t.Cleanup(stop)
	return stop
}

func streamLen(t *testing.T, rdb *redis.Client, key string) int64 {
	t.Helper()
	n, err := rdb.XLen(context.Background(), key).Result()
	require.NoError(t, err)
	return n
}

// promotedAt sleeps (in the bubble) until due and checks that the stream
// at key grows from n-1 entries a millisecond before it to n at it: the
// entry due then was promoted neither early nor late.
func promotedAt(t *testing.T, rdb *redis.Client, key string, due time.Time, n int64) {
	t.Helper()
	time.Sleep(time.Until(due) - time.Millisecond)
	synctest.Wait()
	assert.Equal(t, n-1, streamLen(t, rdb, key), "promoted before its due time")
	time.Sleep(time.Millisecond)
	synctest.Wait()
	assert.Equal(t, n, streamLen(t, rdb, key), "promoted exactly when due")
}

// An entry due in 10 s is promoted exactly at its due time: not a
// millisecond early, not a millisecond late.
func TestFakeClockNeverEarly(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		_, rdb := pipeRedis(t)
		q, err := delay.New(rdb, "q")
		require.NoError(t, err)
		due := time.Now().Add(10 * time.Second)
		_, err = q.Schedule(ctx, delay.Message{ID: "x"}, delay.At(due))
		require.NoError(t, err)
		m, err := mover.New(rdb, "q")
		require.NoError(t, err)
		startMover(t, m)
		key := q.Keys().Main().Stream

		promotedAt(t, rdb, key, due, 1)
		msgs, err := rdb.XRange(ctx, key, "-", "+").Result()
		require.NoError(t, err)
		require.Len(t, msgs, 1)
		e, err := wire.Decode(key, msgs[0].ID, msgs[0].Values)
		require.NoError(t, err)
		assert.Equal(t, due.UnixMilli(), e.Envelope.Due.UnixMilli())
		assert.Equal(t, due.UnixMilli(), e.Appended().UnixMilli(), "appended exactly when due")
	})
}

// With nothing due, a mover makes one command per max idle (1 s): a probe
// of the delayed set's head, not a promote call.
func TestFakeClockIdleCost(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		_, rdb := pipeRedis(t)
		q, err := delay.New(rdb, "q")
		require.NoError(t, err)
		_, err = q.Schedule(ctx, delay.Message{ID: "later"}, delay.After(time.Hour))
		require.NoError(t, err)
		calls := &evalCounter{}
		rdb.AddHook(calls)
		m, err := mover.New(rdb, "q")
		require.NoError(t, err)
		startMover(t, m)

		time.Sleep(time.Minute)
		synctest.Wait()
		// The shard-count check when Run starts (meta.lua), a first call
		// within the 20 ms start stagger, and one more if the subscription
		// was confirmed after that call started (a confirmation before it
		// is answered by it); then one probe per second, and a check of the
		// queue's record every 30 s (one or two in the minute, as the
		// second falls on its last instant).
		evals := calls.evals.Load()
		assert.GreaterOrEqual(t, evals, int64(3), "script calls")
		assert.LessOrEqual(t, evals, int64(5), "script calls")
		probes := calls.probes.Load()
		assert.GreaterOrEqual(t, probes, int64(58))
		assert.LessOrEqual(t, probes, int64(60))
		// Besides them: one EVAL that loads the script. Nothing else.
		assert.Equal(t, probes+evals+1, calls.cmds.Load(), "commands in a minute")
		assert.Zero(t, m.Counters().Promoted)
	})
}

// An entry scheduled while the mover sleeps idle, with its wake-up lost
// (here: no wake channel, as if the pub/sub connection were down), is
// found by the next probe and promoted when due.
func TestFakeClockProbeCatchesLostWakeUp(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		_, rdb := pipeRedis(t)
		q, err := delay.New(rdb, "q")
		require.NoError(t, err)
		m, err := mover.New(rdb, "q")
		require.NoError(t, err)
		startMover(t, m)
		time.Sleep(10 * time.Second)
		synctest.Wait()

		// Write the entry with the schedule script but no wake channel.
		keys := q.Keys().Main()
		env := wire.MarshalEnvelope(&codec.Envelope{Payload: []byte("p"), Attempt: 1, Created: time.Now()})
		due := time.Now().Add(3 * time.Second).UnixMilli()
		require.NoError(t, scripts.Schedule.Run(ctx, rdb, []string{keys.Delayed, keys.Envelopes},
			"", "lost", env, "a"+strconv.FormatInt(due, 10), "k").Err())

		promotedAt(t, rdb, keys.Stream, time.UnixMilli(due), 1) // found by a probe
	})
}

// A mover sleeping with nothing due is woken by the schedule of an entry
// and promotes it exactly when due, long before its next idle check.
func TestFakeClockWakeUp(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		_, rdb := pipeRedis(t)
		q, err := delay.New(rdb, "q")
		require.NoError(t, err)
		m, err := mover.New(rdb, "q", mover.WithMaxIdle(30*time.Second), mover.WithLeaseTTL(time.Minute))
		require.NoError(t, err)
		startMover(t, m)

		time.Sleep(3500 * time.Millisecond) // the mover sleeps until ~30 s
		synctest.Wait()
		res, err := q.Schedule(ctx, delay.Message{ID: "soon"}, delay.After(200*time.Millisecond))
		require.NoError(t, err)
		time.Sleep(time.Until(res.Due))
		synctest.Wait()
		key := q.Keys().Main().Stream
		require.Equal(t, int64(1), streamLen(t, rdb, key))
		msgs, err := rdb.XRange(ctx, key, "-", "+").Result()
		require.NoError(t, err)
		assert.Equal(t, res.Due.UnixMilli(), stream.EntryTime(msgs[0].ID).UnixMilli(), "promoted exactly when due")

		// Rescheduling earlier wakes it too.
		_, err = q.Schedule(ctx, delay.Message{ID: "late"}, delay.After(time.Hour))
		require.NoError(t, err)
		synctest.Wait()
		due, err := q.Reschedule(ctx, "late", delay.After(time.Second))
		require.NoError(t, err)
		time.Sleep(time.Until(due))
		synctest.Wait()
		assert.Equal(t, int64(2), streamLen(t, rdb, key))
	})
}

// Many due entries are promoted in back-to-back full batches, without
// waiting between them.
func TestFakeClockBurst(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		_, rdb := pipeRedis(t)
		q, err := delay.New(rdb, "q")
		require.NoError(t, err)
		items := make([]delay.Item, 1000)
		for i := range items {
			items[i] = delay.Item{When: delay.After(time.Second)}
		}
		_, err = q.ScheduleBatch(ctx, items)
		require.NoError(t, err)
		calls := &evalCounter{}
		rdb.AddHook(calls)
		m, err := mover.New(rdb, "q", mover.WithBatchSize(100))
		require.NoError(t, err)
		startMover(t, m)

		time.Sleep(time.Second)
		synctest.Wait()
		assert.Equal(t, int64(1000), streamLen(t, rdb, q.Keys().Main().Stream))
		c := m.Counters()
		assert.Equal(t, uint64(1000), c.Promoted)
		assert.Equal(t, uint64(10), c.Batches, "ten full batches of 100")
		// The shard-count check, the first call (nothing due yet), one when
		// the subscription is confirmed unless that came before the first
		// call (which answers it), ten full batches, one empty call.
		evals := calls.evals.Load()
		assert.GreaterOrEqual(t, evals, int64(13))
		assert.LessOrEqual(t, evals, int64(14))
	})
}

// Of two movers, while entries keep coming due, one holds the lease; when it
// stops, the other takes over with the next due entry. An idle lane has no
// lease holder.
func TestFakeClockLease(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		_, rdb := pipeRedis(t)
		q, err := delay.New(rdb, "q")
		require.NoError(t, err)
		const n = 600 // one entry due every 200 ms for two minutes
		items := make([]delay.Item, n)
		for i := range items {
			items[i] = delay.Item{When: delay.After(time.Duration(i+1) * 200 * time.Millisecond)}
		}
		_, err = q.ScheduleBatch(ctx, items)
		require.NoError(t, err)
		type event struct {
			name  string
			owner bool
			at    time.Time
		}
		var events []event // appended on the movers' goroutines, read after synctest.Wait
		movers := map[string]*mover.Mover{}
		stops := map[string]func(){}
		for _, name := range []string{"a", "b"} {
			m, err := mover.New(rdb, "q", mover.WithHooks(mover.Hooks{OnLease: func(_ string, owner bool) {
				events = append(events, event{name, owner, time.Now()})
			}}))
			require.NoError(t, err)
			movers[name] = m
		}
		for name, m := range movers {
			stops[name] = startMover(t, m)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		require.Len(t, events, 1, "one owner for a minute: %+v", events)
		require.True(t, events[0].owner)
		owner := events[0].name
		standby := map[string]string{"a": "b", "b": "a"}[owner]

		stopped := time.Now()
		stops[owner]()
		synctest.Wait()
		time.Sleep(200 * time.Millisecond)
		synctest.Wait()
		require.Len(t, events, 2, "%+v", events)
		assert.Equal(t, standby, events[1].name)
		assert.True(t, events[1].owner)
		assert.LessOrEqual(t, events[1].at.Sub(stopped), 200*time.Millisecond, "the release wakes the standby, which takes the lease with the next due entry")

		time.Sleep(time.Minute + 2*time.Second)
		synctest.Wait()
		assert.Equal(t, int64(n), streamLen(t, rdb, q.Keys().Main().Stream))
		leases, err := rdb.Exists(ctx, q.Keys().Main().Lease).Result()
		require.NoError(t, err)
		assert.Zero(t, leases, "an idle lane's lease lapses")
	})
}

// A lease left behind by a crashed mover is taken over when it lapses,
// within the lease TTL.
func TestFakeClockTakeoverAfterCrash(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		_, rdb := pipeRedis(t)
		keys, err := stream.NewKeys(stream.DefaultPrefix, "q", 0, 1)
		require.NoError(t, err)
		q, err := delay.New(rdb, "q")
		require.NoError(t, err)
		_, err = q.Schedule(ctx, delay.Message{ID: "due"}, delay.After(0))
		require.NoError(t, err)
		start := time.Now()
		require.NoError(t, rdb.Set(ctx, keys.Main().Lease, "crashed-mover", mover.DefaultLeaseTTL).Err())
		var ownerAt atomic.Int64
		m, err := mover.New(rdb, "q", mover.WithHooks(mover.Hooks{OnLease: func(_ string, owner bool) {
			if owner {
				ownerAt.Store(int64(time.Since(start)))
			}
		}}))
		require.NoError(t, err)
		startMover(t, m)

		time.Sleep(mover.DefaultLeaseTTL - time.Millisecond)
		synctest.Wait()
		assert.Zero(t, ownerAt.Load(), "took a lease that had not lapsed")
		time.Sleep(50 * time.Millisecond)
		synctest.Wait()
		took := time.Duration(ownerAt.Load())
		assert.GreaterOrEqual(t, took, mover.DefaultLeaseTTL)
		assert.Equal(t, uint64(1), m.Counters().Promoted)
		assert.LessOrEqual(t, took, mover.DefaultLeaseTTL+20*time.Millisecond, "the standby rechecks when the lease lapses")
	})
}

// A lane whose delayed set someone replaced with a string fails every
// promote call until the key is fixed. The mover says so as a stuck lane
// (not as a passing failure), naming the key and the type it expected, at
// a bounded rate: one line at once, then one a minute; it counts every
// failure and reports each to the hook; and it recovers by itself, saying
// so, once the key is fixed.
func TestFakeClockStuckLane(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		_, rdb := pipeRedis(t)
		keys, err := stream.NewKeys(stream.DefaultPrefix, "q", 0, 1)
		require.NoError(t, err)
		lane := keys.Main()
		require.NoError(t, rdb.Set(ctx, lane.Delayed, "not a zset", 0).Err())

		logs := &syncBuffer{}
		var hookCalls, hookStuck atomic.Int64
		var lastErr atomic.Value
		m, err := mover.New(rdb, "q",
			mover.WithLogger(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))),
			mover.WithHooks(mover.Hooks{OnError: func(l string, err error, stuck bool) {
				assert.Equal(t, lane.Stream, l)
				hookCalls.Add(1)
				if stuck {
					hookStuck.Add(1)
				}
				lastErr.Store(err)
			}}))
		require.NoError(t, err)
		startMover(t, m)

		time.Sleep(10*time.Minute + time.Second)
		synctest.Wait()
		out := logs.String()
		stuckLines := strings.Count(out, `msg="lane stuck`)
		assert.GreaterOrEqual(t, stuckLines, 10, out)
		assert.LessOrEqual(t, stuckLines, 12, "one line at once, then one a minute")
		assert.NotContains(t, out, `msg="promote failed"`, "a stuck lane is not reported as a passing failure")
		assert.Contains(t, out, "key "+lane.Delayed+" holds a string, want a zset")

		c := m.Counters()
		assert.GreaterOrEqual(t, c.Errors, uint64(400), "about one call a second (backoff up to the max idle, plus jitter)")
		assert.LessOrEqual(t, c.Errors, uint64(700))
		assert.Equal(t, c.Errors, c.Stuck)
		assert.Equal(t, int64(c.Errors), hookCalls.Load())
		assert.Equal(t, int64(c.Errors), hookStuck.Load())
		var kerr *stream.KeyTypeError
		require.ErrorAs(t, lastErr.Load().(error), &kerr)
		assert.Equal(t, stream.KeyTypeError{Key: lane.Delayed, Want: "zset", Got: "string"}, *kerr)

		// Fixed: the lane recovers by itself and says so once.
		require.NoError(t, rdb.Del(ctx, lane.Delayed).Err())
		q, err := delay.New(rdb, "q")
		require.NoError(t, err)
		_, err = q.Schedule(ctx, delay.Message{ID: "after-fix"}, delay.After(0))
		require.NoError(t, err)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		assert.Equal(t, int64(1), streamLen(t, rdb, lane.Stream))
		assert.Equal(t, 1, strings.Count(logs.String(), `msg="promote recovered"`), logs.String())
		assert.Equal(t, c.Errors, m.Counters().Errors, "no failure after the fix")
	})
}

// A wake-up published while the mover's pub/sub connection is down is lost;
// when the connection comes back, the resubscription makes the mover check
// the lane at once instead of at its next idle probe (30 s away here).
func TestFakeClockResubscribeChecksTheLane(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		mr, rdb := pipeRedis(t)
		// The mover's own client, whose connections the test can drop.
		var mu sync.Mutex
		var conns []net.Conn
		mrdb := redis.NewClient(&redis.Options{
			Addr:                     "127.0.0.1:6379",
			MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
			Dialer: func(context.Context, string, string) (net.Conn, error) {
				c, err := mr.Dial()
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
				return c, err
			},
		})
		t.Cleanup(func() { _ = mrdb.Close() })
		m, err := mover.New(mrdb, "q", mover.WithMaxIdle(30*time.Second), mover.WithLeaseTTL(time.Minute))
		require.NoError(t, err)
		startMover(t, m)
		time.Sleep(time.Second) // subscribed, lane checked, idle now
		synctest.Wait()

		// An entry due now whose wake-up is lost (the schedule script is
		// given no channel, as if the publish happened while disconnected).
		keys, err := stream.NewKeys(stream.DefaultPrefix, "q", 0, 1)
		require.NoError(t, err)
		ln := keys.Main()
		env := wire.MarshalEnvelope(&codec.Envelope{Payload: []byte("p"), Attempt: 1, Created: time.Now()})
		require.NoError(t, scripts.Schedule.Run(ctx, rdb, []string{ln.Delayed, ln.Envelopes},
			"", "lost", env, "r0", "k").Err())
		time.Sleep(10 * time.Second)
		synctest.Wait()
		require.Zero(t, streamLen(t, rdb, ln.Stream), "an idle mover does not see an entry without its wake-up before its next probe")

		// Drop the mover's connections: go-redis reconnects and resubscribes.
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		time.Sleep(time.Second)
		synctest.Wait()
		assert.Equal(t, int64(1), streamLen(t, rdb, ln.Stream), "promoted after the resubscription, not at the next probe (19 s away)")
	})
}

// A message due beyond the wake horizon is scheduled without a wake-up,
// and a mover at its longest max idle, sleeping toward a later head, still
// promotes it exactly when due: its looks come at least once a minute. A
// message due within the horizon is announced (the subscription below
// hears it, so it would have heard the far ones).
func TestFakeClockFarMessageNeedsNoWakeUp(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		_, rdb := pipeRedis(t)
		q, err := delay.New(rdb, "q")
		require.NoError(t, err)
		keys := q.Keys().Main()
		_, err = q.Schedule(ctx, delay.Message{ID: "head"}, delay.After(time.Hour))
		require.NoError(t, err)
		m, err := mover.New(rdb, "q", mover.WithMaxIdle(time.Minute), mover.WithLeaseTTL(2*time.Minute))
		require.NoError(t, err)
		startMover(t, m)
		ps := rdb.Subscribe(ctx, keys.Wake)
		t.Cleanup(func() { _ = ps.Close() })
		_, err = ps.Receive(ctx) // subscription confirmed
		require.NoError(t, err)
		wakes := ps.Channel()
		time.Sleep(30 * time.Second) // idle, between two looks
		synctest.Wait()

		far := scripts.WakeHorizon + time.Millisecond
		gen, err := q.Schedule(ctx, delay.Message{}, delay.After(far))
		require.NoError(t, err)
		own, err := q.Schedule(ctx, delay.Message{ID: "far"}, delay.After(far+time.Second))
		require.NoError(t, err)
		synctest.Wait()
		select {
		case w := <-wakes:
			t.Fatalf("a message due beyond the wake horizon published %q", w.Payload)
		default:
		}

		// Found by a look.
		promotedAt(t, rdb, keys.Stream, gen.Due, 1)
		promotedAt(t, rdb, keys.Stream, own.Due, 2)

		near, err := q.Schedule(ctx, delay.Message{}, delay.After(scripts.WakeHorizon-time.Second))
		require.NoError(t, err)
		synctest.Wait()
		select {
		case w := <-wakes:
			assert.Equal(t, strconv.FormatInt(near.Due.UnixMilli(), 10), w.Payload)
		default:
			t.Fatal("a message due within the wake horizon published nothing")
		}
	})
}

// A wake-up carries the due time of the entry it announces, so a mover
// woken by an entry due later sleeps until then and makes no call before:
// the call at its due time promotes it, exactly when due. Both an idle
// lane (nothing waiting) and one sleeping toward a later head.
func TestFakeClockWakeUpWaitsForItsEntry(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		head    time.Duration // an entry waiting before the wake-up; 0 = none
		maxIdle time.Duration
	}{
		{"idle lane", 0, time.Second},
		{"sleeping toward a later head", 20 * time.Second, time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				_, rdb := pipeRedis(t)
				calls := &evalCounter{}
				rdb.AddHook(calls)
				q, err := delay.New(rdb, "q")
				require.NoError(t, err)
				key := q.Keys().Main().Stream
				var head delay.Result
				if tc.head > 0 {
					head, err = q.Schedule(ctx, delay.Message{ID: "head"}, delay.After(tc.head))
					require.NoError(t, err)
				}
				m, err := mover.New(rdb, "q", mover.WithMaxIdle(tc.maxIdle), mover.WithLeaseTTL(2*time.Minute))
				require.NoError(t, err)
				startMover(t, m)
				time.Sleep(500 * time.Millisecond) // the first call made, the lane asleep
				synctest.Wait()
				before := calls.promotes.Load()
				require.Positive(t, before, "the mover made no promote call at its start")

				res, err := q.Schedule(ctx, delay.Message{ID: "soon"}, delay.After(5*time.Second))
				require.NoError(t, err)
				synctest.Wait()
				assert.Equal(t, before, calls.promotes.Load(), "a promote call answered the wake-up")
				promotedAt(t, rdb, key, res.Due, 1)
				assert.Equal(t, before+1, calls.promotes.Load(), "promote calls between the wake-up and the due time")
				if tc.head > 0 {
					promotedAt(t, rdb, key, head.Due, 2)
				}
			})
		})
	}
}
