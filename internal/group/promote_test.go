package group_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/internal/group"
	"github.com/delaystream/delaystream/internal/redistest"
)

// A program of a producer and consumers alone delivers: the consumers keep
// the queue promoted, none early, every group gets every message, and the
// consumers of one queue in one process share one mover.
func TestConsumersPromoteTheirQueue(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	const n = 50
	ids := ids("m", n)
	h.schedule(ids, 300*time.Millisecond)
	recs := map[string]*recorder{"a": newRecorder(), "b": newRecorder(), "c": newRecorder()}
	var runs []*runner
	for g, rec := range recs {
		runs = append(runs, start(t, h.consumer(g, rec.ack).Run))
	}
	waitFor(t, 5*time.Second, func() bool { return group.PromoterUsers(h.rdb, h.prefix, h.queue, 1) == 3 },
		"three consumers of one queue on one client share one mover")
	for g, rec := range recs {
		waitFor(t, 15*time.Second, func() bool { return rec.total() >= n }, "group %s got every message", g)
	}
	for g, rec := range recs {
		snap := rec.snapshot()
		assert.Len(t, snap, n, "group %s", g)
		for id, ds := range snap {
			for _, d := range ds {
				assert.False(t, d.At.Before(d.Due), "group %s: %s delivered at %v, before its due time %v", g, id, d.At, d.Due)
			}
		}
	}
	left, err := h.q.Len(context.Background())
	require.NoError(t, err)
	assert.Zero(t, left, "nothing left waiting")
	stopAll(t, runs...)
	assert.Zero(t, group.PromoterUsers(h.rdb, h.prefix, h.queue, 1), "the mover stops with the last consumer")
}

// A consumer built WithoutPromotion promotes nothing: the messages wait
// until a mover runs, then arrive. Meanwhile it delivers what is appended
// to the stream without a mover.
func TestConsumerWithoutPromotion(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ids := ids("m", 10)
	h.schedule(ids, 0)
	rec := newRecorder()
	start(t, h.consumer("g", rec.ack, group.WithoutPromotion()).Run)
	// Running: it handled an entry appended by hand (a consumer that
	// promotes starts its mover before it reads).
	h.addEntry(h.mainStream(), envEntry("marker", "x")...)
	waitFor(t, 10*time.Second, func() bool { return rec.total() > 0 }, "the marker delivered")
	assert.Zero(t, group.PromoterUsers(h.rdb, h.prefix, h.queue, 1), "a consumer WithoutPromotion runs a mover")
	assert.Equal(t, []string{"marker"}, sortedKeys(rec.snapshot()), "a consumer WithoutPromotion delivered messages nobody promoted")
	left, err := h.q.Len(context.Background())
	require.NoError(t, err)
	assert.EqualValues(t, len(ids), left, "the messages still wait")
	h.startMover()
	waitFor(t, 10*time.Second, func() bool { return rec.total() == len(ids)+1 }, "delivered once a mover runs")
}

// Consumers in different processes (here: on different clients) each run a
// mover; the lease makes them share the work and nothing is promoted twice.
func TestConsumersOnTwoClientsPromoteOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	const n = 300
	ids := ids("m", n)
	rec := newRecorder()
	other := redistest.Client(t)
	start(t, h.consumer("g", rec.ack).Run)
	start(t, h.consumerOn(other, "g", rec.ack).Run)
	waitFor(t, 5*time.Second, func() bool {
		return group.PromoterUsers(h.rdb, h.prefix, h.queue, 1) == 1 && group.PromoterUsers(other, h.prefix, h.queue, 1) == 1
	}, "one mover per client")
	h.schedule(ids, 200*time.Millisecond)
	waitFor(t, 15*time.Second, func() bool { return rec.total() >= n })
	// A marker due after them all, delivered and every read entry settled:
	// a duplicate appended meanwhile would have been read before it.
	h.schedule([]string{"zz-marker"}, 0)
	waitFor(t, 10*time.Second, func() bool {
		return len(rec.get("zz-marker")) > 0 && h.pending(h.mainStream(), "g") == 0
	}, "the marker delivered and everything settled")
	snap := rec.snapshot()
	require.Len(t, snap, n+1)
	for id, ds := range snap {
		assert.Len(t, ds, 1, "%s delivered more than once", id)
	}
	info, err := h.rdb.XInfoStream(context.Background(), h.mainStream()).Result()
	require.NoError(t, err)
	assert.EqualValues(t, n+1, info.EntriesAdded, "each message appended once")
}
