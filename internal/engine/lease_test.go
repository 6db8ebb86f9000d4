package engine

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/internal/delay"
	"github.com/delaystream/delaystream/internal/scripts"
)

// leaseLog reads a lane's lease time to live (with a client of its own)
// just before and just after every promote call sent through the client
// it hooks. In a synctest bubble no time passes during a call, so the
// lease was set by a call exactly when its TTL is higher after the call
// than before it; and the TTL just before each call is the lowest it
// fell to since the previous one.
type leaseLog struct {
	admin *redis.Client
	key   string
	until time.Time // TTLs before calls made after until are not kept

	mu     sync.Mutex
	calls  int
	sets   int
	set    bool          // a call has set the lease
	lowest time.Duration // lowest TTL before a call, once set
}

func (h *leaseLog) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *leaseLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() != "evalsha" || cmd.Args()[1] != scripts.Promote.Hash() {
			return next(ctx, cmd)
		}
		before := h.admin.PTTL(ctx, h.key).Val() // -2 (ns) when there is no lease
		err := next(ctx, cmd)
		after := h.admin.PTTL(ctx, h.key).Val()
		h.mu.Lock()
		defer h.mu.Unlock()
		h.calls++
		if h.set && !time.Now().After(h.until) {
			h.lowest = min(h.lowest, before)
		}
		if after > before {
			h.sets++
			h.set = true
		}
		return err
	}
}
func (h *leaseLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// A busy lane sets its lease a few times per lease TTL, not at every
// promote call, and its lease never comes near lapsing while it promotes:
// 150 messages due 10 ms apart (1.5 s of calls, a call for each) cost
// about one SET per third of the TTL, and the lease's time to live,
// read before every call, stays above a third of the TTL.
func TestFakeClockBusyLaneRenewsItsLeaseAFewTimesPerTTL(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		mr, rdb := pipeRedis(t)
		admin := pipeClient(t, mr)
		require.NoError(t, scripts.Promote.Load(ctx, admin).Err()) // every call an EVALSHA

		q, err := delay.New(admin, "q")
		require.NoError(t, err)
		m, err := New(rdb, "q")
		require.NoError(t, err)
		const n = 150
		base := time.Now().Add(300 * time.Millisecond)
		last := base.Add((n - 1) * 10 * time.Millisecond)
		items := make([]delay.Item, n)
		for i := range items {
			items[i] = delay.Item{Message: delay.Message{Payload: []byte("x")}, When: delay.At(base.Add(time.Duration(i) * 10 * time.Millisecond))}
		}
		_, err = q.ScheduleBatch(ctx, items)
		require.NoError(t, err)
		log := &leaseLog{admin: admin, key: m.lanes[0].keys.Lease, until: last, lowest: time.Hour}
		rdb.AddHook(log)

		startEngine(t, m)
		time.Sleep(time.Until(last) + time.Millisecond)
		synctest.Wait()
		require.Equal(t, uint64(n), m.Counters().Promoted)

		log.mu.Lock()
		defer log.mu.Unlock()
		t.Logf("%d promote (and probe) calls, %d SETs of the lease; lowest lease TTL before a call %s", log.calls, log.sets, log.lowest)
		assert.GreaterOrEqual(t, log.calls, n, "a call for each message")
		assert.GreaterOrEqual(t, log.sets, 3, "1.5 s of work: renewed about every TTL/3 (417 ms)")
		assert.LessOrEqual(t, log.sets, 5, "1.5 s of work: renewed about every TTL/3 (417 ms), not at every call")
		assert.Greater(t, log.lowest, DefaultLeaseTTL/3, "renewed well before it could lapse")
	})
}
