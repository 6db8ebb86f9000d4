package delaystream_test

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/internal/margin"
	"github.com/delaystream/delaystream/internal/redistest"
)

func TestWithPrecisionRefuses(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	for _, d := range []time.Duration{-time.Millisecond, 2500 * time.Microsecond, delaystream.MaxPrecision + time.Millisecond} {
		_, err := delaystream.New(rdb, "q", delaystream.WithPrecision(d))
		assert.True(t, errors.Is(err, delaystream.ErrInvalidOption), "precision %s: %v", d, err)
	}
}

// A queue at a precision of 100 ms with two groups: each group gets every
// message once, none before its due time by the Redis clock (TIME, read
// in the handler), and the messages due within one 100 ms bucket share a
// promote call.
func TestQueuePrecision(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	const p = 100 * time.Millisecond
	var promoteCalls atomic.Int64
	q, err := delaystream.New(rdb, "q", delaystream.WithPrefix(prefix), delaystream.WithPrecision(p),
		delaystream.WithDrainTimeout(time.Second),
		delaystream.WithMoverHooks(delaystream.MoverHooks{OnPromote: func(string, int, int, time.Duration) { promoteCalls.Add(1) }}))
	require.NoError(t, err)

	type got struct {
		due, at time.Time // at: Redis TIME in the handler
	}
	var mu sync.Mutex
	seen := map[string]map[string][]got{}
	for _, g := range []string{"billing", "audit"} {
		seen[g] = map[string][]got{}
		_, err := q.Handle(g, func(ctx context.Context, d *delaystream.Delivery) error {
			at, err := rdb.Time(ctx).Result()
			if err != nil {
				return err // retried: the test sees it late, not early
			}
			mu.Lock()
			defer mu.Unlock()
			seen[g][d.ID] = append(seen[g][d.ID], got{due: d.Due, at: at})
			return nil
		}, delaystream.WithWorkers(4))
		require.NoError(t, err)
	}

	now, err := rdb.Time(ctx).Result()
	require.NoError(t, err)
	start := now.Add(500 * time.Millisecond)
	const n = 100
	buckets := map[int64]bool{}
	for i := range n {
		due := start.Add(time.Duration(mrand.IntN(1000)) * time.Millisecond).Truncate(time.Millisecond)
		buckets[(due.UnixMilli()+p.Milliseconds()-1)/p.Milliseconds()] = true
		_, err := q.Schedule(ctx, delaystream.Message{ID: fmt.Sprint("m", i)}, delaystream.At(due))
		require.NoError(t, err)
	}

	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- q.Run(runCtx) }()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		mu.Lock() // counted under the lock, compared (and formatted) outside it
		b, a := len(seen["billing"]), len(seen["audit"])
		mu.Unlock()
		assert.Equal(c, n, b, "billing")
		assert.Equal(c, n, a, "audit")
	}, 20*time.Second, 10*time.Millisecond)
	cancel()
	require.NoError(t, <-done)

	var late time.Duration
	for g, byID := range seen {
		for id, runs := range byID {
			require.Len(t, runs, 1, "%s: %s delivered once", g, id)
			r := runs[0]
			require.False(t, r.at.Before(r.due), "%s: %s handled at %s, before its due time %s (Redis clock)", g, id, r.at, r.due)
			late = max(late, r.at.Sub(r.due))
		}
	}
	// Wake-ups while scheduling may add a call or two; a target before
	// the due time would promote the messages one by one.
	margin.LessOrEqual(t, "promote calls that moved", promoteCalls.Load(), int64(len(buckets)+3), "promote calls that moved messages")
	t.Logf("%d messages in %d buckets of %s: %d promote calls, latest handled %s after its due time", n, len(buckets), p, promoteCalls.Load(), late)
}
