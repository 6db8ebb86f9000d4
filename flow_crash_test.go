package delaystream_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/internal/redistest"
	"github.com/delaystream/delaystream/internal/stream"
)

// Crashed work goes first under a saturated flow limit: a consumer dies
// holding entries of a limited group (and, under a cap, every slot),
// while a backlog waits in the stream for two live consumers that keep the
// limit busy. The dead consumer's entries are taken over within the
// reclaim interval of their becoming reclaimable (the visibility timeout
// after the death, or the consumers' start if later), and handled within
// one handler time (under a rate, + the permits reserved ahead) of being
// taken over, each plus a margin for a loaded machine: long before the
// backlog drains, each once. A cap is never exceeded, nothing is left
// recorded to hold fresh reads off, and the consumers count their wait.
func TestLimitCrashedWorkFirst(t *testing.T) {
	t.Parallel()
	const (
		dead    = 4
		handler = 50 * time.Millisecond
		vis     = time.Second
		every   = 200 * time.Millisecond
		margin  = time.Second // for a loaded machine
	)
	tests := []struct {
		name    string
		limit   delaystream.GroupOption
		cap     int
		backlog int           // 5 s of work at the limit
		ahead   time.Duration // the longest a reclaimed entry may wait for permits already reserved
	}{
		{name: "cap", limit: delaystream.WithConcurrencyLimit(dead), cap: dead, backlog: 400}, // dead / handler = 80 per second
		{name: "rate", limit: delaystream.WithRateLimit(40, time.Second, 4), backlog: 200, ahead: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			rdb := redistest.Client(t)
			prefix := redistest.Prefix(t)
			layout, err := stream.NewLayout(prefix, "jobs", 1)
			require.NoError(t, err)
			k := layout.Shard(0)

			// The dead consumer: its entries are pending with it, it holds
			// every slot of a cap until the deadline its last call set, and
			// it died at once.
			q, err := delaystream.New(rdb, "jobs", delaystream.WithPrefix(prefix), delaystream.WithoutPromotion())
			require.NoError(t, err)
			scheduleN(t, q, "dead", dead, 0)
			require.NoError(t, rdb.XGroupCreateMkStream(ctx, k.Main().Stream, "g", "0").Err())
			promoteAll(t, rdb, prefix, k.Main().Stream, dead)
			died, err := rdb.Time(ctx).Result()
			require.NoError(t, err)
			got, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: "dead", Streams: []string{k.Main().Stream, ">"},
				Count: dead, Block: -1}).Result()
			require.NoError(t, err)
			require.Len(t, got[0].Messages, dead)
			if tt.cap > 0 {
				require.NoError(t, rdb.HSet(ctx, k.Flow("g"), "c:dead", fmt.Sprintf("%d %d", tt.cap, died.Add(vis).UnixMicro())).Err())
			}
			scheduleN(t, q, "m", tt.backlog, 0)

			var run running
			h := &handled{}
			var claimMu sync.Mutex
			var claimed time.Time // when a consumer first took the dead consumer's entries over
			hooks := delaystream.Hooks{OnReclaimed: func(_ string, n, _ int) {
				claimMu.Lock()
				defer claimMu.Unlock()
				if n > 0 && claimed.IsZero() {
					claimed = time.Now()
				}
			}}
			var mu sync.Mutex
			again := map[string]time.Time{} // a dead consumer's message -> when it was handled again
			var backlogBefore int           // backlog messages started before the last of them
			work := func(ctx context.Context, d *delaystream.Delivery) error {
				run.enter()
				defer run.leave()
				h.add(d)
				if strings.HasPrefix(d.ID, "dead") {
					mu.Lock()
					if _, ok := again[d.ID]; !ok {
						again[d.ID] = time.Now()
						backlogBefore = h.count("m")
					}
					mu.Unlock()
				}
				select { // the handler's work
				case <-time.After(handler):
				case <-ctx.Done():
				}
				return nil
			}
			opts := []delaystream.GroupOption{delaystream.WithWorkers(8), tt.limit,
				delaystream.WithVisibilityTimeout(vis), delaystream.WithReclaimInterval(every), delaystream.WithHooks(hooks)}
			a := startFlowProc(t, rdb, prefix, work, opts...)
			b := startFlowProc(t, rdb, prefix, work, opts...)
			started := time.Now()

			require.Eventually(t, func() bool { return h.count("dead") >= dead }, 15*time.Second, 10*time.Millisecond,
				"the dead consumer's entries are handled again")
			claimMu.Lock()
			took := claimed
			claimMu.Unlock()
			require.False(t, took.IsZero(), "the entries were taken over (OnReclaimed)")
			reclaimable := died.Add(vis)
			if started.After(reclaimable) {
				reclaimable = started
			}
			t.Logf("taken over %s after the death, %s after they were reclaimable", took.Sub(died).Round(time.Millisecond),
				took.Sub(reclaimable).Round(time.Millisecond))
			assert.LessOrEqual(t, took.Sub(reclaimable), every+margin, "taken over late")
			mu.Lock()
			for id, at := range again {
				t.Logf("%s handled again %s after the death", id, at.Sub(died).Round(time.Millisecond))
				assert.LessOrEqual(t, at.Sub(took), handler+tt.ahead+margin, "%s handled late after it was taken over", id)
			}
			assert.Less(t, backlogBefore, tt.backlog/2, "the dead consumer's entries waited behind the backlog")
			mu.Unlock()
			h.checkOnce(t, "dead", dead)
			// Nothing is left to hold fresh reads off: the backlog goes on.
			require.Eventually(t, func() bool { return h.count("m") >= 4*dead }, 10*time.Second, 10*time.Millisecond,
				"the backlog is handled after the dead consumer's entries")
			assert.Empty(t, reclaimRecords(t, rdb, k.Flow("g")), "no reclaimed entries are recorded as waiting")
			if tt.cap > 0 {
				assert.LessOrEqual(t, run.most.Load(), int64(tt.cap), "never more than the cap at once")
			}
			// The backlog (5 s of work at the limit) makes the consumers wait
			// for permits or slots before it drains, however slow the machine.
			require.Eventually(t, func() bool { return a.g.Counters().LimitWait+b.g.Counters().LimitWait > 0 }, 30*time.Second,
				10*time.Millisecond, "waiting is counted")
		})
	}
}

// Reclaimed entries waiting for a slot are handed back when the group is
// paused, their delivery counts kept, and the record of them goes, so that
// it holds nothing off; after the resume they are taken again and handled
// once the slot frees.
func TestLimitReclaimedHandedBackOnPause(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	layout, err := stream.NewLayout(prefix, "jobs", 1)
	require.NoError(t, err)
	k := layout.Shard(0)

	// A dead consumer holds one entry (and no slot).
	q, err := delaystream.New(rdb, "jobs", delaystream.WithPrefix(prefix), delaystream.WithoutPromotion())
	require.NoError(t, err)
	scheduleN(t, q, "dead", 1, 0)
	require.NoError(t, rdb.XGroupCreateMkStream(ctx, k.Main().Stream, "g", "0").Err())
	promoteAll(t, rdb, prefix, k.Main().Stream, 1)
	require.NoError(t, rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: "dead", Streams: []string{k.Main().Stream, ">"},
		Count: 1, Block: -1}).Err())
	scheduleN(t, q, "busy", 1, 0)

	// The live consumer's only slot goes to busy0, which runs until released.
	h := &handled{}
	release := make(chan struct{})
	var deliveries sync.Map // id -> Deliveries
	p := startFlowProc(t, rdb, prefix, func(ctx context.Context, d *delaystream.Delivery) error {
		h.add(d)
		deliveries.Store(d.ID, d.Deliveries)
		if d.ID == "busy0" {
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return nil
	}, delaystream.WithWorkers(4), delaystream.WithConcurrencyLimit(1), delaystream.WithVisibilityTimeout(time.Second),
		delaystream.WithReclaimInterval(100*time.Millisecond))
	require.Eventually(t, func() bool { return len(reclaimRecords(t, rdb, k.Flow("g"))) == 1 }, 10*time.Second, 10*time.Millisecond,
		"the dead consumer's entry is claimed and waits for the slot")
	assert.Equal(t, 1, h.count("busy"))
	assert.Zero(t, h.count("dead"))

	require.NoError(t, p.g.Pause(ctx))
	require.Eventually(t, func() bool { return len(reclaimRecords(t, rdb, k.Flow("g"))) == 0 }, 10*time.Second, 10*time.Millisecond,
		"paused: the entry is handed back, the record goes")
	assert.Zero(t, h.count("dead"))
	require.NoError(t, p.g.Resume(ctx))
	close(release)
	require.Eventually(t, func() bool { return h.count("dead") == 1 }, 10*time.Second, 10*time.Millisecond,
		"handled after the resume, once the slot frees")
	n, _ := deliveries.Load("dead0")
	assert.EqualValues(t, 2, n, "the pause did not count as a delivery")
	h.checkOnce(t, "dead", 1)
	h.checkOnce(t, "busy", 1)
}

// reclaimRecords returns the fields of a group's flow state that record
// reclaimed entries waiting for permits.
func reclaimRecords(t *testing.T, rdb redis.UniversalClient, key string) []string {
	t.Helper()
	fields, err := rdb.HKeys(context.Background(), key).Result()
	require.NoError(t, err)
	var out []string
	for _, f := range fields {
		if strings.HasPrefix(f, "r:") {
			out = append(out, f)
		}
	}
	return out
}

// promoteAll runs a mover of the queue jobs until n entries are in
// stream, then stops it.
func promoteAll(t *testing.T, rdb redis.UniversalClient, prefix, stream string, n int64) {
	t.Helper()
	mover, err := delaystream.New(rdb, "jobs", delaystream.WithPrefix(prefix), quiet)
	require.NoError(t, err)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mover.Run(ctx) }()
	require.Eventually(t, func() bool { return rdb.XLen(context.Background(), stream).Val() == n }, 10*time.Second, 10*time.Millisecond)
	stop()
	require.NoError(t, <-done)
}
