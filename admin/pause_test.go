package admin_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
)

func TestPause(t *testing.T) {
	t.Parallel()
	in, rdb := seed(t)
	ctx := context.Background()

	since, err := in.Pause(ctx, "jobs", "billing")
	require.NoError(t, err)
	assert.WithinDuration(t, time.Now(), since, time.Minute)
	again, err := in.Pause(ctx, "jobs", "billing")
	require.NoError(t, err)
	assert.Equal(t, since, again, "pausing twice keeps the first time")
	qsince, err := in.PauseQueue(ctx, "jobs")
	require.NoError(t, err)

	rs, err := in.Stats(ctx, "jobs")
	require.NoError(t, err)
	assert.Equal(t, qsince, rs[0].PausedSince)
	require.Len(t, rs[0].Groups, 2)
	assert.True(t, rs[0].Groups[0].PausedSince.IsZero(), "audit runs")
	assert.Equal(t, since, rs[0].Groups[1].PausedSince)
	gs, err := in.Groups(ctx, "jobs")
	require.NoError(t, err)
	assert.Equal(t, since, gs[1].PausedSince)

	ended, err := in.Resume(ctx, "jobs", "billing")
	require.NoError(t, err)
	assert.Equal(t, since, ended)
	ended, err = in.Resume(ctx, "jobs", "billing")
	require.NoError(t, err)
	assert.True(t, ended.IsZero(), "not paused")
	qended, err := in.ResumeQueue(ctx, "jobs")
	require.NoError(t, err)
	assert.Equal(t, qsince, qended)
	rs, err = in.Stats(ctx, "jobs")
	require.NoError(t, err)
	assert.True(t, rs[0].PausedSince.IsZero())
	assert.True(t, rs[0].Groups[1].PausedSince.IsZero())

	_, err = in.Pause(ctx, "jobs", "nosuch")
	require.ErrorIs(t, err, delaystream.ErrNotFound)
	_, err = in.PauseQueue(ctx, "nosuch")
	require.ErrorIs(t, err, delaystream.ErrNotFound)
	_, err = in.Pause(ctx, "jobs", "a b")
	require.ErrorIs(t, err, delaystream.ErrInvalidOption)

	// A pause record of the wrong type is named.
	qs, err := in.Queues(ctx, "jobs")
	require.NoError(t, err)
	pauseKey := strings.TrimSuffix(qs[0].Meta, "q") + "p"
	require.NoError(t, rdb.Set(ctx, pauseKey, "x", 0).Err())
	_, err = in.PauseQueue(ctx, "jobs")
	require.ErrorIs(t, err, delaystream.ErrWrongType)
	assert.Contains(t, err.Error(), pauseKey)
	_, err = in.Stats(ctx, "jobs")
	require.ErrorIs(t, err, delaystream.ErrWrongType)
}

// An empty group name is refused, not taken for the whole queue: a
// variable left empty must not stop all delivery. Nothing is written.
func TestPauseEmptyGroup(t *testing.T) {
	t.Parallel()
	in, _ := seed(t)
	ctx := context.Background()
	for _, do := range []func(context.Context, string, string) (time.Time, error){in.Pause, in.Resume} {
		_, err := do(ctx, "jobs", "")
		require.ErrorIs(t, err, delaystream.ErrInvalidOption)
		assert.ErrorIs(t, err, delaystream.ErrInvalidName)
		assert.Contains(t, err.Error(), "PauseQueue")
	}
	rs, err := in.Stats(ctx, "jobs")
	require.NoError(t, err)
	assert.True(t, rs[0].PausedSince.IsZero(), "the queue is not paused")
	for _, g := range rs[0].Groups {
		assert.True(t, g.PausedSince.IsZero(), g.Group)
	}
}
