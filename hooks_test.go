package delaystream_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
)

// OnFailed gets every failure's error, the last one included (retryIn 0,
// just before OnDeadLettered), so one hook can log them all: a message
// that fails its two attempts, and one whose handler asks for the dead
// letters at once.
func TestOnFailedGetsTheLastFailure(t *testing.T) {
	t.Parallel()
	q := newQueue(t)
	type call struct {
		hook    string
		id      string
		err     string
		retryIn time.Duration
	}
	var mu sync.Mutex
	var calls []call
	note := func(c call) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, c)
	}
	hooks := delaystream.Hooks{
		OnFailed: func(d *delaystream.Delivery, err error, retryIn time.Duration) {
			note(call{"failed", d.ID, err.Error(), retryIn})
		},
		OnDeadLettered: func(d *delaystream.Delivery, reason string) { note(call{"dead-lettered", d.ID, reason, 0}) },
	}
	g, err := q.Handle("g", func(_ context.Context, d *delaystream.Delivery) error {
		if d.ID == "refused" {
			return delaystream.DeadLetter(errors.New("card refused"))
		}
		return fmt.Errorf("attempt %d failed", d.Attempt)
	}, delaystream.WithMaxAttempts(2), delaystream.WithBackoff(delaystream.ConstantBackoff(10*time.Millisecond)),
		delaystream.WithHooks(hooks))
	require.NoError(t, err)
	for _, id := range []string{"flaky", "refused"} {
		_, err = q.Schedule(context.Background(), delaystream.Message{ID: id}, delaystream.After(0))
		require.NoError(t, err)
	}
	runUntilDead(t, q, g, 2)

	mu.Lock()
	defer mu.Unlock()
	byID := map[string][]call{}
	for _, c := range calls {
		byID[c.id] = append(byID[c.id], c)
	}
	assert.Equal(t, []call{
		{"failed", "flaky", "attempt 1 failed", 10 * time.Millisecond},
		{"failed", "flaky", "attempt 2 failed", 0},
		{"dead-lettered", "flaky", delaystream.ReasonAttempts, 0},
	}, byID["flaky"])
	assert.Equal(t, []call{
		{"failed", "refused", "dead-letter: card refused", 0},
		{"dead-lettered", "refused", delaystream.ReasonHandler, 0},
	}, byID["refused"])
}
