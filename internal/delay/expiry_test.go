package delay_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/internal/delay"
)

// A deadline must come after the due time: one at or before it is refused
// at the call, for the whole batch, and nothing is written.
func TestDeadlineNotAfterDueIsRefused(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		q := b.queue(t)
		at := time.Now().Add(time.Hour).Truncate(time.Millisecond)
		for _, tc := range []struct {
			name string
			m    delay.Message
			when delay.When
		}{
			{"At, deadline equal to due", delay.Message{ID: "a", Deadline: at}, delay.At(at)},
			{"At, deadline before due", delay.Message{ID: "b", Deadline: at.Add(-time.Second)}, delay.At(at)},
			{"After, deadline before due", delay.Message{Deadline: time.Now().Add(time.Minute)}, delay.After(time.Hour)},
		} {
			_, err := q.Schedule(ctx, tc.m, tc.when)
			require.ErrorIs(t, err, delay.ErrInvalidMessage, tc.name)
			assert.Contains(t, err.Error(), "deadline", tc.name)
		}
		_, err := q.ScheduleBatch(ctx, []delay.Item{
			{Message: delay.Message{ID: "ok"}, When: delay.After(time.Minute)},
			{Message: delay.Message{ID: "bad", Deadline: at}, When: delay.At(at)},
		})
		require.ErrorIs(t, err, delay.ErrInvalidMessage)
		assert.Zero(t, b.keyCount(t), "nothing written")
	})
}

func TestWithExpireAfterMustBePositive(t *testing.T) {
	t.Parallel()
	for _, d := range []time.Duration{0, -time.Second} {
		_, err := delay.New(nil, "q", delay.WithExpireAfter(d))
		require.ErrorIs(t, err, delay.ErrInvalidOption, d)
	}
}

// The deadline travels in the envelope: Get returns it, whether set on the
// message or derived from the queue's WithExpireAfter default; a message
// without one has none.
func TestDeadlineStored(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		q := b.queue(t, delay.WithExpireAfter(10*time.Minute))
		plain := b.queue(t)
		at := time.Now().Add(time.Hour).Truncate(time.Millisecond)

		_, err := q.Schedule(ctx, delay.Message{ID: "own", Deadline: at.Add(time.Minute)}, delay.At(at))
		require.NoError(t, err)
		_, err = q.Schedule(ctx, delay.Message{ID: "default"}, delay.At(at))
		require.NoError(t, err)
		gen, err := q.Schedule(ctx, delay.Message{}, delay.At(at))
		require.NoError(t, err)
		_, err = plain.Schedule(ctx, delay.Message{ID: "none"}, delay.At(at))
		require.NoError(t, err)

		for id, want := range map[string]time.Time{
			"own": at.Add(time.Minute), "default": at.Add(10 * time.Minute), gen.ID: at.Add(10 * time.Minute), "none": {},
		} {
			e, err := q.Get(ctx, id)
			require.NoError(t, err, id)
			assert.True(t, want.Equal(e.Deadline), "%s: deadline %s, want %s", id, e.Deadline, want)
		}
	})
}
