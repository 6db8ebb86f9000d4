package group_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/internal/group"
	"github.com/delaystream/delaystream/internal/margin"
	"github.com/delaystream/delaystream/internal/redistest"
	"github.com/delaystream/delaystream/internal/scripts"
)

// ackRides counts the Ack script calls sent in a round trip with an
// XREADGROUP or a promote call (EVALSHA) and those sent alone, the IDs they
// acknowledge, and the consumer's own reads: XREADGROUPs not in a promote
// call's pipeline. It keeps when each round trip with a read or promote
// call returned.
type ackRides struct {
	withRead, alone, reads, ids atomic.Int64

	mu    sync.Mutex
	rides []time.Time // round trips with a read or a promote call
}

func (h *ackRides) see(cmds []redis.Cmder) {
	at := time.Now()
	acks, ids, reads, promote := int64(0), int64(0), int64(0), false
	for _, c := range cmds {
		switch n := ackIDs(c); {
		case n >= 0:
			acks++
			ids += int64(n)
		case c.Name() == "xreadgroup":
			reads++
		case c.Name() == "evalsha", c.Name() == "eval":
			promote = true
		}
	}
	h.ids.Add(ids)
	if !promote {
		h.reads.Add(reads)
	}
	if reads > 0 || promote {
		h.withRead.Add(acks)
		h.mu.Lock()
		h.rides = append(h.rides, at)
		h.mu.Unlock()
	} else {
		h.alone.Add(acks)
	}
}

// ackIDs returns how many entries c acknowledges when it is a call of the
// Ack script, else -1.
func ackIDs(c redis.Cmder) int {
	args := c.Args()
	if len(args) < 3 {
		return -1
	}
	switch c.Name() {
	case "evalsha":
		if args[1] != scripts.Ack.Hash() {
			return -1
		}
	case "eval":
		sum := sha1.Sum([]byte(fmt.Sprint(args[1])))
		if hex.EncodeToString(sum[:]) != scripts.Ack.Hash() {
			return -1
		}
	default:
		return -1
	}
	// EVALSHA sha numkeys keys... group handled n ids...
	keys, _ := strconv.Atoi(fmt.Sprint(args[2]))
	if len(args) < 3+keys+3 {
		return -1
	}
	n, _ := strconv.Atoi(fmt.Sprint(args[3+keys+2]))
	return n
}

// gaps returns how many times, after since, no read or promote call came
// for at least d.
func (h *ackRides) gaps(since time.Time, d time.Duration) int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	n, prev := int64(0), since
	for _, at := range h.rides {
		if at.Before(since) {
			continue
		}
		if at.Sub(prev) >= d {
			n++
		}
		prev = at
	}
	return n
}

// At a trickle, a message's acknowledgement costs no round trip of its
// own: 40 messages delivered one by one, each scheduled once the one
// before was handled. With a mover elsewhere, it goes in the round trip of
// the consumer's next read (the read of the next message announced); with
// the consumer's own process promoting, in the pipeline of the next
// promote call, which also reads the next message for the consumer (no
// read of its own).
//
// An acknowledgement waits for a read at most the ack delay, and then goes
// alone: how many do at the default delay depends on how the machine
// schedules the next read, a cost the benchmark measures (commands per
// delivered message). Here the delay is long beside the time from one
// message to the next, so that only the last acknowledgement, which no
// read follows, goes alone, and one more for each time no read came for
// half the delay (a stalled machine), whatever the load.
func TestAcksRideWithReads(t *testing.T) {
	t.Parallel()
	const ackDelay = 2 * time.Second
	for _, own := range []bool{false, true} {
		t.Run(fmt.Sprintf("own mover=%v", own), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			opts := []group.Option{group.WithVisibilityTimeout(4 * ackDelay), group.WithAckDelay(ackDelay)}
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
			begin := time.Now()

			for i := range n {
				id := fmt.Sprint("m", i)
				// Due a little later: promotion sleeps until it, as
				// at a trickle, rather than finding it due when woken.
				h.schedule([]string{id}, 20*time.Millisecond)
				select {
				case got := <-handled:
					require.Equal(t, id, got)
				case <-time.After(10 * time.Second):
					require.FailNow(t, "not delivered", id)
				}
			}
			waitFor(t, ackDelay+10*time.Second, func() bool { return c.Counters().Acked == n }, "all acknowledged")
			r.stop(t)
			with, alone, reads := rides.withRead.Load(), rides.alone.Load(), rides.reads.Load()-reads0
			stalls := rides.gaps(begin, ackDelay/2)
			t.Logf("XACKs with a read: %d, alone: %d; reads: %d; stalls of %s without a read: %d", with, alone, reads, ackDelay/2, stalls)
			assert.EqualValues(t, n, rides.ids.Load(), "each acknowledgement sent once")
			// Exact by design (the bound follows the stalls seen), so no
			// margin to record.
			assert.LessOrEqual(t, alone, 1+stalls, "acknowledgements sent alone: the last, and one per stall")
			assert.GreaterOrEqual(t, with, int64(n/2), "most acknowledgements ride with the next read or promote call")
			if own {
				// The promote call reads for the consumer whenever a
				// worker is idle (one of eight is busy at most): its own
				// reads are the first and the polls.
				margin.Less(t, "own reads", reads, int64(n/4), "the promote calls' pipelines read the messages: few reads of the consumer's own")
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
