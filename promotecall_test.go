package delaystream_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/internal/margin"
	"github.com/delaystream/delaystream/internal/redistest"
	"github.com/delaystream/delaystream/internal/scripts"
)

// readCount counts the XREADGROUP commands a client sends by group,
// leaving out those in a promote call's pipeline (with the promote
// script's EVALSHA), and
// the entries the reads in promote calls' pipelines took for each group.
type readCount struct{ first, second, inCallFirst, inCallSecond atomic.Int64 }

func (c *readCount) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (c *readCount) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.see(cmd)
		return next(ctx, cmd)
	}
}

func (c *readCount) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if !slices.ContainsFunc(cmds, isPromoteCall) {
			for _, cmd := range cmds {
				c.see(cmd)
			}
			return next(ctx, cmds)
		}
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			c.took(cmd)
		}
		return err
	}
}

// isPromoteCall reports whether cmd is a call of the promote script (a
// pipeline's acknowledgements are a script of their own, scripts.Ack).
func isPromoteCall(cmd redis.Cmder) bool {
	args := cmd.Args()
	return cmd.Name() == "evalsha" && len(args) > 1 && args[1] == scripts.Promote.Hash()
}

// took counts the entries a promote call's read took.
func (c *readCount) took(cmd redis.Cmder) {
	x, ok := cmd.(*redis.XStreamSliceCmd)
	if !ok || len(cmd.Args()) < 3 || x.Err() != nil {
		return
	}
	n := 0
	for _, s := range x.Val() {
		n += len(s.Messages)
	}
	switch cmd.Args()[2] {
	case "first":
		c.inCallFirst.Add(int64(n))
	case "second":
		c.inCallSecond.Add(int64(n))
	}
}

func (c *readCount) see(cmd redis.Cmder) {
	if !strings.EqualFold(cmd.Name(), "xreadgroup") || len(cmd.Args()) < 3 {
		return
	}
	switch cmd.Args()[2] {
	case "first":
		c.first.Add(1)
	case "second":
		c.second.Add(1)
	}
}

// A queue's first group takes part in its promote calls: at a trickle each
// message reaches it in the pipeline of the call that promotes it, with no
// read of its own, while a second group reads each message itself. Both get every
// message once, never before its due time.
func TestPromoteCallReadsForFirstGroup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redis.NewClient(redistest.Options(t, redistest.Addr(t)))
	t.Cleanup(func() { _ = rdb.Close() })
	reads := new(readCount)
	rdb.AddHook(reads)
	q, err := delaystream.New(rdb, "q", delaystream.WithPrefix(redistest.Prefix(t)),
		delaystream.WithDrainTimeout(time.Second), delaystream.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	type got struct {
		id       string
		due, now time.Time
	}
	handled := map[string]chan got{"first": make(chan got, 100), "second": make(chan got, 100)}
	groups := map[string]*delaystream.Group{}
	for _, name := range []string{"first", "second"} {
		g, err := q.Handle(name, func(ctx context.Context, d *delaystream.Delivery) error {
			handled[name] <- got{id: d.ID, due: d.Due, now: time.Now()}
			return nil
		})
		require.NoError(t, err)
		groups[name] = g
	}
	qctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- q.Run(qctx) }()
	t.Cleanup(func() { cancel(); <-done })

	await := func(g, id string) got {
		select {
		case m := <-handled[g]:
			require.Equal(t, id, m.id, "group %s", g)
			return m
		case <-time.After(10 * time.Second):
			require.FailNow(t, "not delivered", "%s to %s", id, g)
			return got{}
		}
	}
	// The first message waits for the groups to be created and read.
	_, err = q.Schedule(ctx, delaystream.Message{ID: "m0"}, delaystream.After(0))
	require.NoError(t, err)
	await("first", "m0")
	await("second", "m0")
	first0, second0, inCall0 := reads.first.Load(), reads.second.Load(), reads.inCallFirst.Load()
	const n = 30
	for i := 1; i <= n; i++ {
		id := fmt.Sprint("m", i)
		_, err := q.Schedule(ctx, delaystream.Message{ID: id}, delaystream.After(20*time.Millisecond))
		require.NoError(t, err)
		for _, g := range []string{"first", "second"} {
			m := await(g, id)
			assert.False(t, m.now.Before(m.due), "%s to %s before its due time", id, g)
		}
	}
	first, second, inCall := reads.first.Load()-first0, reads.second.Load()-second0, reads.inCallFirst.Load()-inCall0
	t.Logf("%d messages: the first group's own reads %d, messages it took in promote calls %d; the second group's reads %d",
		n, first, inCall, second)
	// Which messages a promote call reads for the first group depends on
	// timing (a message due before its Schedule call returns is promoted
	// by that call; a read of the first group's own may come first): how
	// many it saves is the bench's figure (commands per message with
	// -consumer-promotes). What does not depend on timing: promote calls
	// read for the first group, and for it alone.
	margin.Greater(t, "messages read in promote calls", inCall, 0, "the promote calls' pipelines read the first group's messages")
	assert.Zero(t, reads.inCallSecond.Load(), "promote calls read for one group only")
	assert.GreaterOrEqual(t, second, int64(n), "the second group reads each message itself")
	require.Eventually(t, func() bool {
		return groups["first"].Counters().Acked == n+1 && groups["second"].Counters().Acked == n+1
	}, 5*time.Second, 10*time.Millisecond, "every message acknowledged by both groups")
}
