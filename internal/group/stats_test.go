package group_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/internal/delay"
	"github.com/delaystream/delaystream/internal/group"
	"github.com/delaystream/delaystream/internal/stream"
)

// Stats against known states: a stuck handler (pending, oldest pending
// age), a group that never reads (lag), retries waiting for a long backoff,
// dead letters, and queue figures with no mover running (waiting, overdue,
// next due, stream length).
func TestStatsFigures(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	key := h.mainStream()

	empty, err := group.ReadStats(ctx, h.rdb, h.queue, "g", group.WithPrefix(h.prefix))
	require.NoError(t, err)
	assert.Equal(t, group.Stats{Group: "g", Lag: -1}, empty, "nothing exists yet")

	// Six messages reach the stream; then the mover stops.
	mv := h.startMover()
	h.schedule([]string{"ok", "dead", "retry1", "retry2", "stuck1", "stuck2"}, 0)
	waitFor(t, 10*time.Second, func() bool { l, _ := h.rdb.XLen(ctx, key).Result(); return l == 6 })
	mv.stop(t)
	require.NoError(t, h.rdb.XGroupCreate(ctx, key, "lagger", "0").Err())

	// Queue figures: two waiting past due (overdue: no mover), two later.
	past := time.Now().Add(-time.Minute)
	var dues []time.Time
	for i, w := range []delay.When{delay.At(past), delay.At(past.Add(time.Second)), delay.After(time.Hour), delay.After(2 * time.Hour)} {
		res, err := h.q.Schedule(ctx, delay.Message{ID: "w" + string(rune('0'+i))}, w)
		require.NoError(t, err)
		dues = append(dues, res.Due)
	}

	stuck := make(chan *group.Message, 2)
	release := make(chan struct{})
	c := h.consumer("g", func(ctx context.Context, m *group.Message) error {
		switch {
		case m.ID == "dead":
			return group.DeadLetter(errors.New("no"))
		case strings.HasPrefix(m.ID, "retry"):
			return errors.New("later")
		case strings.HasPrefix(m.ID, "stuck"):
			stuck <- m
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}, group.WithBackoff(group.ConstantBackoff(time.Hour)), group.WithoutPromotion()) // overdue stays overdue
	r := start(t, c.Run)
	s1, s2 := <-stuck, <-stuck
	waitFor(t, 10*time.Second, func() bool {
		x := c.Counters()
		return x.Acked == 1 && x.Retried == 2 && x.DeadLettered == 1
	})

	oldest := stream.EntryTime(s1.EntryID)
	if o := stream.EntryTime(s2.EntryID); o.Before(oldest) {
		oldest = o
	}
	before := h.redisNow()
	st, err := c.Stats(ctx)
	require.NoError(t, err)
	after := h.redisNow()
	assert.Equal(t, "g", st.Group)
	assert.EqualValues(t, 1, st.Consumers)
	assert.EqualValues(t, 2, st.Pending, "the two stuck handlers' entries")
	assert.GreaterOrEqual(t, st.OldestPending, before.Sub(oldest))
	assert.LessOrEqual(t, st.OldestPending, after.Sub(oldest))
	assert.Positive(t, st.OldestPending)
	assert.Zero(t, st.Lag, "g has read everything")
	assert.EqualValues(t, 2, st.RetryWaiting)
	assert.EqualValues(t, 1, st.DeadLetters)
	assert.Equal(t, group.QueueStats{Waiting: 4, Overdue: 2, NextDue: dues[0], StreamLength: 6}, st.Queue)

	lag, err := group.ReadStats(ctx, h.rdb, h.queue, "lagger", group.WithPrefix(h.prefix))
	require.NoError(t, err)
	assert.Equal(t, group.Stats{Group: "lagger", Lag: 6, Queue: st.Queue}, lag, "a group that never read")

	close(release)
	waitFor(t, 10*time.Second, func() bool {
		st, err := c.Stats(ctx)
		return err == nil && st.Pending == 0 && st.OldestPending == 0
	})
	r.stop(t)
}
