package engine

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/internal/delay"
	"github.com/delaystream/delaystream/internal/margin"
	"github.com/delaystream/delaystream/internal/redistest"
	"github.com/delaystream/delaystream/internal/scripts"
	"github.com/delaystream/delaystream/internal/stream"
	"github.com/delaystream/delaystream/internal/wire"
)

func TestWithPrecisionOption(t *testing.T) {
	t.Parallel()
	for _, d := range []time.Duration{0, time.Millisecond, 10 * time.Millisecond, MaxPrecision} {
		_, err := New(offline(t), "q", WithPrecision(d))
		assert.NoError(t, err, "precision %s", d)
	}
	for _, d := range []time.Duration{-time.Millisecond, 1500 * time.Microsecond, MaxPrecision + time.Millisecond} {
		_, err := New(offline(t), "q", WithPrecision(d))
		assert.True(t, errors.Is(err, ErrInvalidOption), "precision %s: %v", d, err)
	}
}

// The lane's sleep target is the end of the next due time's bucket: never
// before the due time, less than a bucket after it, on a multiple of the
// precision; at precision 0 it is the due time itself.
func TestLaneWaitPrecision(t *testing.T) {
	t.Parallel()
	const nowMs = 1_700_000_000_007
	const nowUs = nowMs * 1000
	for _, p := range []time.Duration{0, time.Millisecond, 10 * time.Millisecond, 100 * time.Millisecond, MaxPrecision} {
		t.Run(p.String(), func(t *testing.T) {
			t.Parallel()
			m, err := New(offline(t), "q", WithPrecision(p))
			require.NoError(t, err)
			l := m.lanes[0]
			pm := p.Milliseconds()
			for _, ahead := range []int64{1, 2, 3, 9, 10, 11, 93, 99, 100, 101, 250, 999, 1000, 1001} {
				due := nowMs + ahead
				d, until := l.wait(result{next: due, nowUs: nowUs, leaseTTL: -1})
				require.GreaterOrEqual(t, until, due, "the target is never before the due time (due +%d ms)", ahead)
				require.Equal(t, until, l.bucket(due))
				if pm <= 1 {
					require.Equal(t, due, until, "precision %s: the due time itself", p)
				} else {
					require.Less(t, until-due, pm, "at most a bucket late (due +%d ms)", ahead)
					require.Zero(t, until%pm, "buckets are aligned on the epoch (due +%d ms)", ahead)
				}
				require.Equal(t, min(DefaultMaxIdle, time.Duration(until-nowMs)*time.Millisecond), d)
			}
		})
	}

	m, err := New(offline(t), "q", WithPrecision(100*time.Millisecond))
	require.NoError(t, err)
	l := m.lanes[0]
	assert.Equal(t, int64(1_700_000_000_100), l.bucket(1_700_000_000_001))
	assert.Equal(t, int64(1_700_000_000_100), l.bucket(1_700_000_000_100), "a due time on a boundary waits for nothing")
	assert.Equal(t, int64(1_700_000_000_200), l.bucket(1_700_000_000_101))
	assert.Equal(t, int64(noDue), l.bucket(noDue))
	assert.Equal(t, int64(0), l.bucket(0), "a released lease stays 0")
}

// A wake-up for a due time in the bucket the lane sleeps for wakes
// nothing; one for an earlier bucket wakes it.
func TestLaneNotifyPrecision(t *testing.T) {
	t.Parallel()
	m, err := New(offline(t), "q", WithPrecision(100*time.Millisecond))
	require.NoError(t, err)
	for _, tt := range []struct {
		name string
		due  int64
		wake bool
	}{
		{"same bucket, earlier", 1_700_000_000_101, false},
		{"same bucket, its end", 1_700_000_000_200, false},
		{"later bucket", 1_700_000_000_201, false},
		{"earlier bucket", 1_700_000_000_100, true},
		{"resubscribed", resubscribed, true},
		{"lease released", 0, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := m.newLane(stream.Lane{})
			l.wake = make(chan int64, 1)
			l.until.Store(1_700_000_000_200) // asleep for the bucket (..100, ..200]
			l.notify(tt.due)
			assert.Equal(t, tt.wake, len(l.wake) == 1)
		})
	}
}

// promoteCount counts a client's promote script calls.
type promoteCount struct{ n atomic.Int64 }

func (h *promoteCount) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *promoteCount) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "evalsha" && cmd.Args()[1] == scripts.Promote.Hash() {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (h *promoteCount) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// At every precision, every message is appended to the stream (the Redis
// clock: the entry id's ms) at or after its due time, and the lane calls
// the promote script about once per bucket of due times: a target before
// the due time would promote nothing and call again at once, until due.
func TestPrecisionNeverEarly(t *testing.T) {
	t.Parallel()
	for _, p := range []time.Duration{0, 10 * time.Millisecond, 100 * time.Millisecond} {
		t.Run(p.String(), func(t *testing.T) {
			t.Parallel()
			precisionNeverEarly(t, p)
		})
	}
}

func precisionNeverEarly(t *testing.T, p time.Duration) {
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	q, err := delay.New(rdb, "q", delay.WithPrefix(prefix))
	require.NoError(t, err)
	lane := q.Keys().Main()

	// Due times spread over 1.2 s from 400 ms ahead (by the Redis clock),
	// on odd milliseconds so that most fall inside buckets, not on their
	// ends.
	now, err := rdb.Time(ctx).Result()
	require.NoError(t, err)
	start := now.Add(400 * time.Millisecond).Truncate(time.Millisecond)
	const n = 200
	var items []delay.Item
	for i := range n {
		due := start.Add(time.Duration(mrand.IntN(600))*2*time.Millisecond + time.Millisecond)
		items = append(items, delay.Item{Message: delay.Message{ID: fmt.Sprint("m", i)}, When: delay.At(due)})
	}
	_, err = q.ScheduleBatch(ctx, items)
	require.NoError(t, err)

	hook := &promoteHook{}
	count := &promoteCount{}
	erdb := redis.NewClient(redistest.Options(t, redistest.Addr(t)))
	t.Cleanup(func() { _ = erdb.Close() })
	erdb.AddHook(count)
	e, err := New(erdb, "q", WithPrefix(prefix), WithPrecision(p), WithHooks(hook.hooks()))
	require.NoError(t, err)
	runEngine(t, e)
	require.Eventually(t, func() bool {
		n, err := rdb.XLen(ctx, lane.Stream).Result()
		return err == nil && n == int64(len(items))
	}, 15*time.Second, 10*time.Millisecond)

	msgs, err := rdb.XRange(ctx, lane.Stream, "-", "+").Result()
	require.NoError(t, err)
	pm := p.Milliseconds()
	buckets := map[int64]bool{}
	var late time.Duration
	for _, x := range msgs {
		en, err := wire.Decode(lane.Stream, x.ID, x.Values)
		require.NoError(t, err)
		due, appended := en.Envelope.Due.UnixMilli(), en.Appended().UnixMilli()
		require.GreaterOrEqual(t, appended, due, "%s: appended before its due time", en.Envelope.ID)
		end := due
		if pm > 0 {
			end = (due + pm - 1) / pm * pm
		}
		buckets[end] = true
		late = max(late, time.Duration(appended-due)*time.Millisecond)
	}
	// A missed target shows as the max idle (1 s) or more; a loaded
	// machine adds tens of ms.
	margin.Less(t, "latest promotion", late, p+900*time.Millisecond, "the latest promotion")
	// Calls that moved entries: one per bucket on time; a lane woken late
	// (a loaded machine) promotes what is due by then, part of the next
	// bucket with it, whose rest takes one more call. Not a bound, then:
	// what the lane must not do, call before the due time and again at
	// once, shows in the calls in all. Besides one call per bucket: the
	// first, and a few more for wake-ups while scheduling and idle checks.
	moved := hook.get()
	calls := count.n.Load()
	margin.LessOrEqual(t, "promote calls", calls, int64(len(buckets)+10), "promote calls")
	t.Logf("precision %s: %d messages, %d buckets, %d promote calls (%d moved), latest %s after its due time", p, n, len(buckets), calls, len(moved), late)
}
