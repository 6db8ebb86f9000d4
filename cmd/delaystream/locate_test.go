package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/internal/loctest"
	"github.com/delaystream/delaystream/internal/stream"
)

// locate, and get for a message that no longer waits, say where a message
// is; a message found nowhere exits 3.
func TestLocateCommand(t *testing.T) {
	t.Parallel()
	tg := single(t)
	seed(t, tg)

	out := tg.ok(t, "locate", "jobs", "job-1")
	assert.Regexp(t, `(?m)^dead-lettered\s+billing\s+\d+-\d+\s+reason "handler asked to dead-letter", attempt 1: .*card declined$`, out)
	assert.NotContains(t, out, "audit", "handled by audit: not listed")
	assert.Equal(t, out, tg.ok(t, "get", "jobs", "job-1"), "get falls back to locate")

	var loc delaystream.Location
	tg.json(t, &loc, "locate", "jobs", "job-2")
	require.Len(t, loctest.InGroups(loc), 1)
	assert.Equal(t, delaystream.PlaceDeadLettered, loctest.InGroups(loc)[0].Kind)
	assert.Equal(t, "billing", loctest.InGroups(loc)[0].Group)

	out = tg.ok(t, "locate", "orders", "soon")
	assert.Regexp(t, `(?m)^waiting\s+-\s+-\s+due .*attempt 1$`, out)

	r := tg.run(t, "locate", "jobs", "nope")
	assert.Equal(t, 3, r.code)
	assert.Empty(t, r.stdout)
	assert.Equal(t, "delaystream: message nope of queue jobs: not found anywhere (handled by every group that keeps no records of it, cancelled, or never scheduled)\n", r.stderr)
	r = tg.run(t, "get", "jobs", "nope")
	assert.Equal(t, 3, r.code)
	r = tg.run(t, "get", "nosuchqueue", "nope")
	assert.Equal(t, 3, r.code)
	assert.Contains(t, r.stderr, "nosuchqueue")
}

// A waiting message whose envelope is gone (evicted) is said so by locate
// and get, not shown as an ordinary waiting message; a group that keeps
// handled records is listed as having handled a message.
func TestLocateEvictedAndHandled(t *testing.T) {
	t.Parallel()
	tg := single(t)
	seed(t, tg)
	ctx := context.Background()
	rdb := tg.client(t)
	l, err := stream.NewLayout(tg.prefix, "orders", 1)
	require.NoError(t, err)
	require.NoError(t, rdb.HDel(ctx, l.Shard(0).Main().Envelopes, "soon").Err(), "the envelope evicted")
	out := tg.ok(t, "locate", "orders", "soon")
	assert.Regexp(t, `(?m)^waiting\s+-\s+-\s+due .*, MISSING ENVELOPE: it cannot be delivered`, out)
	var loc delaystream.Location
	tg.json(t, &loc, "locate", "orders", "soon")
	require.NotNil(t, loctest.Waiting(loc))
	assert.Equal(t, "missing envelope", loctest.Waiting(loc).Problem)
	assert.Regexp(t, `(?m)^waiting\s+-\s+-\s+due .*, MISSING ENVELOPE: it cannot be delivered`, tg.ok(t, "get", "orders", "soon"),
		"get falls back to locate, which says so")

	q, err := delaystream.New(rdb, "kept", delaystream.WithPrefix(tg.prefix), delaystream.WithDrainTimeout(time.Second))
	require.NoError(t, err)
	g, err := q.Handle("billing", func(context.Context, *delaystream.Delivery) error { return nil },
		delaystream.WithHandledRecords(time.Hour), delaystream.WithConsumerName("b-1"))
	require.NoError(t, err)
	_, err = q.Schedule(ctx, delaystream.Message{ID: "order-7"}, delaystream.After(0))
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- q.Run(runCtx) }()
	require.Eventually(t, func() bool { return g.Counters().Acked == 1 }, 10*time.Second, 10*time.Millisecond)
	cancel()
	require.NoError(t, <-done)
	out = tg.ok(t, "locate", "kept", "order-7")
	assert.Regexp(t, `(?m)^handled\s+billing\s+-\s+handled at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d \S+ \(.* ago\), attempt 1, consumer b-1$`, out)
}
