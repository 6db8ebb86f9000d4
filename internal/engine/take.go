package engine

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// A Taker is a consumer group's consumer in the engine's process that
// takes part in the engine's promote calls (Join): each call of a lane
// sends the group's acknowledgements of the lane's stream, and a call that
// appends entries reads the group's new ones for the consumer, so that
// the consumer needs no read (and no acknowledgement call) of its own for
// them. Its methods are called from the lane's goroutine, one call at a
// time per lane, and must not block.
type Taker interface {
	// Offer returns what the consumer asks of the next promote call of
	// the lane whose stream is stream, or nil for nothing.
	Offer(stream string) *Take
	// Took hands back an offered Take once its call ended, filled in.
	Took(t *Take)
}

// A Take is what one promote call does for a Taker: Stream, Group,
// Consumer, Count and Acks are the Taker's; the rest the engine fills in.
type Take struct {
	Stream   string   // the lane's stream (Offer's argument)
	Group    string   // the consumer group
	Consumer string   // the consumer the entries are read for
	Count    int64    // most entries to read; 0 = none (acknowledgements only)
	Acks     []string // ids of Stream's entries to acknowledge for Group

	// Sent reports whether the call reached Redis with the take: false
	// when it failed before a reply (then whether its acknowledgements
	// were sent is not known, and entries it may have read are pending
	// for the consumer until reclaimed) or was not made.
	Sent     bool
	Acked    int64            // XACK's reply
	AckErr   error            // XACK's failure (the call itself went on)
	Entries  []redis.XMessage // the entries read for Consumer
	ReadErr  error            // XREADGROUP's failure (NOGROUP: the group is missing)
	CaughtUp bool             // the read left nothing new for Group: its announcement says so
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

// CaughtUpPayload returns the announcement a promote call publishes for
// shard when its read for group left nothing new for the group
// (promote.lua); plain is the payload of any other announcement.
func CaughtUpPayload(shard int, group string) string {
	return strconv.Itoa(shard) + "\n" + group
}

// takeArgs returns the promote script's ARGV[8..] for t.
func takeArgs(t *Take) []any {
	args := make([]any, 0, 3+len(t.Acks))
	args = append(args, t.Group, t.Consumer, t.Count)
	for _, id := range t.Acks {
		args = append(args, id)
	}
	return args
}

// fill sets t from the promote reply's two items for it: XACK's reply (an
// integer, or an error's text) and the read's (0, an error's text, or the
// entries). An item of another shape is a reply this engine cannot read.
func (t *Take) fill(acked, read any) error {
	t.Sent = true
	switch v := acked.(type) {
	case int64:
		t.Acked = v
	case string:
		t.AckErr = replyError(v)
	default:
		return fmt.Errorf("promote reply: acknowledgements: unexpected %T", acked)
	}
	switch v := read.(type) {
	case int64:
	case string:
		t.ReadErr = replyError(v)
	case []any:
		es, err := parseEntries(v)
		if err != nil {
			return err
		}
		t.Entries = es
		t.CaughtUp = int64(len(es)) < t.Count
	default:
		return fmt.Errorf("promote reply: read: unexpected %T", read)
	}
	return nil
}

// parseEntries converts stream entries as a script returns them,
// {{id, {field, value, ...}}, ...}, into messages as go-redis gives them.
func parseEntries(v []any) ([]redis.XMessage, error) {
	es := make([]redis.XMessage, len(v))
	for i, x := range v {
		pair, ok := x.([]any)
		if !ok || len(pair) != 2 {
			return nil, errors.New("promote reply: malformed entry")
		}
		id, ok := pair[0].(string)
		fields, ok2 := pair[1].([]any)
		if !ok || !ok2 || len(fields)%2 != 0 {
			return nil, errors.New("promote reply: malformed entry")
		}
		vals := make(map[string]any, len(fields)/2)
		for k := 0; k < len(fields); k += 2 {
			f, ok := fields[k].(string)
			if !ok {
				return nil, errors.New("promote reply: malformed entry field")
			}
			vals[f] = fields[k+1]
		}
		es[i] = redis.XMessage{ID: id, Values: vals}
	}
	return es, nil
}

// replyError is an error reply a script passed on as text: a redis.Error,
// so that redis.HasErrorPrefix and heal.Transient classify it like the
// reply itself.
type replyError string

func (e replyError) Error() string { return string(e) }

// RedisError marks replyError as an error reply (redis.Error).
func (replyError) RedisError() {}
