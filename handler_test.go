package delaystream_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/codec"
	"github.com/delaystream/delaystream/internal/redistest"
)

// runUntilDead runs q until group g has dead-lettered want entries, then
// returns g's dead letters.
func runUntilDead(t *testing.T, q *delaystream.Queue, g *delaystream.Group, want int) []delaystream.DeadLetterEntry {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- q.Run(ctx) }()
	var dead []delaystream.DeadLetterEntry
	require.Eventually(t, func() bool {
		var err error
		dead, err = g.DeadLetters(context.Background(), "", 100)
		return err == nil && len(dead) >= want
	}, 15*time.Second, 5*time.Millisecond)
	cancel()
	require.NoError(t, <-done)
	return dead
}

func newQueue(t *testing.T, opts ...delaystream.Option) *delaystream.Queue {
	t.Helper()
	opts = append([]delaystream.Option{delaystream.WithPrefix(redistest.Prefix(t)), delaystream.WithDrainTimeout(time.Second),
		delaystream.WithLogger(slog.New(slog.DiscardHandler))}, opts...)
	q, err := delaystream.New(redistest.Client(t), "q", opts...)
	require.NoError(t, err)
	return q
}

// A handler that outlives its timeout sees its ctx end, and the attempt
// counts as failed even though it returned nil.
func TestHandlerTimeout(t *testing.T) {
	t.Parallel()
	q := newQueue(t)
	ended := make(chan error, 1)
	g, err := q.Handle("g", func(ctx context.Context, d *delaystream.Delivery) error {
		<-ctx.Done()
		ended <- ctx.Err()
		return nil
	}, delaystream.WithHandlerTimeout(50*time.Millisecond), delaystream.WithMaxAttempts(1))
	require.NoError(t, err)
	_, err = q.Schedule(context.Background(), delaystream.Message{ID: "slow"}, delaystream.After(0))
	require.NoError(t, err)
	dead := runUntilDead(t, q, g, 1)
	require.ErrorIs(t, <-ended, context.DeadlineExceeded)
	require.Len(t, dead, 1)
	assert.Equal(t, delaystream.ReasonAttempts, dead[0].Reason)
	assert.Contains(t, dead[0].LastError, "handler timed out (50ms)")
	assert.Equal(t, uint64(1), g.Counters().Failed)
	assert.Zero(t, g.Counters().Acked)
}

// A typed handler's payload that does not decode is dead-lettered as
// undecodable without calling the handler; middleware still sees it.
func TestHandleTypedUndecodable(t *testing.T) {
	t.Parallel()
	q := newQueue(t, delaystream.WithCodec(codec.JSON))
	type order struct{ N int }
	seen := make(chan string, 2)
	mw := func(next delaystream.Handler) delaystream.Handler {
		return func(ctx context.Context, d *delaystream.Delivery) error {
			seen <- d.ID
			return next(ctx, d)
		}
	}
	g, err := delaystream.HandleTyped(q, "g", func(context.Context, *delaystream.Delivery, order) error {
		t.Error("handler called for an undecodable payload")
		return nil
	}, delaystream.WithMiddleware(mw))
	require.NoError(t, err)
	_, err = q.Schedule(context.Background(), delaystream.Message{ID: "bad", Payload: []byte("not json")}, delaystream.After(0))
	require.NoError(t, err)
	dead := runUntilDead(t, q, g, 1)
	require.Len(t, dead, 1)
	assert.Equal(t, delaystream.ReasonUndecodable, dead[0].Reason)
	assert.Contains(t, dead[0].LastError, "decode payload as delaystream_test.order")
	assert.Equal(t, "bad", <-seen)
}

// RetryAfter counts: at the last attempt it dead-letters like any failure.
// Snooze does not: a snoozed message comes back with the same attempt.
func TestRetryAfterAndSnooze(t *testing.T) {
	t.Parallel()
	q := newQueue(t)
	attempts := make(chan int, 10)
	g, err := q.Handle("g", func(ctx context.Context, d *delaystream.Delivery) error {
		attempts <- d.Attempt
		if len(attempts) <= 2 {
			return delaystream.Snooze(time.Millisecond)
		}
		return delaystream.RetryAfter(5*time.Millisecond, errors.New("busy"))
	}, delaystream.WithMaxAttempts(2), delaystream.WithWorkers(1))
	require.NoError(t, err)
	_, err = q.Schedule(context.Background(), delaystream.Message{ID: "m"}, delaystream.After(0))
	require.NoError(t, err)
	dead := runUntilDead(t, q, g, 1)
	close(attempts)
	var got []int
	for a := range attempts {
		got = append(got, a)
	}
	assert.Equal(t, []int{1, 1, 1, 2}, got, "two snoozes, then a counted retry, then the last attempt")
	require.Len(t, dead, 1)
	assert.Equal(t, delaystream.ReasonAttempts, dead[0].Reason)
	assert.Contains(t, dead[0].LastError, "busy")
}

// Errors speak the root package: a zero When names its constructors.
func TestZeroWhen(t *testing.T) {
	t.Parallel()
	q := newQueue(t)
	_, err := q.Schedule(context.Background(), delaystream.Message{ID: "x"}, delaystream.When{})
	require.ErrorIs(t, err, delaystream.ErrInvalidMessage)
	assert.Contains(t, err.Error(), "use delaystream.After or delaystream.At")
	_, err = q.Reschedule(context.Background(), "nope", delaystream.After(time.Second))
	require.ErrorIs(t, err, delaystream.ErrNotFound)
}

// A Drop error is recognisable by middleware; the others are not drops.
func TestDropIsRecognisable(t *testing.T) {
	t.Parallel()
	cause := errors.New("stale")
	err := fmt.Errorf("wrapped: %w", delaystream.Drop(cause))
	assert.ErrorIs(t, err, delaystream.ErrDropped)
	assert.ErrorIs(t, err, cause)
	assert.NotErrorIs(t, delaystream.DeadLetter(cause), delaystream.ErrDropped)
	assert.NotErrorIs(t, delaystream.RetryAfter(time.Second, cause), delaystream.ErrDropped)
}

// The handler and the group's hooks share one Delivery per run, and it
// says when the message was appended to the stream: not before it was due.
func TestHooksShareTheDelivery(t *testing.T) {
	t.Parallel()
	q := newQueue(t)
	var inHandler, inDelivered, inHandled *delaystream.Delivery
	handled := make(chan struct{})
	g, err := q.Handle("g", func(ctx context.Context, d *delaystream.Delivery) error {
		inHandler = d
		return nil
	}, delaystream.WithHooks(delaystream.Hooks{
		OnDelivered: func(d *delaystream.Delivery) { inDelivered = d },
		OnHandled: func(d *delaystream.Delivery, o delaystream.HandlerOutcome, _ time.Duration) {
			inHandled = d
			close(handled)
		},
	}))
	require.NoError(t, err)
	_, err = q.Schedule(context.Background(), delaystream.Message{ID: "m"}, delaystream.After(20*time.Millisecond))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- q.Run(ctx) }()
	select {
	case <-handled:
	case <-time.After(10 * time.Second):
		require.FailNow(t, "not handled")
	}
	cancel()
	require.NoError(t, <-done)
	require.NotNil(t, inHandler)
	assert.Same(t, inHandler, inDelivered)
	assert.Same(t, inHandler, inHandled)
	assert.False(t, inHandler.Appended().Before(inHandler.Due), "appended %v before due %v", inHandler.Appended(), inHandler.Due)
	assert.Equal(t, uint64(1), g.Counters().Acked)
}
