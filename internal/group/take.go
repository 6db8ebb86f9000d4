package group

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream/internal/engine"
)

// taker is a Run's part in its process's promote calls (engine.Taker):
// while the queue's promotion runs in the same process on the same client,
// each promote call of a main lane goes in one pipeline with the
// consumer's queued acknowledgements of that lane's stream and a read of
// the group's new entries for it, as many as its idle workers can start at
// once. The call's announcement names the consumer, which then does not
// read the stream for it: a due entry costs no round trip, and Redis no
// read event, of its own. Every other consumer of the group reads on the
// announcement as usual.
//
// The consumer takes only what it can start at once, so that entries are
// not held here while another consumer of the group has idle workers: a
// read that takes all it asked for marks the stream, and the consumer
// reads the rest as usual. A paused consumer, one under flow limits and,
// on a sharded queue, one that does not own the shard reads nothing in the
// calls (its acknowledgements still ride with them).
type taker struct {
	rd    *reader
	ctx   context.Context // the intake's: entries taken once it ended are handed back
	index map[string]int  // main stream -> stream index (core.streams order)
	dirty *arrivals
	aff   *affinity

	mu      sync.Mutex
	closed  bool
	pending map[*engine.Take]takeState // offered, not handed back yet
	calls   sync.WaitGroup             // offers not handed back yet
}

// maxTakeAcks bounds the acknowledgements one promote call carries (script
// arguments, unpacked onto the Lua stack): the acker sends at 16 queued, so
// more wait only while Redis is slow to answer.
const maxTakeAcks = 1000

// takeState is what an offer reserved: the acknowledgements it took from
// the acker and the room it counted as held.
type takeState struct {
	acks     []ackReq
	reserved int64
}

func newTaker(ctx context.Context, rd *reader, dirty *arrivals, aff *affinity) *taker {
	c := rd.r.c
	t := &taker{rd: rd, ctx: ctx, index: make(map[string]int, len(c.shards)), dirty: dirty, aff: aff, pending: map[*engine.Take]takeState{}}
	for _, sh := range c.shards {
		t.index[sh.main.Stream] = 2 * sh.i
	}
	return t
}

// Offer asks the next promote call of the lane of stream to send the
// acknowledgements queued for it and, when read, to read what the idle
// workers can start (reserved as held until Took).
func (t *taker) Offer(stream string, read bool) *engine.Take {
	i, ok := t.index[stream]
	if !ok {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	rd, c := t.rd, t.rd.r.c
	rd.roomMu.Lock()
	defer rd.roomMu.Unlock()
	acks := rd.settle.ack.take(nil, func(s string) bool { return s == stream })
	if len(acks) > maxTakeAcks {
		rd.settle.ack.requeue(acks[maxTakeAcks:]) // for the next call, a read or the acker
		acks = acks[:maxTakeAcks]
	}
	var n int64
	if read {
		n = t.room(i / 2)
	}
	if n == 0 && len(acks) == 0 {
		return nil
	}
	rd.held.Add(n)
	tk := &engine.Take{Stream: stream, Group: c.group, Consumer: c.cfg.consumer, Count: n}
	if len(acks) > 0 {
		// One stream's: those of handlers that succeeded first.
		g := groupAcks(acks).groups[0]
		tk.Acks = make([]string, 0, len(acks))
		for _, qs := range [][]ackReq{g.handled, g.dropped} {
			for _, q := range qs {
				tk.Acks = append(tk.Acks, q.id)
			}
		}
		tk.AckKeys, tk.AckArgs = g.call(c, time.Now())
	}
	t.pending[tk] = takeState{acks: acks, reserved: n}
	t.calls.Add(1)
	return tk
}

// room returns how many entries of shard the consumer reads in a promote
// call now: what its idle workers can start, less a read of its own in
// flight (call with rd.roomMu held), none while it is paused,
// under flow limits, or (a sharded queue) not the shard's owner.
func (t *taker) room(shard int) int64 {
	rd := t.rd
	if rd.lim != nil || rd.r.pause.paused() || t.ctx.Err() != nil || !t.aff.owns(shard) {
		return 0
	}
	busy := rd.held.Load() + rd.reading.Load()
	return max(0, min(rd.capacity()-busy, rd.workers-busy))
}

// Took takes a call's outcome: it settles the acknowledgements (or queues
// them again when their outcome is not known), queues the entries read
// for the workers, and marks the stream to be read when the read failed
// or took all it asked for.
func (t *taker) Took(tk *engine.Take) {
	t.mu.Lock()
	st := t.pending[tk]
	delete(t.pending, tk)
	t.mu.Unlock()
	defer t.calls.Done()
	rd := t.rd
	i := t.index[tk.Stream]
	if len(st.acks) > 0 {
		t.settleAcks(tk, st.acks)
	}
	if st.reserved == 0 {
		return
	}
	// The room reserved becomes the entries' in one step: counted out
	// first, it would let a read take that room meanwhile, and the
	// consumer would hold more than its workers and read-ahead.
	var fs []flight
	if len(tk.Entries) > 0 {
		rd.act.touch(i) // pending now: the reclaimer looks at the stream
		fs = rd.hold(tk.Stream, tk.Entries, nil).flights
	}
	if rd.roomy(rd.capacity() - rd.held.Add(int64(len(fs))-st.reserved)) {
		rd.roomFreed()
	}
	if len(fs) > 0 {
		rd.push(t.ctx, fs)
	}
	if tk.Count > 0 && (tk.ReadErr != nil || int64(len(tk.Entries)) >= tk.Count) {
		// Failed (a missing group is recreated by the reader's read; a
		// lost reply leaves what it read pending, reclaimed later), or
		// full: the reader reads the stream.
		t.dirty.mark(i)
	}
}

// settleAcks settles acknowledgements a promote call carried: counted once
// XACK went through, logged when Redis refused it, queued again when the
// outcome is not known (sending them twice is harmless).
func (t *taker) settleAcks(tk *engine.Take, acks []ackReq) {
	a := t.rd.settle.ack
	if !tk.AckSent {
		a.requeue(acks)
		return
	}
	k := groupAcks(acks)
	cmd := redis.NewCmd(t.ctx)
	if tk.AckErr != nil {
		cmd.SetErr(tk.AckErr)
	} else {
		cmd.SetVal(tk.Acked)
	}
	k.cmds = []*redis.Cmd{cmd}
	a.settled(t.rd.r.opCtx, k)
}

// close ends the taker's part: no offer is made after it returns, and
// every offered call has been handed back.
func (t *taker) close() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	t.calls.Wait()
}
