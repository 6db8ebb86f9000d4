package group_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/internal/group"
	"github.com/delaystream/delaystream/internal/margin"
)

// touched returns, for each entry of the streams pending for consumer in
// group g, when it was last delivered or extended: its idle time as Redis
// counts it, taken from before the call was sent (a lower bound of the
// moment, to the millisecond). Called once the consumer is dead, it tells
// when each entry becomes reclaimable: a visibility timeout later.
func (h *harness) touched(g, consumer string, streams ...string) map[string]time.Time {
	h.t.Helper()
	out := map[string]time.Time{}
	for _, s := range streams {
		sent := time.Now()
		p, err := h.rdb.XPendingExt(context.Background(), &redis.XPendingExtArgs{
			Stream: s, Group: g, Start: "-", End: "+", Count: 1000, Consumer: consumer}).Result()
		require.NoError(h.t, err)
		for _, x := range p {
			out[x.ID] = sent.Add(-x.Idle - time.Millisecond)
		}
	}
	return out
}

// reclaimedInTime checks, for each delivery of an entry in touched (the
// entries of a dead consumer, see harness.touched), what the design
// guarantees with the default visibility timeout and reclaim interval:
// never handled elsewhere before it was idle for the visibility timeout
// (XAUTOCLAIM's minimum idle time: causal, whatever the load), and within
// a reclaim interval after that, with a second of slack for the read, the
// handler and two loaded cores. It returns the latest delay past the
// reclaimable moment.
func reclaimedInTime(t *testing.T, name string, touched map[string]time.Time, ds []delivery) time.Duration {
	t.Helper()
	var late time.Duration
	for _, d := range ds {
		at, ok := touched[d.EntryID]
		if !ok {
			continue
		}
		reclaimable := at.Add(group.DefaultVisibility)
		assert.False(t, d.At.Before(reclaimable), "%s handled elsewhere %s before it was idle for the visibility timeout",
			d.ID, reclaimable.Sub(d.At))
		late = max(late, d.At.Sub(reclaimable))
	}
	margin.LessOrEqual(t, name, late, group.DefaultReclaimEvery+time.Second,
		"crashed consumer's work redelivered later than a reclaim interval after it became reclaimable")
	return late
}

// firsts returns the first delivery of each message.
func firsts(snap map[string][]delivery) []delivery {
	out := make([]delivery, 0, len(snap))
	for _, ds := range snap {
		if len(ds) > 0 {
			out = append(out, ds[0])
		}
	}
	return out
}
