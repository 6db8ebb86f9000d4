package runctx

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type key struct{}

func TestWithoutDeadline(t *testing.T) {
	t.Parallel()
	t.Run("deadline", func(t *testing.T) {
		t.Parallel()
		parent, cancel := context.WithTimeout(context.WithValue(context.Background(), key{}, "v"), 20*time.Millisecond)
		defer cancel()
		ctx, release := WithoutDeadline(parent)
		defer release()
		_, ok := ctx.Deadline()
		assert.False(t, ok, "no deadline for go-redis to put on a socket")
		assert.Equal(t, "v", ctx.Value(key{}))
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
			require.FailNow(t, "not ended with its parent")
		}
		assert.ErrorIs(t, ctx.Err(), context.Canceled)
		assert.ErrorIs(t, context.Cause(ctx), context.DeadlineExceeded, "the parent's cause")
	})
	t.Run("cause", func(t *testing.T) {
		t.Parallel()
		// A stop with a cause (signal.NotifyContext cancels with one)
		// under a parent that has a deadline.
		outer, cancelOuter := context.WithTimeout(context.Background(), time.Hour)
		defer cancelOuter()
		parent, cancel := context.WithCancelCause(outer)
		ctx, release := WithoutDeadline(parent)
		defer release()
		stop := errors.New("terminated signal received")
		cancel(stop)
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
			require.FailNow(t, "not ended with its parent")
		}
		assert.ErrorIs(t, context.Cause(ctx), stop)
	})
	t.Run("no deadline", func(t *testing.T) {
		t.Parallel()
		parent, cancel := context.WithCancel(context.Background())
		defer cancel()
		ctx, release := WithoutDeadline(parent)
		defer release()
		assert.Equal(t, parent, ctx, "the context itself")
	})
	t.Run("release", func(t *testing.T) {
		t.Parallel()
		parent, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		ctx, release := WithoutDeadline(parent)
		require.NoError(t, ctx.Err())
		release()
		assert.ErrorIs(t, ctx.Err(), context.Canceled)
		assert.NoError(t, parent.Err(), "the parent is not the run's to end")
	})
}
