package engine

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// A Taker is a consumer group's consumer in the engine's process, on the
// engine's client, that takes part in the engine's promote calls (Join):
// each call of a lane goes in one pipeline with the consumer's
// acknowledgements of the lane's stream before it and, when the call is
// expected to append entries (expects), a read of the group's new entries
// for the consumer after it, and its announcement then names the
// consumer, which does not read the stream for it. Its methods are called
// from the lane's goroutine, one call at a time per lane, and must not
// block.
type Taker interface {
	// Offer returns what the consumer asks of the next promote call of
	// the lane whose stream is stream, or nil for nothing; read reports
	// whether the call is expected to append entries (without it, a Take
	// carries acknowledgements only: Count 0).
	Offer(stream string, read bool) *Take
	// Took hands back an offered Take once its call ended, filled in.
	Took(t *Take)
}

// A Take is what one promote call does for a Taker: Stream, Group,
// Consumer, Count and Acks are the Taker's; the rest the engine fills in.
// The acknowledgements (XACK) and the read (XREADGROUP, after the promote
// script) go in the call's pipeline: one round trip, and one read event
// for Redis.
type Take struct {
	Stream   string   // the lane's stream (Offer's argument)
	Group    string   // the consumer group
	Consumer string   // the consumer the entries are read for
	Count    int64    // most entries to read; 0 = none (acknowledgements only)
	Acks     []string // ids of Stream's entries to acknowledge for Group
	// AckKeys and AckArgs are the Ack script's KEYS and ARGV for Acks
	// (scripts/ack.lua: the history keys, the handled records); nil: the
	// engine acknowledges Acks as handled, with Stream alone, nothing
	// counted or recorded.
	AckKeys []string
	AckArgs []any

	// AckSent reports whether the acknowledgements' outcome is known:
	// Acked, or AckErr when Redis refused them; false when the call
	// failed before a reply (send them again: XACK twice is harmless).
	AckSent bool
	Acked   int64
	AckErr  error
	// Entries are the entries read for Consumer; ReadErr the read's
	// failure (NOGROUP: the group is missing; a network error: entries it
	// may have read are pending for the consumer until reclaimed).
	Entries []redis.XMessage
	ReadErr error
}

// Join offers t to take part in the engine's promote calls. One Taker
// takes part at a time: the first that joined, then the next when it
// leaves (Leave). The engine calls it from the next call on.
func (m *Engine) Join(t Taker) {
	m.takersMu.Lock()
	defer m.takersMu.Unlock()
	m.takers = append(m.takers, t)
	if len(m.takers) == 1 {
		m.setTaker(t)
	}
}

// Leave withdraws t (Join). A call it takes part in may still be running:
// its Took comes when the call ends.
func (m *Engine) Leave(t Taker) {
	m.takersMu.Lock()
	defer m.takersMu.Unlock()
	i := slices.Index(m.takers, t)
	if i < 0 {
		return
	}
	m.takers = slices.Delete(m.takers, i, i+1)
	if i > 0 {
		return
	}
	if len(m.takers) > 0 {
		m.setTaker(m.takers[0])
	} else {
		m.setTaker(nil)
	}
}

// setTaker makes t the Taker of the engine's promote calls (nil: none).
func (m *Engine) setTaker(t Taker) {
	if t == nil {
		m.taker.Store(nil)
		return
	}
	m.taker.Store(&takerRef{t: t})
}

// takerRef boxes a Taker for an atomic.Pointer.
type takerRef struct{ t Taker }

// takerOf returns the Taker set, nil if none.
func takerOf(p *atomic.Pointer[takerRef]) Taker {
	if r := p.Load(); r != nil {
		return r.t
	}
	return nil
}

// ackCall returns the Ack script's KEYS and ARGV for t's acknowledgements.
func (t *Take) ackCall() ([]string, []any) {
	if t.AckKeys != nil {
		return t.AckKeys, t.AckArgs
	}
	args := make([]any, 0, 3+len(t.Acks))
	args = append(args, t.Group, len(t.Acks), len(t.Acks))
	for _, id := range t.Acks {
		args = append(args, id)
	}
	return []string{t.Stream}, args
}

// fill sets t from its commands' outcomes (nil: not sent).
func (t *Take) fill(ack *redis.Cmd, read *redis.XStreamSliceCmd) {
	if ack != nil {
		n, err := ack.Int64()
		switch {
		case err == nil:
			t.AckSent, t.Acked = true, n
		case isReply(err):
			t.AckSent, t.AckErr = true, err
		}
	}
	if read != nil {
		res, err := read.Result()
		if errors.Is(err, redis.Nil) {
			err = nil
		}
		t.ReadErr = err
		for _, s := range res {
			t.Entries = append(t.Entries, s.Messages...)
		}
	}
}

// isReply reports whether err is an error reply from Redis (the command
// ran and was refused), not a failure to reach it.
func isReply(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}
