package integration

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/codec"
	"github.com/delaystream/delaystream/integration/internal/harness"
	"github.com/delaystream/delaystream/internal/delay"
	"github.com/delaystream/delaystream/internal/mover"
)

// TestDuplicatePolicies checks Keep, Replace and Reject (queue-wide and per
// message), duplicates inside one batch, and that an id may be scheduled
// again once its message was promoted, against a real server.
func TestDuplicatePolicies(t *testing.T) {
	t.Parallel()
	rdb := harness.Redis(t)
	prefix := harness.Prefix(t, rdb)
	hour := delay.After(time.Hour)
	twoHours := delay.After(2 * time.Hour)

	t.Run("keep is the default", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		q := newQueue(t, rdb, prefix, "keep")
		first, err := q.Schedule(ctx, delay.Message{ID: "x", Payload: []byte("a")}, hour)
		require.NoError(t, err)
		require.Equal(t, delay.Created, first.Outcome)
		again, err := q.Schedule(ctx, delay.Message{ID: "x", Payload: []byte("b")}, twoHours)
		require.NoError(t, err)
		assert.Equal(t, delay.Kept, again.Outcome)
		assert.True(t, first.Due.Equal(again.Due), "kept message reports the stored due time")
		env, err := q.Get(ctx, "x")
		require.NoError(t, err)
		assert.Equal(t, "a", string(env.Payload))
		assert.True(t, first.Due.Equal(env.Due))
	})

	t.Run("replace", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		q := newQueue(t, rdb, prefix, "replace", delay.WithDuplicatePolicy(delay.Replace))
		first, err := q.Schedule(ctx, delay.Message{ID: "x", Payload: []byte("a")}, hour)
		require.NoError(t, err)
		again, err := q.Schedule(ctx, delay.Message{ID: "x", Payload: []byte("b"), Headers: map[string]string{"k": "v"}}, twoHours)
		require.NoError(t, err)
		assert.Equal(t, delay.Replaced, again.Outcome)
		assert.Greater(t, again.Due.Sub(first.Due), 59*time.Minute)
		env, err := q.Get(ctx, "x")
		require.NoError(t, err)
		assert.Equal(t, "b", string(env.Payload))
		assert.Equal(t, map[string]string{"k": "v"}, env.Headers)
		assert.True(t, again.Due.Equal(env.Due))
		n, err := q.Len(ctx)
		require.NoError(t, err)
		assert.EqualValues(t, 1, n)
	})

	t.Run("reject", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		q := newQueue(t, rdb, prefix, "reject", delay.WithDuplicatePolicy(delay.Reject))
		first, err := q.Schedule(ctx, delay.Message{ID: "x", Payload: []byte("a")}, hour)
		require.NoError(t, err)
		again, err := q.Schedule(ctx, delay.Message{ID: "x", Payload: []byte("b")}, twoHours)
		require.ErrorIs(t, err, delay.ErrDuplicate)
		assert.Equal(t, delay.Rejected, again.Outcome)
		assert.True(t, first.Due.Equal(again.Due))
		env, err := q.Get(ctx, "x")
		require.NoError(t, err)
		assert.Equal(t, "a", string(env.Payload))
	})

	t.Run("per-message override", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		q := newQueue(t, rdb, prefix, "override", delay.WithDuplicatePolicy(delay.Reject))
		_, err := q.Schedule(ctx, delay.Message{ID: "x", Payload: []byte("a")}, hour)
		require.NoError(t, err)
		r, err := q.Schedule(ctx, delay.Message{ID: "x", Payload: []byte("b"), OnDuplicate: delay.Replace}, hour)
		require.NoError(t, err)
		assert.Equal(t, delay.Replaced, r.Outcome)
		r, err = q.Schedule(ctx, delay.Message{ID: "x", Payload: []byte("c"), OnDuplicate: delay.Keep}, hour)
		require.NoError(t, err)
		assert.Equal(t, delay.Kept, r.Outcome)
		env, err := q.Get(ctx, "x")
		require.NoError(t, err)
		assert.Equal(t, "b", string(env.Payload))
	})

	t.Run("duplicates inside one batch", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		for _, tc := range []struct {
			policy  delay.Policy
			second  delay.Outcome
			payload string
		}{
			{delay.Keep, delay.Kept, "1"},
			{delay.Replace, delay.Replaced, "2"},
			{delay.Reject, delay.Rejected, "1"},
		} {
			q := newQueue(t, rdb, prefix, "batch-"+tc.policy.String(), delay.WithDuplicatePolicy(tc.policy))
			res, err := q.ScheduleBatch(ctx, []delay.Item{
				{Message: delay.Message{ID: "x", Payload: []byte("1")}, When: hour},
				{Message: delay.Message{ID: "x", Payload: []byte("2")}, When: twoHours},
			})
			require.NoError(t, err, "ScheduleBatch reports duplicates per item, not as an error")
			assert.Equal(t, []delay.Outcome{delay.Created, tc.second}, []delay.Outcome{res[0].Outcome, res[1].Outcome}, tc.policy)
			env, err := q.Get(ctx, "x")
			require.NoError(t, err)
			assert.Equal(t, tc.payload, string(env.Payload), tc.policy)
		}
	})

	t.Run("id reusable after promotion", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		q := newQueue(t, rdb, prefix, "reuse", delay.WithDuplicatePolicy(delay.Reject))
		tl := newTally(1)
		startMover(t, rdb, prefix, "reuse", mover.WithHooks(tl.hooks()))
		_, err := q.Schedule(ctx, delay.Message{ID: "x", Payload: []byte("a")}, delay.After(0))
		require.NoError(t, err)
		tl.wait(t, 5*time.Second)
		_, err = q.Get(ctx, "x")
		require.ErrorIs(t, err, delay.ErrNotFound)
		r, err := q.Schedule(ctx, delay.Message{ID: "x", Payload: []byte("b")}, hour)
		require.NoError(t, err)
		assert.Equal(t, delay.Created, r.Outcome)
	})

	t.Run("cancel reschedule get stats", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		q := newQueue(t, rdb, prefix, "ops")
		now := redisNow(ctx, t, rdb)
		at := now.Add(time.Hour).Truncate(time.Millisecond)
		_, err := q.Schedule(ctx, delay.Message{ID: "late", Payload: []byte("l")}, delay.At(at))
		require.NoError(t, err)
		overdue, err := q.Schedule(ctx, delay.Message{ID: "overdue", Payload: []byte("o")}, delay.At(now.Add(-time.Minute)))
		require.NoError(t, err)
		_, err = q.Schedule(ctx, delay.Message{ID: "gone", Payload: []byte("g")}, hour)
		require.NoError(t, err)

		st, err := q.Stats(ctx)
		require.NoError(t, err)
		assert.EqualValues(t, 3, st.Waiting)
		assert.EqualValues(t, 1, st.Overdue, "no mover runs: the past-due message is overdue")
		assert.True(t, st.NextDue.Equal(overdue.Due), "next due %v, want %v", st.NextDue, overdue.Due)
		assert.WithinDuration(t, now, st.Now, 5*time.Second)

		ok, err := q.Cancel(ctx, "gone")
		require.NoError(t, err)
		assert.True(t, ok)
		ok, err = q.Cancel(ctx, "gone")
		require.NoError(t, err)
		assert.False(t, ok, "second cancel")
		ok, err = q.Cancel(ctx, "never-scheduled")
		require.NoError(t, err)
		assert.False(t, ok)
		_, err = q.Get(ctx, "gone")
		assert.ErrorIs(t, err, delay.ErrNotFound)
		_, err = q.Reschedule(ctx, "gone", hour)
		assert.ErrorIs(t, err, delay.ErrNotFound)

		env, err := q.Get(ctx, "late")
		require.NoError(t, err)
		assert.True(t, at.Equal(env.Due), "due %v, want %v", env.Due, at)
		assert.Equal(t, "late", env.ID)
		assert.Equal(t, 1, env.Attempt)
		due, err := q.Reschedule(ctx, "late", delay.At(at.Add(time.Minute)))
		require.NoError(t, err)
		assert.True(t, at.Add(time.Minute).Equal(due))
		env, err = q.Get(ctx, "late")
		require.NoError(t, err)
		assert.True(t, due.Equal(env.Due))
		assert.Equal(t, "l", string(env.Payload), "reschedule keeps the payload")

		st, err = q.Stats(ctx)
		require.NoError(t, err)
		assert.EqualValues(t, 2, st.Waiting)
	})
}

// raceN messages are due at the same instant while the test cancels (or
// reschedules) each of them at a moment spread around that instant.
const raceN = 2000

// raceTimeline returns the order in which to act on n messages and when to
// act on each: the slots are spread evenly from 100 ms before to 200 ms
// after due, and the messages are assigned to slots in random order.
func raceTimeline(due time.Time, n int) (order []int, at []time.Time) {
	order = rand.Perm(n)
	at = make([]time.Time, n)
	from := due.Add(-100 * time.Millisecond)
	for slot := range at {
		at[slot] = from.Add(time.Duration(slot) * 300 * time.Millisecond / time.Duration(n))
	}
	return order, at
}

// TestCancelRacesPromotion cancels messages right around their due time
// while a mover promotes them: each must end either cancelled (Cancel
// returned true) and absent from the stream, or delivered once and Cancel
// returned false; never both, never neither.
func TestCancelRacesPromotion(t *testing.T) {
	t.Parallel()
	heavy.RLock()
	defer heavy.RUnlock()
	ctx := t.Context()
	rdb := harness.Redis(t)
	prefix := harness.Prefix(t, rdb)
	const queue = "cancel-race"
	q := newQueue(t, rdb, prefix, queue)
	tl := newTally(raceN)
	// Small batches stretch promotion over many script calls, so cancels
	// interleave with it instead of landing all before or all after.
	startMover(t, rdb, prefix, queue, mover.WithHooks(tl.hooks()), mover.WithBatchSize(16))

	due := redisNow(ctx, t, rdb).Add(300 * time.Millisecond)
	items := make([]delay.Item, raceN)
	for i := range items {
		items[i] = delay.Item{Message: delay.Message{ID: fmt.Sprintf("c%04d", i), Payload: []byte("x")}, When: delay.At(due)}
	}
	_, err := q.ScheduleBatch(ctx, items)
	require.NoError(t, err)

	order, when := raceTimeline(due, raceN)
	cancelled := make([]bool, raceN)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for {
				slot := int(next.Add(1) - 1)
				if slot >= raceN {
					return
				}
				waitUntil(when[slot])
				i := order[slot]
				ok, err := q.Cancel(ctx, items[i].Message.ID)
				if assert.NoError(t, err) {
					cancelled[i] = ok
					if ok {
						tl.account(1)
					}
				}
			}
		})
	}
	wg.Wait()
	tl.wait(t, 10*time.Second)

	l := lane(t, prefix, queue)
	requireEmptyDelayed(ctx, t, rdb, l)
	seen := map[string]int{}
	for _, e := range decodeAll(ctx, t, rdb, l.Stream) {
		seen[e.Envelope.ID]++
	}
	var nCancelled, nDelivered int
	for i, it := range items {
		id := it.Message.ID
		switch {
		case cancelled[i] && seen[id] > 0:
			t.Errorf("%s: Cancel returned true but the message is in the stream", id)
		case !cancelled[i] && seen[id] == 0:
			t.Errorf("%s: Cancel returned false but the message is not in the stream", id)
		case seen[id] > 1:
			t.Errorf("%s delivered %d times", id, seen[id])
		case cancelled[i]:
			nCancelled++
		default:
			nDelivered++
		}
	}
	t.Logf("%d messages due together: %d cancelled, %d delivered", raceN, nCancelled, nDelivered)
	assert.Positive(t, nCancelled, "the race never saw a cancel win")
	assert.Positive(t, nDelivered, "the race never saw a promotion win")
}

// TestRescheduleRacesPromotion moves messages an hour out right around
// their due time while a mover promotes them: Reschedule returns
// ErrNotFound exactly for the messages that were delivered, and the others
// wait with their new due time.
func TestRescheduleRacesPromotion(t *testing.T) {
	t.Parallel()
	heavy.RLock()
	defer heavy.RUnlock()
	ctx := t.Context()
	rdb := harness.Redis(t)
	prefix := harness.Prefix(t, rdb)
	const queue = "reschedule-race"
	q := newQueue(t, rdb, prefix, queue)
	tl := newTally(raceN)
	startMover(t, rdb, prefix, queue, mover.WithHooks(tl.hooks()), mover.WithBatchSize(16))

	due := redisNow(ctx, t, rdb).Add(300 * time.Millisecond).Truncate(time.Millisecond)
	later := due.Add(time.Hour)
	items := make([]delay.Item, raceN)
	for i := range items {
		items[i] = delay.Item{Message: delay.Message{ID: fmt.Sprintf("r%04d", i), Payload: []byte("x")}, When: delay.At(due)}
	}
	_, err := q.ScheduleBatch(ctx, items)
	require.NoError(t, err)

	order, when := raceTimeline(due, raceN)
	moved := make([]bool, raceN)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for {
				slot := int(next.Add(1) - 1)
				if slot >= raceN {
					return
				}
				waitUntil(when[slot])
				i := order[slot]
				got, err := q.Reschedule(ctx, items[i].Message.ID, delay.At(later))
				switch {
				case errors.Is(err, delay.ErrNotFound):
				case assert.NoError(t, err):
					assert.True(t, later.Equal(got), "new due %v", got)
					moved[i] = true
					tl.account(1)
				}
			}
		})
	}
	wg.Wait()
	tl.wait(t, 10*time.Second)

	l := lane(t, prefix, queue)
	seen := map[string]int{}
	for _, e := range decodeAll(ctx, t, rdb, l.Stream) {
		seen[e.Envelope.ID]++
	}
	var nMoved, nDelivered int
	for i, it := range items {
		id := it.Message.ID
		score, err := rdb.ZScore(ctx, l.Delayed, id).Result()
		waiting := err == nil
		switch {
		case moved[i] && seen[id] > 0:
			t.Errorf("%s: Reschedule succeeded but the message is in the stream", id)
		case moved[i] && (!waiting || int64(score) != later.UnixMilli()):
			t.Errorf("%s: Reschedule succeeded but the message does not wait for its new due time (waiting %v, score %v)", id, waiting, score)
		case !moved[i] && seen[id] != 1:
			t.Errorf("%s: Reschedule returned ErrNotFound but the message is in the stream %d times", id, seen[id])
		case !moved[i] && waiting:
			t.Errorf("%s: Reschedule returned ErrNotFound but the message still waits", id)
		case moved[i]:
			nMoved++
		default:
			nDelivered++
		}
	}
	t.Logf("%d messages due together: %d rescheduled, %d delivered", raceN, nMoved, nDelivered)
	assert.Positive(t, nMoved, "the race never saw a reschedule win")
	assert.Positive(t, nDelivered, "the race never saw a promotion win")
}

// TestBadInputWritesNothing checks that refused input leaves no key behind
// on a real server, even when the bad item is the last of a large batch.
func TestBadInputWritesNothing(t *testing.T) {
	t.Parallel()
	rdb := harness.Redis(t)
	valid := func(n int) []delay.Item {
		items := make([]delay.Item, n)
		for i := range items {
			items[i] = delay.Item{Message: delay.Message{Payload: []byte("ok")}, When: delay.After(time.Minute)}
		}
		return items
	}
	withLast := func(bad delay.Item) []delay.Item {
		return append(valid(1200), bad) // more than two chunks of the default batch size
	}
	ok := delay.After(time.Minute)
	for _, tc := range []struct {
		name string
		call func(t *testing.T, q *delay.Queue) error
	}{
		{"payload too large", func(t *testing.T, q *delay.Queue) error {
			_, err := q.ScheduleBatch(t.Context(), withLast(delay.Item{Message: delay.Message{Payload: make([]byte, 1025)}, When: ok}))
			return err
		}},
		{"negative delay", func(t *testing.T, q *delay.Queue) error {
			_, err := q.ScheduleBatch(t.Context(), withLast(delay.Item{When: delay.After(-time.Millisecond)}))
			return err
		}},
		{"zero When", func(t *testing.T, q *delay.Queue) error {
			_, err := q.ScheduleBatch(t.Context(), withLast(delay.Item{}))
			return err
		}},
		{"zero At", func(t *testing.T, q *delay.Queue) error {
			_, err := q.Schedule(t.Context(), delay.Message{}, delay.At(time.Time{}))
			return err
		}},
		{"due after year 9999", func(t *testing.T, q *delay.Queue) error {
			_, err := q.Schedule(t.Context(), delay.Message{}, delay.At(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)))
			return err
		}},
		{"control character in id", func(t *testing.T, q *delay.Queue) error {
			_, err := q.ScheduleBatch(t.Context(), withLast(delay.Item{Message: delay.Message{ID: "a\x1fb"}, When: ok}))
			return err
		}},
		{"id too long", func(t *testing.T, q *delay.Queue) error {
			_, err := q.Schedule(t.Context(), delay.Message{ID: strings.Repeat("x", delay.MaxIDLen+1)}, ok)
			return err
		}},
		{"id not UTF-8", func(t *testing.T, q *delay.Queue) error {
			_, err := q.Schedule(t.Context(), delay.Message{ID: "\xff"}, ok)
			return err
		}},
		{"reserved header", func(t *testing.T, q *delay.Queue) error {
			_, err := q.ScheduleBatch(t.Context(), withLast(delay.Item{Message: delay.Message{Headers: map[string]string{"ds.attempt": "9"}}, When: ok}))
			return err
		}},
		{"empty header key", func(t *testing.T, q *delay.Queue) error {
			_, err := q.Schedule(t.Context(), delay.Message{Headers: map[string]string{"": "v"}}, ok)
			return err
		}},
		{"too many headers", func(t *testing.T, q *delay.Queue) error {
			h := map[string]string{}
			for i := range delay.MaxHeaders + 1 {
				h[fmt.Sprint("h", i)] = "v"
			}
			_, err := q.Schedule(t.Context(), delay.Message{Headers: h}, ok)
			return err
		}},
		{"unknown policy", func(t *testing.T, q *delay.Queue) error {
			_, err := q.ScheduleBatch(t.Context(), withLast(delay.Item{Message: delay.Message{OnDuplicate: delay.Policy(9)}, When: ok}))
			return err
		}},
		{"typed value the codec cannot encode", func(t *testing.T, q *delay.Queue) error {
			_, err := delay.NewTyped[chan int](q).Schedule(t.Context(), "", make(chan int), ok)
			return err
		}},
		{"cancel empty id", func(t *testing.T, q *delay.Queue) error {
			_, err := q.Cancel(t.Context(), "")
			return err
		}},
		{"reschedule with zero When", func(t *testing.T, q *delay.Queue) error {
			_, err := q.Reschedule(t.Context(), "x", delay.When{})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			prefix := harness.Prefix(t, rdb)
			q := newQueue(t, rdb, prefix, "bad", delay.WithMaxPayload(1024), delay.WithCodec(codec.JSON))
			err := tc.call(t, q)
			require.ErrorIs(t, err, delay.ErrInvalidMessage)
			keys, err := harness.Keys(t.Context(), rdb, prefix+":*")
			require.NoError(t, err)
			assert.Empty(t, keys, "refused input wrote keys")
		})
	}
}
