package group_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/internal/delay"
	"github.com/delaystream/delaystream/internal/group"
)

// Messages whose deadline passed while no consumer ran are dead-lettered
// with the reason "expired", counted, never handed to the handler, and can
// be redriven (then delivered: redriving removes the deadline). The
// deadline comes from the message (plain ids) or from the queue's
// WithExpireAfter default (generated ids, packed members); messages with a
// later deadline are handled as usual. A message retried past its deadline
// expires on its next delivery.
func TestExpiredMessagesAreDeadLettered(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarness(t)
	short, err := delay.New(h.rdb, h.queue, delay.WithPrefix(h.prefix), delay.WithExpireAfter(300*time.Millisecond))
	require.NoError(t, err)

	now := time.Now()
	var items []delay.Item
	for i := range 10 {
		items = append(items,
			delay.Item{Message: delay.Message{ID: fmt.Sprint("soon-", i), Payload: []byte("x"), Deadline: now.Add(300 * time.Millisecond)}, When: delay.After(0)},
			delay.Item{Message: delay.Message{ID: fmt.Sprint("later-", i), Payload: []byte("x"), Deadline: now.Add(time.Hour)}, When: delay.After(0)})
	}
	_, err = h.q.ScheduleBatch(ctx, items)
	require.NoError(t, err)
	var generated []string
	for range 10 {
		r, err := short.Schedule(ctx, delay.Message{Payload: []byte("g")}, delay.After(0))
		require.NoError(t, err)
		generated = append(generated, r.ID)
	}
	// Every short deadline is at most 300 ms after now (the producer's
	// clock, which the consumer checks against); the consumer starts once
	// they all passed.
	passed := time.Now().Add(300 * time.Millisecond)
	h.startMover()
	waitFor(t, 5*time.Second, func() bool { return time.Now().After(passed) }, "the short deadlines passed")

	rec := newRecorder()
	var mu sync.Mutex
	var expiredSeen []string
	c := h.consumer("g", rec.ack, group.WithHooks(group.Hooks{OnDeadLettered: func(m *group.Message, reason string) {
		mu.Lock()
		defer mu.Unlock()
		if reason == group.ReasonExpired {
			expiredSeen = append(expiredSeen, m.ID)
		}
	}}))
	r := start(t, c.Run)
	dl := c.DeadLetters()
	waitFor(t, 10*time.Second, func() bool { return rec.total() >= 10 && dlLen(t, dl) == 20 })
	for i := range 10 {
		assert.Len(t, rec.get(fmt.Sprint("later-", i)), 1, "a message before its deadline is handled")
		assert.Empty(t, rec.get(fmt.Sprint("soon-", i)), "an expired message never reaches the handler")
	}
	for _, id := range generated {
		assert.Empty(t, rec.get(id), "an expired message never reaches the handler")
	}
	waitFor(t, 5*time.Second, func() bool { // counted after the write
		ctr := c.Counters()
		return ctr.Expired == 20 && ctr.DeadLettered == 20
	}, "expired and dead-lettered counted")
	waitFor(t, 5*time.Second, func() bool { // the hook runs after the write
		mu.Lock()
		defer mu.Unlock()
		return len(expiredSeen) == 20
	}, "OnDeadLettered with the reason expired, once per message")

	list, err := dl.List(ctx, "", 100)
	require.NoError(t, err)
	require.Len(t, list, 20)
	for _, e := range list {
		assert.Equal(t, group.ReasonExpired, e.Reason, e.Envelope.ID)
		assert.False(t, e.Envelope.Deadline.IsZero(), "the dead letter keeps the deadline it missed")
		assert.Contains(t, e.LastError, "deadline")
	}

	// Redrive two: delivered now, with no deadline.
	n, err := dl.Redrive(ctx, 0, list[0].EntryID, list[1].EntryID)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	waitFor(t, 10*time.Second, func() bool {
		return len(rec.get(list[0].Envelope.ID)) == 1 && len(rec.get(list[1].Envelope.ID)) == 1
	}, "redriven expired messages are delivered")
	assert.True(t, rec.get(list[0].Envelope.ID)[0].Deadline.IsZero(), "redriving removed the deadline")
	assert.Equal(t, uint64(20), c.Counters().Expired)
	r.stop(t)
}

// A message that fails and is retried after its deadline expires on the
// retry's delivery instead of running again.
func TestRetryPastDeadlineExpires(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarness(t)
	h.startMover()
	var mu sync.Mutex
	calls := 0
	c := h.consumer("g", func(context.Context, *group.Message) error {
		mu.Lock()
		defer mu.Unlock()
		calls++
		return errors.New("fails")
	}, group.WithBackoff(func(int) time.Duration { return 2500 * time.Millisecond }))
	r := start(t, c.Run)
	// The deadline leaves the first delivery room for a consumer slow to
	// start (TLS, a loaded machine: 300 ms was once too short); the retry
	// comes well after it.
	_, err := h.q.Schedule(ctx, delay.Message{ID: "r", Deadline: time.Now().Add(1500 * time.Millisecond)}, delay.After(0))
	require.NoError(t, err)
	dl := c.DeadLetters()
	waitFor(t, 10*time.Second, func() bool { return dlLen(t, dl) == 1 })
	list, err := dl.List(ctx, "", 10)
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, group.ReasonExpired, list[0].Reason)
	assert.Equal(t, 2, list[0].Attempt, "expired on the retry's delivery")
	mu.Lock()
	assert.Equal(t, 1, calls, "the handler ran once, before the deadline")
	mu.Unlock()
	assert.Equal(t, uint64(1), c.Counters().Expired)
	r.stop(t)
}
