package group_test

import (
	"context"
	"fmt"
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

// emptyReads counts the XREADGROUP calls made through a client (its hook)
// and those that found nothing.
type emptyReads struct{ all, empty atomic.Int64 }

func (h *emptyReads) hook() redis.Hook {
	return roundTrips(func(cmds []redis.Cmder) {
		for _, cmd := range cmds {
			h.see(cmd)
		}
	})
}

func (h *emptyReads) see(cmd redis.Cmder) {
	c, ok := cmd.(*redis.XStreamSliceCmd)
	if !ok || !strings.EqualFold(c.Name(), "xreadgroup") {
		return
	}
	h.all.Add(1)
	n := 0
	for _, s := range c.Val() {
		n += len(s.Messages)
	}
	if n == 0 {
		h.empty.Add(1)
	}
}

// membersListed counts the membership lists (PUBSUB SHARDCHANNELS
// replies) of a client that name a given number of consumers.
type membersListed struct{ n atomic.Int64 }

func (l *membersListed) hook(members int) redis.Hook {
	return roundTrips(func(cmds []redis.Cmder) {
		for _, cmd := range cmds {
			args := cmd.Args()
			c, ok := cmd.(*redis.StringSliceCmd)
			if ok && len(args) > 1 && strings.EqualFold(fmt.Sprint(args[1]), "shardchannels") && c.Err() == nil && len(c.Val()) == members {
				l.n.Add(1)
			}
		}
	})
}

// Two consumers of one group on a queue of 8 shards split the shards
// between them: an announced shard is read at once by its owner only, the
// other consumer reading it in a stray round 100 ms later, once the owner
// has taken the entries. Without the split both read every announcement
// and one of the two finds nothing, so about one read per message is
// empty; with it, only the stray rounds' and the polls' are. Then one
// consumer, still running, stops reading (its workers are stuck): the
// other takes its shards' messages in stray rounds, not at the 5 s poll.
func TestShardedConsumersSplitTheReads(t *testing.T) {
	t.Parallel()
	const shards, n = 8, 600
	h := newShardedHarness(t, shards)
	h.startMover()
	ctx := context.Background()
	rec := newRecorder()
	release := make(chan struct{})
	var held atomic.Int64
	stuck := func(ctx context.Context, m *group.Message) error {
		if strings.HasPrefix(m.ID, "busy") {
			held.Add(1)
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return rec.ack(ctx, m)
	}
	var hooks [2]emptyReads
	var lists [2]membersListed
	for k, hd := range []group.Handler{rec.ack, stuck} {
		rdb := redistest.Client(t)
		rdb.AddHook(hooks[k].hook())
		rdb.AddHook(lists[k].hook(2))
		c := h.consumerOn(rdb, "g", hd, group.WithConsumerName(fmt.Sprintf("c%d", k)),
			group.WithPrefetch(0), group.WithMembersEvery(100*time.Millisecond), group.WithoutPromotion())
		start(t, c.Run)
	}
	waitFor(t, 10*time.Second, func() bool { return lists[0].n.Load() > 0 && lists[1].n.Load() > 0 },
		"each consumer listed both: each knows the other")

	// A trickle: n messages, one due every 2.5 ms.
	trickle := func(prefix string, n int) []string {
		all := ids(prefix, n)
		items := make([]delay.Item, n)
		for i, id := range all {
			items[i] = delay.Item{Message: delay.Message{ID: id, Payload: []byte(id)}, When: delay.After(200*time.Millisecond + time.Duration(i)*2500*time.Microsecond)}
		}
		_, err := h.q.ScheduleBatch(ctx, items)
		require.NoError(t, err)
		return all
	}
	var all0, empty0 [2]int64
	for k := range hooks {
		all0[k], empty0[k] = hooks[k].all.Load(), hooks[k].empty.Load()
	}
	first := trickle("split", n)
	waitFor(t, 20*time.Second, func() bool { return rec.total() >= n }, "the trickle delivered")
	var reads, empty int64
	for k := range hooks {
		reads += hooks[k].all.Load() - all0[k]
		empty += hooks[k].empty.Load() - empty0[k]
		t.Logf("c%d: %d reads, %d empty", k, hooks[k].all.Load()-all0[k], hooks[k].empty.Load()-empty0[k])
	}
	t.Logf("%d messages: %d reads, %d of them empty", n, reads, empty)
	assert.Less(t, empty, int64(n/3), "empty reads: announced shards read by both consumers")
	for _, id := range first {
		assert.Len(t, rec.get(id), 1, id)
	}

	// c1's workers take a message each of the second trickle and are stuck: its
	// shards' other messages are read by c0 in stray rounds.
	second := trickle("busy", 200)
	waitFor(t, 20*time.Second, func() bool { return rec.total()+int(held.Load()) >= n+len(second) }, "the second trickle delivered but the stuck ones")
	require.LessOrEqual(t, held.Load(), int64(group.DefaultWorkers), "c1 holds one message per worker")
	var worst time.Duration
	for _, id := range second {
		if ds := rec.get(id); len(ds) == 1 {
			worst = max(worst, ds[0].At.Sub(ds[0].Due))
		}
	}
	t.Logf("with c1 stuck: worst lateness %v", worst)
	assert.Less(t, worst, 2*time.Second, "the stuck consumer's shards waited for the poll")
	close(release)
	waitFor(t, 10*time.Second, func() bool { return rec.total() == n+len(second) }, "the stuck ones delivered")
	for _, id := range second {
		assert.Len(t, rec.get(id), 1, id)
	}
}
