package group_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/internal/group"
	"github.com/delaystream/delaystream/internal/stream"
)

// The queue stream is deleted (someone replaced it, then deleted it) and
// recreated by the group that comes back first: what is appended meanwhile
// stays until every recorded group is back, so the slower group gets it
// too. A group retired with Forget no longer holds back trimming.
func TestTrimWaitsForRecordedGroups(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarness(t)
	h.startMover()
	fast, slow := newRecorder(), newRecorder()
	opts := []group.Option{group.WithTrimInterval(100 * time.Millisecond), group.WithoutPromotion()}
	ticks := &loopTicks{}
	fc := h.consumer("fast", fast.ack, append(opts, ticks.option())...)
	rf := start(t, fc.Run)
	rs := start(t, h.consumer("slow", slow.ack, opts...).Run)
	// Both groups exist before anything arrives: a group whose consumers
	// have not started yet is not waited for (the fast group could trim
	// what the slow one, created later, would read).
	waitFor(t, 10*time.Second, func() bool {
		gs, err := h.rdb.XInfoGroups(ctx, h.mainStream()).Result()
		return err == nil && len(gs) == 2
	})
	h.schedule(ids("a", 5), 0)
	waitFor(t, 10*time.Second, func() bool { return fast.total() == 5 && slow.total() == 5 })
	rs.stop(t) // the slow group's consumer is away

	require.NoError(t, h.rdb.Del(ctx, h.mainStream()).Err()) // both groups go with the stream
	h.schedule(ids("b", 10), 0)
	// The fast group recreates its group, reads and acknowledges all ten;
	// its trimmer must keep them for the slow group, recorded but missing.
	waitFor(t, 10*time.Second, func() bool { return fc.Counters().Acked == 15 })
	// Two more iterations of its trim loop: the second began after the
	// last acknowledgement, and trimmed the stream (for what was
	// acknowledged, or again after a pass the missing group held back).
	ticks.waitTrims(t, 2)
	n, err := h.rdb.XLen(ctx, h.mainStream()).Result()
	require.NoError(t, err)
	assert.EqualValues(t, 10, n, "the fast group's trimmer removed what the slow group has not read")

	// The slow group comes back and gets them all (its group is recreated
	// at the start of the stream); then the stream is trimmed.
	rs2 := start(t, h.consumer("slow", slow.ack, opts...).Run)
	waitFor(t, 10*time.Second, func() bool { return slow.total() == 15 })
	waitFor(t, 10*time.Second, func() bool { n, _ := h.rdb.XLen(ctx, h.mainStream()).Result(); return n == 0 },
		"trimmed once every recorded group has read and acknowledged")

	// Retired for good: Forget, and the fast group's trimming no longer waits for it.
	rs2.stop(t)
	require.NoError(t, group.Forget(ctx, h.rdb, h.queue, "slow", group.WithPrefix(h.prefix)))
	members, err := h.rdb.SMembers(ctx, h.keys.Groups()).Result()
	require.NoError(t, err)
	assert.Equal(t, []string{"fast"}, members)
	h.schedule(ids("c", 3), 0)
	waitFor(t, 10*time.Second, func() bool { return fast.total() == 18 })
	waitFor(t, 10*time.Second, func() bool { n, _ := h.rdb.XLen(ctx, h.mainStream()).Result(); return n == 0 },
		"trimmed without the forgotten group")
	rf.stop(t)
}

// Forget on a sharded queue whose shards do not all have a stream yet (no
// message reached them) removes the group where it exists and fails on
// none of the others.
func TestForgetWhereStreamsAreMissing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newShardedHarness(t, 4)
	layout, err := stream.NewLayout(h.prefix, h.queue, 4)
	require.NoError(t, err)
	first := layout.Shard(0)
	require.NoError(t, h.rdb.XGroupCreateMkStream(ctx, first.Main().Stream, "old", "0").Err())
	require.NoError(t, h.rdb.SAdd(ctx, first.Groups(), "old").Err())
	require.NoError(t, group.Forget(ctx, h.rdb, h.queue, "old", group.WithPrefix(h.prefix), group.WithShards(4)))
	gs, err := h.rdb.XInfoGroups(ctx, first.Main().Stream).Result()
	require.NoError(t, err)
	assert.Empty(t, gs, "the group is gone from the stream that had it")
	member, err := h.rdb.SIsMember(ctx, first.Groups(), "old").Result()
	require.NoError(t, err)
	assert.False(t, member, "and from the record of the queue's groups")
}
