package group_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/internal/delay"
	"github.com/delaystream/delaystream/internal/group"
	"github.com/delaystream/delaystream/internal/redistest"
)

// A pending entry found deleted while Redis refuses writes for memory
// (maxmemory reached under noeviction): its dead-letter record is refused,
// counted in MemoryRefused and written again after a pause, and once
// memory is freed the record is there, once.
func TestDeletedWhilePendingRecordedOutOfMemory(t *testing.T) {
	t.Parallel()
	s, err := redistest.Spawn("--maxmemory-policy", "noeviction")
	require.NoError(t, err)
	t.Cleanup(s.Stop)
	rdb := redis.NewClient(redistest.Options(t, s.Addr))
	t.Cleanup(func() { _ = rdb.Close() })
	p := redistest.Prefix(t)
	q, err := delay.New(rdb, "q", delay.WithPrefix(p))
	require.NoError(t, err)
	h := &harness{t: t, rdb: rdb, prefix: p, queue: "q", q: q, keys: q.Keys(), shards: 1}

	ctx := context.Background()
	key := h.mainStream()
	// A consumer that reads both entries and dies (it never comes back),
	// then a consumer that starts (its start writes, which Redis would
	// refuse past the limit), with a visibility timeout that keeps it from
	// reclaiming them by itself.
	gone := h.addEntry(key, envEntry("gone", "x")...)
	kept := h.addEntry(key, envEntry("kept", "y")...)
	require.NoError(t, rdb.XGroupCreate(ctx, key, "g", "0").Err())
	res, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: "ghost", Streams: []string{key, ">"}, Count: 10, Block: -1}).Result()
	require.NoError(t, err)
	require.Len(t, res[0].Messages, 2)
	rec := newRecorder()
	var deadHook atomic.Int64
	c := h.consumer("g", rec.ack, group.WithVisibilityTimeout(time.Hour), group.WithReclaimInterval(20*time.Millisecond),
		group.WithHooks(group.Hooks{
			OnDeadLettered: func(m *group.Message, reason string) {
				if m == nil && reason == group.ReasonDeleted {
					deadHook.Add(1)
				}
			},
		}))
	r := start(t, c.Run)
	// Its reclaimer's first XAUTOCLAIM (on a server of the test's own)
	// comes once it has started.
	waitFor(t, 10*time.Second, func() bool {
		info, err := rdb.Info(ctx, "commandstats").Result()
		return err == nil && strings.Contains(info, "cmdstat_xautoclaim:")
	}, "the consumer has started")
	// At once (the reclaimer sees all or nothing of it): both entries idle
	// for longer than the visibility timeout, one of them deleted, and
	// Redis past its memory limit.
	_, err = rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Do(ctx, "XCLAIM", key, "g", "ghost", 0, gone, kept, "IDLE", 2*time.Hour.Milliseconds(), "JUSTID")
		p.XDel(ctx, key, gone)
		p.ConfigSet(ctx, "maxmemory", "1")
		return nil
	})
	require.NoError(t, err)

	waitFor(t, 20*time.Second, func() bool {
		x := c.Counters()
		return x.DeletedWhilePending == 1 && x.MemoryRefused >= 3
	}, "the record is refused, and tried again")
	assert.Zero(t, deadHook.Load(), "nothing recorded while Redis refuses it")
	assert.Zero(t, c.Counters().DeadLettered)

	require.NoError(t, rdb.ConfigSet(ctx, "maxmemory", "0").Err())
	waitFor(t, 20*time.Second, func() bool { return deadHook.Load() == 1 }, "the record is written once Redis accepts it")
	r.stop(t)

	x := c.Counters()
	assert.EqualValues(t, 1, x.DeletedWhilePending)
	assert.EqualValues(t, 1, x.DeadLettered)
	dls := deadLetters(t, c.DeadLetters())
	require.Len(t, dls, 1)
	assert.Equal(t, group.ReasonDeleted, dls[0].Reason)
	assert.Equal(t, gone, dls[0].SourceID)
}
