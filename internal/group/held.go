package group

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// holdings is the set of entries a consumer holds (read or reclaimed, not
// yet settled), by batch. The reader adds to it, settling removes from it,
// extension and the drain timeout's hand-back walk it.
type holdings struct {
	mu      sync.Mutex
	batches map[*batch]struct{} // what this consumer holds, by read or reclaim batch; guarded by mu
}

// add registers a batch as held.
func (h *holdings) add(b *batch) {
	h.mu.Lock()
	h.batches[b] = struct{}{}
	h.mu.Unlock()
}

// remove drops a batch whose entries are all settled.
func (h *holdings) remove(b *batch) {
	h.mu.Lock()
	delete(h.batches, b)
	h.mu.Unlock()
}

// drop returns msgs, entries of stream claimed by this consumer, without
// those it holds already (not settled, not handed back): a claim of an
// entry this consumer holds (its extension came late, on a loaded
// machine) only reset its idle time, and queuing it again would run its
// handler twice in one process. (One whose handler ended while the claim
// was on its way is not held any more, and is queued again: as after a
// claim by another consumer, the lapsed hold makes it at least once.)
// msgs is filtered in place.
func (h *holdings) drop(stream string, msgs []redis.XMessage) []redis.XMessage {
	h.mu.Lock()
	var mine map[string]bool
	for b := range h.batches {
		if b.stream != stream {
			continue
		}
		for i := range b.flights {
			if f := &b.flights[i]; !f.settled.Load() && !f.handedBack.Load() {
				if mine == nil {
					mine = map[string]bool{}
				}
				mine[f.x.ID] = true
			}
		}
	}
	h.mu.Unlock()
	if mine == nil {
		return msgs
	}
	return slices.DeleteFunc(msgs, func(x redis.XMessage) bool { return mine[x.ID] })
}

// batch is the entries of one read or reclaim of one stream, allocated
// together and held by this consumer until each is settled. Holding is
// tracked per batch, not per entry: the workers take the consumer's lock
// once per batch, not once per entry.
type batch struct {
	stream  string
	flights []flight
	left    atomic.Int32 // flights not yet settled; the batch is dropped at 0
}

// flight is an entry this consumer holds: read or reclaimed, not yet settled.
type flight struct {
	b          *batch
	x          redis.XMessage // the entry as read
	deliveries int64
	since      time.Time // when this consumer got it or last extended it; guarded by holdings.mu
	mu         sync.Mutex
	cancel     context.CancelCauseFunc // set when the handler starts; guarded by mu
	handedBack atomic.Bool             // handed back to the group (see takeBack)
	settled    atomic.Bool             // handled or handed back: no longer held
}

// takeBack claims the hand-back of f: true for the first caller only, so
// an entry queued when the drain timeout hands everything back is not
// handed back (and counted) twice.
func (f *flight) takeBack() bool { return f.handedBack.CompareAndSwap(false, true) }
