package group

import (
	"sync/atomic"
	"time"
)

// counters are a Consumer's running totals, updated by its roles.
type counters struct {
	delivered, acked, failed, retried, deadLettered, deadDropped, dropped atomic.Uint64
	reclaimed, deletedPending, handedBack, lost, panics, expired          atomic.Uint64
	memoryRefused                                                         atomic.Uint64
	limitWait                                                             atomic.Int64 // ns
}

// Counters are this Consumer's running totals since it was created.
type Counters struct {
	Delivered           uint64 // entries handed to the decoder and handler (incl. reclaimed ones)
	Acked               uint64 // handler succeeded and the XACK went through
	Failed              uint64 // handler returned an error or panicked
	Retried             uint64 // failures scheduled in the retry lane
	DeadLettered        uint64 // entries appended to the dead letters (all reasons)
	DeadLettersDropped  uint64 // old dead letters trimmed by the dead-letter cap
	Dropped             uint64 // handler returned a Drop error: acknowledged without retry
	Reclaimed           uint64 // entries taken over from other consumers
	DeletedWhilePending uint64 // pending entries found deleted from the stream (recorded as dead letters)
	HandedBack          uint64 // entries handed back to the group: at shutdown, at a pause, or claimed without a flow permit
	OwnershipLost       uint64 // handlers whose entry another consumer took over
	Panics              uint64 // handler panics (also counted in Failed)
	Expired             uint64 // messages past their deadline, dead-lettered unhandled (also counted in DeadLettered)
	MemoryRefused       uint64 // settling writes (retries, dead letters) Redis refused for memory, each tried again after a pause
	// LimitWait is how long the reader waited for the group's flow limits
	// (concurrency slots, rate permits) with workers free.
	LimitWait time.Duration
}

// load returns a snapshot of the totals.
func (x *counters) load() Counters {
	return Counters{
		Delivered: x.delivered.Load(), Acked: x.acked.Load(), Failed: x.failed.Load(),
		Retried: x.retried.Load(), DeadLettered: x.deadLettered.Load(), DeadLettersDropped: x.deadDropped.Load(),
		Dropped: x.dropped.Load(), Reclaimed: x.reclaimed.Load(), DeletedWhilePending: x.deletedPending.Load(),
		HandedBack: x.handedBack.Load(), OwnershipLost: x.lost.Load(), Panics: x.panics.Load(),
		Expired: x.expired.Load(), MemoryRefused: x.memoryRefused.Load(), LimitWait: time.Duration(x.limitWait.Load()),
	}
}
