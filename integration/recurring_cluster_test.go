package integration

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/integration/internal/harness"
)

// A 6-shard queue on a Cluster of three masters, served by two Queues, with
// a 1 s schedule updated to 2 s while they run: every script touches one
// slot (a cross-slot call would fail), each occurrence is handled once,
// none is skipped before the update, and after it only the new spec fires.
func TestRecurringCluster(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	rdb := harness.Cluster(t)
	prefix := harness.Prefix(t, rdb)
	var (
		mu  sync.Mutex
		got = map[string][]string{} // occurrence -> message ids handled
	)
	var queues []*delaystream.Queue
	for range 2 {
		q, err := delaystream.New(rdb, "ticks", delaystream.WithPrefix(prefix), delaystream.WithShards(6),
			delaystream.WithRecurringHorizon(3*time.Second), delaystream.WithLogger(testLogger(t)))
		require.NoError(t, err)
		_, err = q.Handle("g", func(_ context.Context, d *delaystream.Delivery) error {
			mu.Lock()
			defer mu.Unlock()
			occ := d.Headers[delaystream.HeaderOccurrence]
			got[occ] = append(got[occ], d.ID)
			return nil
		})
		require.NoError(t, err)
		queues = append(queues, q)
	}
	_, err := queues[0].DefineRecurring(ctx, delaystream.Recurring{ID: "tick", Spec: delaystream.Every(time.Second)})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, q := range queues {
		wg.Go(func() { assert.NoError(t, q.Run(runCtx)) })
	}
	defer func() {
		stop()
		wg.Wait()
	}()
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(got)
	}
	require.Eventually(t, func() bool { return count() >= 6 }, 30*time.Second, 50*time.Millisecond)
	out, err := queues[1].DefineRecurring(ctx, delaystream.Recurring{ID: "tick", Spec: delaystream.Every(2 * time.Second)})
	require.NoError(t, err)
	require.Equal(t, delaystream.OutcomeReplaced, out)
	changed := redisNowCluster(ctx, t, queues[1])
	n := count()
	require.Eventually(t, func() bool { return count() >= n+4 }, 30*time.Second, 50*time.Millisecond)

	mu.Lock()
	defer mu.Unlock()
	var before, after []time.Time
	for occ, ids := range got {
		assert.Len(t, ids, 1, "occurrence %s handled %d times", occ, len(ids))
		at, err := time.Parse(time.RFC3339Nano, occ)
		require.NoError(t, err)
		if at.After(changed) {
			after = append(after, at)
			assert.Zero(t, at.UnixMilli()%2000, "%s after the update is of the new spec", occ)
			assert.True(t, strings.HasSuffix(ids[0], "#2"), ids[0])
		} else {
			before = append(before, at)
		}
	}
	slices.SortFunc(before, func(a, b time.Time) int { return a.Compare(b) })
	for i := 1; i < len(before); i++ {
		assert.Equal(t, time.Second, before[i].Sub(before[i-1]), "skipped after %s", before[i-1])
	}
	assert.GreaterOrEqual(t, len(after), 3)
}

// redisNowCluster returns the Redis clock as the queue's Stats read it.
func redisNowCluster(ctx context.Context, t *testing.T, q *delaystream.Queue) time.Time {
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	return st.Now
}
