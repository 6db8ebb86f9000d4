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
// XREADGROUP or a promote call (EVALSHA) and those sent alone, and the
// consumer's own reads: XREADGROUPs not in a promote call's pipeline.
type ackRides struct{ withRead, alone, reads atomic.Int64 }

func (h *ackRides) see(cmds []redis.Cmder) {
	acks, reads, promote := int64(0), int64(0), false
	for _, c := range cmds {
		switch c.Name() {
		case "xack":
			acks++
		case "xreadgroup":
			reads++
		case "evalsha", "eval":
			promote = true
		}
	}
	if !promote {
		h.reads.Add(reads)
	}
	if reads > 0 || promote {
		h.withRead.Add(acks)
	} else {
		h.alone.Add(acks)
	}
}

// At a trickle, a message's acknowledgement costs no round trip of its
// own: 40 messages delivered one by one, each scheduled once the one
// before was handled. With a mover elsewhere, it goes in the round trip of
// the consumer's next read (the read of the next message announced); with
// the consumer's own process promoting, in the pipeline of the next
// promote call, which also reads the next message for the consumer (no
// read of its own).
func TestAcksRideWithReads(t *testing.T) {
	t.Parallel()
	for _, own := range []bool{false, true} {
		t.Run(fmt.Sprintf("own mover=%v", own), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			var opts []group.Option
			if !own {
				h.startMover()
				opts = append(opts, group.WithoutPromotion())
			}
			rides := new(ackRides)
			rdb := redistest.Client(t)
			rdb.AddHook(roundTrips(rides.see))
			const n = 40
			handled := make(chan string, n)
			rec := newRecorder()
			c := h.consumerOn(rdb, "g", func(ctx context.Context, m *group.Message) error {
				handled <- m.ID
				return rec.ack(ctx, m)
			}, opts...)
			r := start(t, c.Run)
			waitSubscribers(t, h.rdb, 1, h.keys.Main().Arrivals)
			reads0 := rides.reads.Load()

			for i := range n {
				id := fmt.Sprint("m", i)
				// Due a little later: promotion sleeps until it, as
				// at a trickle, rather than finding it due when woken.
				h.schedule([]string{id}, 20*time.Millisecond)
				select {
				case got := <-handled:
					require.Equal(t, id, got)
				case <-time.After(5 * time.Second):
					require.FailNow(t, "not delivered", id)
				}
			}
			waitFor(t, 5*time.Second, func() bool { return c.Counters().Acked == n }, "all acknowledged")
			r.stop(t)
			with, alone, reads := rides.withRead.Load(), rides.alone.Load(), rides.reads.Load()-reads0
			t.Logf("XACKs with a read: %d, alone: %d; reads: %d", with, alone, reads)
			assert.LessOrEqual(t, alone, int64(n/4), "acknowledgements sent alone")
			assert.GreaterOrEqual(t, with, int64(n/2), "most acknowledgements ride with the next read or promote call")
			if own {
				assert.Less(t, reads, int64(n/4), "the promote calls' pipelines read the messages: few reads of the consumer's own")
			} else {
				assert.GreaterOrEqual(t, reads, int64(n), "a read per message")
			}
			assert.Equal(t, n, rec.total(), "each message handled once")
		})
	}
}

// A consumer whose process promotes takes in the promote calls only what
// its idle workers can start: with its one worker busy, the messages that
// come meanwhile are announced as usual, and another consumer of the
// group (another process) handles them.
func TestPromoteCallTakesOnlyForIdleWorkers(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	release := make(chan struct{})
	var mine atomic.Int64
	own := newRecorder()
	a := h.consumer("g", func(ctx context.Context, m *group.Message) error {
		mine.Add(1)
		<-release
		return own.ack(ctx, m)
	}, group.WithWorkers(1), group.WithPrefetch(0), group.WithConsumerName("promoter"))
	ra := start(t, a.Run)
	waitSubscribers(t, h.rdb, 1, h.keys.Main().Arrivals)
	// Alone, the promoting consumer takes the first message: its worker
	// is busy from then on.
	h.schedule([]string{"first"}, 0)
	waitFor(t, 5*time.Second, func() bool { return mine.Load() == 1 }, "the first taken")

	other := newRecorder()
	b := h.consumerOn(redistest.Client(t), "g", other.ack, group.WithoutPromotion(), group.WithConsumerName("other"))
	rb := start(t, b.Run)
	waitSubscribers(t, h.rdb, 2, h.keys.Main().Arrivals)
	h.schedule([]string{"m1", "m2", "m3"}, 20*time.Millisecond)
	waitFor(t, 5*time.Second, func() bool { return other.total() == 3 }, "the other consumer handles what the busy one cannot start")
	assert.EqualValues(t, 1, mine.Load(), "the busy consumer took nothing more")
	close(release)
	waitFor(t, 5*time.Second, func() bool { return own.total()+other.total() == 4 }, "all handled")
	rb.stop(t)
	ra.stop(t)
	assert.Equal(t, 4, own.total()+other.total(), "each message handled once")
	assert.Zero(t, h.pending(h.mainStream(), "g"))
}
