package group_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"

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
// than in one of its own: 40 messages due 3 ms apart, read one by one.
func TestAcksRideWithReads(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.startMover()
	rides := new(ackRides)
	rdb := redistest.Client(t)
	rdb.AddHook(roundTrips(rides.see))
	rec := newRecorder()
	c := h.consumerOn(rdb, "g", rec.ack)
	r := start(t, c.Run)
	time.Sleep(500 * time.Millisecond) // subscribed

	const n = 40
	for i := range n {
		h.schedule([]string{fmt.Sprint("m", i)}, 0)
		time.Sleep(3 * time.Millisecond)
	}
	waitFor(t, 5*time.Second, func() bool { return c.Counters().Acked == n }, "all acknowledged")
	r.stop(t)
	with, alone := rides.withRead.Load(), rides.alone.Load()
	t.Logf("XACKs with a read: %d, alone: %d", with, alone)
	assert.GreaterOrEqual(t, with, int64(n/2), "most acknowledgements ride with the next read")
	assert.Equal(t, n, rec.total(), "each message handled once")
}
