package group_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/internal/group"
	"github.com/delaystream/delaystream/internal/redistest"
)

// ackRides counts the XACK commands sent in a round trip with an
// XREADGROUP and those sent without one.
type ackRides struct{ withRead, alone atomic.Int64 }

func (h *ackRides) see(cmds []redis.Cmder) {
	acks, read := int64(0), false
	for _, c := range cmds {
		switch c.Name() {
		case "xack":
			acks++
		case "xreadgroup":
			read = true
		}
	}
	if read {
		h.withRead.Add(acks)
	} else {
		h.alone.Add(acks)
	}
}

// At a trickle, a message's acknowledgement goes in the round trip of the
// consumer's next read (the read of the next message announced) rather
// than in one of its own: 40 messages read one by one, each scheduled
// once the one before was handled.
func TestAcksRideWithReads(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.startMover()
	rides := new(ackRides)
	rdb := redistest.Client(t)
	rdb.AddHook(roundTrips(rides.see))
	const n = 40
	handled := make(chan string, n)
	rec := newRecorder()
	c := h.consumerOn(rdb, "g", func(ctx context.Context, m *group.Message) error {
		handled <- m.ID
		return rec.ack(ctx, m)
	})
	r := start(t, c.Run)
	waitSubscribers(t, h.rdb, 1, h.keys.Main().Arrivals)

	for i := range n {
		id := fmt.Sprint("m", i)
		h.schedule([]string{id}, 0)
		select {
		case got := <-handled:
			require.Equal(t, id, got)
		case <-time.After(5 * time.Second):
			require.FailNow(t, "not delivered", id)
		}
	}
	waitFor(t, 5*time.Second, func() bool { return c.Counters().Acked == n }, "all acknowledged")
	r.stop(t)
	with, alone := rides.withRead.Load(), rides.alone.Load()
	t.Logf("XACKs with a read: %d, alone: %d", with, alone)
	assert.GreaterOrEqual(t, with, int64(n/2), "most acknowledgements ride with the next read")
	assert.Equal(t, n, rec.total(), "each message handled once")
}
