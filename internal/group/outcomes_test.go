package group_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/internal/group"
	"github.com/delaystream/delaystream/internal/wire"
)

// What each handler outcome does to the message, for one group.
func TestHandlerOutcomes(t *testing.T) {
	t.Parallel()
	fast := []group.Option{
		group.WithBackoff(group.ConstantBackoff(20 * time.Millisecond)),
		group.WithVisibilityTimeout(200 * time.Millisecond), group.WithReclaimInterval(20 * time.Millisecond),
	}

	t.Run("attempts exhausted", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.startMover()
		rec := newRecorder()
		c := h.consumer("g", func(_ context.Context, m *group.Message) error {
			rec.add(m)
			return fmt.Errorf("boom on attempt %d", m.Attempt)
		}, append(fast, group.WithMaxAttempts(3))...)
		r := start(t, c.Run)
		h.schedule([]string{"doomed"}, 0)
		waitFor(t, 10*time.Second, func() bool { return c.Counters().DeadLettered >= 1 })
		r.stop(t)

		ds := rec.get("doomed")
		require.Len(t, ds, 3)
		for i, d := range ds {
			assert.Equal(t, i+1, d.Attempt)
		}
		dls := deadLetters(t, c.DeadLetters())
		require.Len(t, dls, 1)
		dl := dls[0]
		assert.Equal(t, group.ReasonAttempts, dl.Reason)
		assert.Equal(t, 3, dl.Attempt)
		assert.Equal(t, "boom on attempt 3", dl.LastError)
		assert.EqualValues(t, 1, dl.Deliveries)
		assert.True(t, dl.Decoded)
		assert.Equal(t, "doomed", dl.Envelope.ID)
		assert.Equal(t, 3, dl.Envelope.Attempt)
		assert.Equal(t, []byte("doomed"), dl.Envelope.Payload)
		assert.Equal(t, h.retryStream("g"), dl.Source, "the last attempt came from the retry lane")
		assert.Equal(t, ds[2].EntryID, dl.SourceID)
		assert.False(t, dl.At().Before(ds[2].Due), "dead-lettered after the last attempt was due")
		assert.Equal(t, group.Counters{Delivered: 3, Failed: 3, Retried: 2, DeadLettered: 1}, c.Counters())
		assert.Zero(t, h.pending(h.mainStream(), "g")+h.pending(h.retryStream("g"), "g"))
	})

	t.Run("DeadLetter", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.startMover()
		rec := newRecorder()
		var hook atomic.Value
		c := h.consumer("g", func(_ context.Context, m *group.Message) error {
			rec.add(m)
			return group.DeadLetter(errors.New("bad order"))
		}, append(fast, group.WithHooks(group.Hooks{OnDeadLettered: func(m *group.Message, reason string) {
			hook.Store(m.ID + ": " + reason)
		}}))...)
		r := start(t, c.Run)
		h.schedule([]string{"now"}, 0)
		waitFor(t, 10*time.Second, func() bool { return c.Counters().DeadLettered >= 1 })
		r.stop(t)

		require.Len(t, rec.get("now"), 1, "dead-lettered at once, no retry")
		dls := deadLetters(t, c.DeadLetters())
		require.Len(t, dls, 1)
		assert.Equal(t, group.ReasonHandler, dls[0].Reason)
		assert.Equal(t, 1, dls[0].Attempt)
		assert.Equal(t, "dead-letter: bad order", dls[0].LastError)
		assert.Equal(t, h.mainStream(), dls[0].Source)
		assert.Equal(t, "now: "+group.ReasonHandler, hook.Load())
		assert.Equal(t, group.Counters{Delivered: 1, Failed: 1, DeadLettered: 1}, c.Counters())
		assert.Zero(t, h.pending(h.mainStream(), "g"))
	})

	t.Run("Drop", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.startMover()
		rec := newRecorder()
		var dropped atomic.Int64
		c := h.consumer("g", func(_ context.Context, m *group.Message) error {
			rec.add(m)
			return group.Drop(errors.New("order already cancelled"))
		}, append(fast, group.WithHooks(group.Hooks{OnDropped: func(m *group.Message, err error) {
			var de *group.DropError
			if m.ID == "gone" && errors.As(err, &de) {
				dropped.Add(1)
			}
		}}))...)
		r := start(t, c.Run)
		h.schedule([]string{"gone"}, 0)
		waitFor(t, 10*time.Second, func() bool { return c.Counters().Dropped >= 1 })
		// Acknowledged, not retried, not dead-lettered: nothing is left from
		// which it could ever be delivered again.
		waitFor(t, 5*time.Second, func() bool { return h.pending(h.mainStream(), "g") == 0 })
		st, err := c.Stats(context.Background())
		require.NoError(t, err)
		r.stop(t)

		assert.Zero(t, st.Lag)
		assert.Zero(t, st.RetryWaiting)
		assert.Zero(t, st.DeadLetters)
		assert.Len(t, rec.get("gone"), 1)
		assert.EqualValues(t, 1, dropped.Load(), "OnDropped")
		assert.Equal(t, group.Counters{Delivered: 1, Dropped: 1}, c.Counters())
	})

	t.Run("panic", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.startMover()
		rec := newRecorder()
		c := h.consumer("g", func(_ context.Context, m *group.Message) error {
			rec.add(m)
			if m.Attempt == 1 {
				panic("nil map somewhere")
			}
			return nil
		}, fast...)
		r := start(t, c.Run)
		h.schedule([]string{"p"}, 0)
		waitFor(t, 10*time.Second, func() bool { return c.Counters().Acked >= 1 })
		r.stop(t)

		ds := rec.get("p")
		require.Len(t, ds, 2)
		assert.Equal(t, 1, ds[0].Attempt)
		assert.Equal(t, 2, ds[1].Attempt, "a panic is a failed attempt, retried")
		assert.Equal(t, group.Counters{Delivered: 2, Acked: 1, Failed: 1, Retried: 1, Panics: 1}, c.Counters())
	})

	t.Run("undecodable entries", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		rec := newRecorder()
		var undecodable atomic.Int64
		c := h.consumer("g", rec.ack, append(fast, group.WithHooks(group.Hooks{OnDeadLettered: func(m *group.Message, reason string) {
			if m == nil && reason == group.ReasonUndecodable {
				undecodable.Add(1)
			}
		}}))...)
		key := h.mainStream()
		garbage := h.addEntry(key, "i", "bad1", "d", "123", "e", "garbage")
		missing := h.addEntry(key, "x", "y")
		badDue := h.addEntry(key, "i", "bad3", "d", "soon", "e", "\xd5\x01")
		// Packed entries: one whose envelope is corrupt, one that does not split.
		badPacked := h.addEntry(key, "d", "123", "p", "\x01ABCDEFGHJKMNPQRS\xd5\x01\x80")
		short := h.addEntry(key, "d", "123", "p", "\x01short")
		r := start(t, c.Run)
		// Later good messages are still handled.
		h.startMover()
		h.schedule([]string{"good1", "good2"}, 0)
		waitFor(t, 10*time.Second, func() bool { return rec.total() >= 2 && c.Counters().DeadLettered >= 5 })
		r.stop(t)

		assert.Len(t, rec.get("good1"), 1)
		assert.Len(t, rec.get("good2"), 1)
		assert.Equal(t, 2, rec.total(), "undecodable entries never reach the handler")
		dls := deadLetters(t, c.DeadLetters())
		require.Len(t, dls, 5)
		bySource := map[string]group.DeadEntry{}
		for _, d := range dls {
			assert.Equal(t, group.ReasonUndecodable, d.Reason)
			assert.False(t, d.Decoded)
			assert.Equal(t, key, d.Source)
			assert.EqualValues(t, 1, d.Deliveries)
			assert.NotEmpty(t, d.LastError)
			bySource[d.SourceID] = d
		}
		require.Contains(t, bySource, garbage)
		require.Contains(t, bySource, missing)
		require.Contains(t, bySource, badDue)
		assert.Equal(t, "bad1", bySource[garbage].Envelope.ID)
		assert.Equal(t, []byte("garbage"), bySource[garbage].Raw, "the bytes are kept for inspection")
		assert.Contains(t, bySource[garbage].LastError, "envelope")
		assert.Contains(t, bySource[missing].LastError, `field "d" missing`)
		require.Contains(t, bySource, badPacked)
		assert.Equal(t, wire.GeneratedID(123, "ABCDEFGHJKMNPQRS"), bySource[badPacked].Envelope.ID, "split into id and envelope")
		assert.Equal(t, []byte("\xd5\x01\x80"), bySource[badPacked].Raw)
		require.Contains(t, bySource, short)
		assert.Equal(t, []byte("\x01short"), bySource[short].Raw, "kept as found")
		assert.Contains(t, bySource[short].LastError, "not a packed member")
		assert.Contains(t, bySource[badDue].LastError, `"soon"`)
		assert.EqualValues(t, 5, undecodable.Load(), "OnDeadLettered(nil, ReasonUndecodable)")
		x := c.Counters()
		assert.EqualValues(t, 7, x.Delivered)
		assert.EqualValues(t, 2, x.Acked)
		assert.EqualValues(t, 5, x.DeadLettered)
		assert.Zero(t, h.pending(key, "g"))
	})
}
