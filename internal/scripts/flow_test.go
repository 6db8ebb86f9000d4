package scripts_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/internal/redistest"
	"github.com/delaystream/delaystream/internal/scripts"
)

// flowCall is one call of flow.lua (see its header for the arguments).
type flowCall struct {
	consumer  string
	held      int64
	want      int64
	cap       int64
	interval  time.Duration // between rate permits; 0 none
	lease     time.Duration
	reclaimed int64
	first     bool
}

// flowReply is flow.lua's reply.
type flowReply struct {
	granted, wait, blocker int64
}

func runFlow(t *testing.T, rdb redis.UniversalClient, key, channel string, c flowCall) flowReply {
	t.Helper()
	lease := c.lease
	if lease == 0 {
		lease = time.Minute
	}
	flag := "0"
	if c.first {
		flag = "1"
	}
	v, err := scripts.Flow.Run(context.Background(), rdb, []string{key},
		c.consumer, c.held, c.want, 1, c.cap, c.interval.Microseconds(), 1, lease.Milliseconds(), 0,
		channel, "f:g", 0, 0, c.reclaimed, flag).Int64Slice()
	require.NoError(t, err)
	require.Len(t, v, 3)
	return flowReply{granted: v[0], wait: v[1], blocker: v[2]}
}

// Crashed work goes first (flow.lua): while a consumer records reclaimed
// entries waiting, fresh reads of every consumer are granted no slot they
// wait for, and no rate permit; the reclaimer's own calls are granted
// before them, a slot freed for it is announced, and the record goes once
// its entries are granted, or lapses with its deadline when it dies, so a
// dead reclaimer holds nothing off for longer than its lease.
func TestFlowReclaimedGoFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	p := redistest.Prefix(t)
	// listen subscribes to channel and returns a function that reports
	// whether a notice came within a deadline.
	listen := func(t *testing.T, channel string) func() bool {
		sub := rdb.Subscribe(ctx, channel)
		t.Cleanup(func() { _ = sub.Close() })
		_, err := sub.Receive(ctx) // subscribed
		require.NoError(t, err)
		notices := sub.Channel()
		return func() bool {
			select {
			case m := <-notices:
				return m.Payload == "f:g"
			case <-time.After(2 * time.Second):
				return false
			}
		}
	}

	t.Run("cap", func(t *testing.T) {
		key, channel := p+":f:cap", p+":n:cap"
		noticed := listen(t, channel)
		const limit = 3
		// a holds every slot; b took over 2 entries of a dead consumer.
		assert.Equal(t, flowReply{3, -1, 0}, runFlow(t, rdb, key, channel, flowCall{consumer: "a", want: 3, cap: limit}))
		assert.Equal(t, flowReply{0, -1, 1}, runFlow(t, rdb, key, channel, flowCall{consumer: "b", want: 2, cap: limit, reclaimed: 2, first: true}))
		// a's worker frees a slot: announced, and its fresh read is refused
		// the slot the reclaimed entries wait for.
		assert.Equal(t, flowReply{0, -1, 3}, runFlow(t, rdb, key, channel, flowCall{consumer: "a", held: 2, want: 1, cap: limit}))
		assert.True(t, noticed(), "the freed slot is announced")
		// c's fresh read too, b's own fresh read too.
		assert.Equal(t, flowReply{0, -1, 3}, runFlow(t, rdb, key, channel, flowCall{consumer: "c", want: 1, cap: limit}))
		assert.Equal(t, flowReply{0, -1, 3}, runFlow(t, rdb, key, channel, flowCall{consumer: "b", want: 1, cap: limit, reclaimed: 2}))
		// b's reclaimed entries take it.
		assert.Equal(t, flowReply{1, -1, 0}, runFlow(t, rdb, key, channel, flowCall{consumer: "b", want: 2, cap: limit, reclaimed: 2, first: true}))
		// Another slot freed goes to b's last one, then fresh reads go on.
		assert.Equal(t, flowReply{0, -1, 3}, runFlow(t, rdb, key, channel, flowCall{consumer: "a", held: 1, want: 1, cap: limit}))
		assert.True(t, noticed(), "the freed slot is announced")
		assert.Equal(t, flowReply{0, -1, 3}, runFlow(t, rdb, key, channel, flowCall{consumer: "c", want: 1, cap: limit}))
		assert.Equal(t, flowReply{1, -1, 0}, runFlow(t, rdb, key, channel, flowCall{consumer: "b", held: 1, want: 1, cap: limit, reclaimed: 1, first: true}))
		assert.False(t, rdb.HExists(ctx, key, "r:b").Val(), "the record goes with the last grant")
		assert.Equal(t, flowReply{0, -1, 1}, runFlow(t, rdb, key, channel, flowCall{consumer: "c", want: 1, cap: limit}), "the cap is full")
		assert.Equal(t, flowReply{1, -1, 0}, runFlow(t, rdb, key, channel, flowCall{consumer: "a", want: 1, cap: limit}), "a's slot is free again")
	})

	t.Run("dead reclaimer", func(t *testing.T) {
		key, channel := p+":f:dead", ""
		const limit = 2
		lease := 200 * time.Millisecond
		assert.Equal(t, flowReply{0, -1, 0}, runFlow(t, rdb, key, channel,
			flowCall{consumer: "b", cap: limit, lease: lease, reclaimed: 2}), "b records 2 reclaimed entries, then dies")
		assert.Equal(t, flowReply{0, -1, 3}, runFlow(t, rdb, key, channel, flowCall{consumer: "c", want: 1, cap: limit, lease: lease}))
		require.Eventually(t, func() bool {
			return runFlow(t, rdb, key, channel, flowCall{consumer: "c", want: 2, cap: limit, lease: lease}).granted == 2
		}, 5*time.Second, 20*time.Millisecond, "the record lapses")
		assert.False(t, rdb.HExists(ctx, key, "r:b").Val(), "a lapsed record is removed")
	})

	t.Run("rate", func(t *testing.T) {
		key, channel := p+":f:rate", p+":n:rate"
		noticed := listen(t, channel)
		const interval = 10 * time.Millisecond
		assert.Equal(t, flowReply{0, -1, 0}, runFlow(t, rdb, key, channel,
			flowCall{consumer: "b", interval: interval, reclaimed: 1}), "b records a reclaimed entry")
		assert.Equal(t, flowReply{0, -1, 3}, runFlow(t, rdb, key, channel, flowCall{consumer: "c", want: 1, interval: interval}),
			"no permit for a fresh read")
		got := runFlow(t, rdb, key, channel, flowCall{consumer: "b", want: 1, interval: interval, reclaimed: 1, first: true})
		assert.Equal(t, int64(1), got.granted, "the next permit is the reclaimed entry's")
		assert.True(t, noticed(), "fresh reads are told the record went")
		assert.False(t, rdb.HExists(ctx, key, "r:b").Val())
		require.Eventually(t, func() bool {
			return runFlow(t, rdb, key, channel, flowCall{consumer: "c", want: 1, interval: interval}).granted == 1
		}, 5*time.Second, 5*time.Millisecond, "fresh reads go on")
	})
}
