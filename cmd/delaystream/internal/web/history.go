package web

import (
	"sync"
	"time"

	"github.com/delaystream/delaystream/admin"
)

// Sample is one reading of a queue's figures, taken by the server's
// sampler (see [Server.Run]).
type Sample struct {
	At           time.Time `json:"at"`            // the Redis clock when read
	Waiting      int64     `json:"waiting"`       // scheduled, not yet promoted
	Overdue      int64     `json:"overdue"`       // waiting past their due time
	StreamLength int64     `json:"stream_length"` // entries in the queue stream(s)
	Pending      int64     `json:"pending"`       // pending entries summed over the groups
	DeadLetters  int64     `json:"dead_letters"`  // dead letters summed over the groups
}

// History is the figures of one queue over time, oldest first, as the JSON
// endpoint serves it.
type History struct {
	Prefix     string   `json:"prefix"`
	Queue      string   `json:"queue"`
	IntervalMs int64    `json:"interval_ms"` // the sampling interval
	Samples    []Sample `json:"samples"`     // oldest first; empty until the first sample
}

func sampleOf(st admin.QueueReport) Sample {
	s := Sample{At: st.Now, Waiting: st.Waiting, Overdue: st.Overdue, StreamLength: st.StreamLength}
	if s.At.IsZero() {
		s.At = time.Now()
	}
	for _, g := range st.Groups {
		s.Pending += g.Pending
		s.DeadLetters += g.DeadLetters
	}
	return s
}

// ring is a bounded buffer of samples: once full, each new sample replaces
// the oldest.
type ring struct {
	buf  []Sample
	next int  // where the next sample goes
	full bool // buf has wrapped
	seen bool // sampled in the current round (see history.endRound)
}

func newRing(size int) *ring { return &ring{buf: make([]Sample, size)} }

func (r *ring) add(s Sample) {
	r.buf[r.next] = s
	r.next++
	if r.next == len(r.buf) {
		r.next, r.full = 0, true
	}
}

// samples returns a copy, oldest first.
func (r *ring) samples() []Sample {
	if !r.full {
		return append([]Sample(nil), r.buf[:r.next]...)
	}
	out := make([]Sample, 0, len(r.buf))
	out = append(out, r.buf[r.next:]...)
	return append(out, r.buf[:r.next]...)
}

// historyKey names one queue under one prefix.
type historyKey struct{ prefix, queue string }

// history holds a ring per queue, at most maxQueues of them: a queue seen
// when that many are tracked is not recorded, and a queue that disappears
// (not seen in a round) is forgotten, so memory stays bounded.
type history struct {
	mu        sync.Mutex
	size      int // samples per queue
	maxQueues int
	rings     map[historyKey]*ring
}

func newHistory(size, maxQueues int) *history {
	return &history{size: size, maxQueues: maxQueues, rings: map[historyKey]*ring{}}
}

// add records a sample of queue under prefix and marks it seen.
func (h *history) add(prefix, queue string, s Sample) {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := historyKey{prefix, queue}
	r := h.rings[k]
	if r == nil {
		if len(h.rings) >= h.maxQueues {
			return
		}
		r = newRing(h.size)
		h.rings[k] = r
	}
	r.add(s)
	r.seen = true
}

// endRound forgets the queues of prefix not seen since the last round
// (deleted queues), and clears the marks.
func (h *history) endRound(prefix string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, r := range h.rings {
		if k.prefix != prefix {
			continue
		}
		if !r.seen {
			delete(h.rings, k)
			continue
		}
		r.seen = false
	}
}

// get returns the samples of queue under prefix, oldest first.
func (h *history) get(prefix, queue string) []Sample {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r := h.rings[historyKey{prefix, queue}]; r != nil {
		return r.samples()
	}
	return []Sample{}
}
