package dstest_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/dstest"
	"github.com/delaystream/delaystream/internal/redistest"
)

// Every goroutine Work starts is gone when it returns: a leak fails the run.
func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// quiet drops the logs of failures a test provokes.
var quiet = slog.New(slog.DiscardHandler)

func ack(context.Context, *delaystream.Delivery) error { return nil }

// schedule schedules a message with no payload, due when.
func schedule(t *testing.T, q *dstest.Queue, id string, when delaystream.When) {
	t.Helper()
	_, err := q.Schedule(context.Background(), delaystream.Message{ID: id}, when)
	require.NoError(t, err)
}

// fatalTB records a Fatalf and ends the goroutine, as testing.T does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestNewFailsTheTest(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		queue string
		opts  []delaystream.Option
		want  string
	}{
		{"invalid name", "a b", nil, "invalid name"},
		{"invalid option", "orders", []delaystream.Option{delaystream.WithShards(0)}, "shard count must be"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := &fatalTB{TB: t}
			done := make(chan *dstest.Queue)
			go func() {
				defer close(done)
				done <- dstest.New(f, tc.queue, tc.opts...)
			}()
			assert.Nil(t, <-done)
			assert.Contains(t, f.msg, tc.want)
		})
	}
}

// The options apply: keys live under the prefix, messages spread over
// the shards, and Scheduled lists them in due order with what was
// scheduled.
func TestScheduled(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts []delaystream.Option
	}{
		{"default", nil},
		{"sharded with prefix", []delaystream.Option{delaystream.WithShards(4), delaystream.WithPrefix("app")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			q := dstest.New(t, "orders", tc.opts...)
			now := q.Now()
			deadline := now.Add(3 * time.Hour).Truncate(time.Millisecond)
			for i, d := range []time.Duration{time.Hour, time.Minute, 2 * time.Hour, 30 * time.Second} {
				_, err := q.Schedule(ctx, delaystream.Message{ID: fmt.Sprintf("m%d", i), Payload: []byte{byte(i)},
					Headers: map[string]string{"i": fmt.Sprint(i)}, Deadline: deadline}, delaystream.After(d))
				require.NoError(t, err)
			}
			cancelled, err := q.Cancel(ctx, "m2")
			require.NoError(t, err)
			require.True(t, cancelled)

			got, err := q.Scheduled(ctx)
			require.NoError(t, err)
			var ids []string
			for _, m := range got {
				ids = append(ids, m.ID)
				i := int(m.Payload[0])
				assert.Equal(t, fmt.Sprint(i), m.Headers["i"], m.ID)
				assert.Equal(t, 1, m.Attempt, m.ID)
				assert.True(t, deadline.Equal(m.Deadline), m.ID)
			}
			assert.Equal(t, []string{"m3", "m1", "m0"}, ids)
			assert.True(t, now.Add(30*time.Second).Equal(got[0].Due), got[0].Due)

			prefix := delaystream.DefaultPrefix
			if len(tc.opts) > 0 {
				prefix = "app"
			}
			keys, err := q.Client().Keys(ctx, prefix+":*").Result()
			require.NoError(t, err)
			assert.NotEmpty(t, keys)
		})
	}
}

// A message is due when the server's clock reaches its due time, not a
// millisecond before; Advance returns the new time.
func TestAdvanceMakesDue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := dstest.New(t, "orders")
	start := q.Now()
	schedule(t, q, "m", delaystream.After(time.Minute))

	assert.True(t, start.Add(time.Minute-time.Millisecond).Equal(q.Advance(time.Minute-time.Millisecond)))
	done, err := q.Work(ctx, "g", ack)
	require.NoError(t, err)
	assert.Empty(t, done)

	q.Advance(time.Millisecond)
	assert.True(t, start.Add(time.Minute).Equal(q.Now()))
	done, err = q.Work(ctx, "g", ack)
	require.NoError(t, err)
	require.Len(t, done, 1)
	assert.Equal(t, "m", done[0].ID)

	got, err := q.Scheduled(ctx)
	require.NoError(t, err)
	assert.Empty(t, got)
}

// Keys' TTLs run by the server's clock, so by Advance.
func TestAdvanceExpiresKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := dstest.New(t, "orders")
	rdb := q.Client()
	require.NoError(t, rdb.Set(ctx, "k", "v", time.Second).Err())
	q.Advance(999 * time.Millisecond)
	assert.Equal(t, int64(1), rdb.Exists(ctx, "k").Val())
	q.Advance(time.Millisecond)
	assert.Equal(t, int64(0), rdb.Exists(ctx, "k").Val())
}

// Work reports each way a handler can end.
func TestWorkOutcomes(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	for _, tc := range []struct {
		name    string
		h       delaystream.Handler
		opts    []delaystream.GroupOption
		want    delaystream.HandlerOutcome
		retryIn time.Duration // want RetryAt = now + retryIn; 0: none
		reason  string
		err     string // in Err; "": none
	}{
		{name: "ack", h: ack, want: delaystream.HandlerAcked},
		{name: "error", h: func(context.Context, *delaystream.Delivery) error { return boom },
			opts: []delaystream.GroupOption{delaystream.WithBackoff(delaystream.ConstantBackoff(time.Second))},
			want: delaystream.HandlerRetried, retryIn: time.Second, err: "boom"},
		{name: "retry after", h: func(context.Context, *delaystream.Delivery) error { return delaystream.RetryAfter(5*time.Second, boom) },
			want: delaystream.HandlerRetried, retryIn: 5 * time.Second, err: "boom"},
		{name: "snooze", h: func(context.Context, *delaystream.Delivery) error { return delaystream.Snooze(time.Minute) },
			want: delaystream.HandlerRetried, retryIn: time.Minute, err: "snooze"},
		{name: "dead letter", h: func(context.Context, *delaystream.Delivery) error { return delaystream.DeadLetter(boom) },
			want: delaystream.HandlerDeadLettered, reason: delaystream.ReasonHandler, err: "boom"},
		{name: "drop", h: func(context.Context, *delaystream.Delivery) error { return delaystream.Drop(boom) },
			want: delaystream.HandlerDropped, err: "boom"},
		{name: "panic", h: func(context.Context, *delaystream.Delivery) error { panic("oops") },
			opts: []delaystream.GroupOption{delaystream.WithBackoff(delaystream.ConstantBackoff(time.Second))},
			want: delaystream.HandlerRetried, retryIn: time.Second, err: "panic"},
		{name: "timeout", h: func(ctx context.Context, _ *delaystream.Delivery) error { <-ctx.Done(); return nil },
			opts: []delaystream.GroupOption{delaystream.WithHandlerTimeout(time.Millisecond),
				delaystream.WithBackoff(delaystream.ConstantBackoff(time.Second))},
			want: delaystream.HandlerRetried, retryIn: time.Second, err: "timed out"},
		{name: "last attempt", h: func(context.Context, *delaystream.Delivery) error { return boom },
			opts: []delaystream.GroupOption{delaystream.WithMaxAttempts(1)},
			want: delaystream.HandlerDeadLettered, reason: delaystream.ReasonAttempts, err: "boom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q := dstest.New(t, "orders", delaystream.WithLogger(quiet))
			schedule(t, q, "m", delaystream.After(0))
			done, err := q.Work(context.Background(), "g", tc.h, tc.opts...)
			require.NoError(t, err)
			require.Len(t, done, 1)
			h := done[0]
			assert.Equal(t, "m", h.ID)
			assert.Equal(t, 1, h.Attempt)
			assert.Equal(t, tc.want, h.Outcome)
			assert.Equal(t, tc.reason, h.Reason)
			if tc.retryIn > 0 {
				assert.True(t, q.Now().Add(tc.retryIn).Equal(h.RetryAt), h.RetryAt)
			} else {
				assert.True(t, h.RetryAt.IsZero(), h.RetryAt)
			}
			if tc.err == "" {
				assert.NoError(t, h.Err)
			} else if assert.Error(t, h.Err) {
				assert.Contains(t, strings.ToLower(h.Err.Error()), tc.err)
			}
		})
	}
}

// Retries due at once are delivered in the same Work until the attempts
// are used up; the dead letter is the group's, as the embedded Queue sees
// it.
func TestWorkAttempts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := dstest.New(t, "orders")
	schedule(t, q, "m", delaystream.After(0))
	fail := func(context.Context, *delaystream.Delivery) error { return errors.New("boom") }
	done, err := q.Work(ctx, "billing", fail,
		delaystream.WithMaxAttempts(3), delaystream.WithBackoff(delaystream.ConstantBackoff(0)))
	require.NoError(t, err)
	require.Len(t, done, 3)
	for i, h := range done {
		assert.Equal(t, i+1, h.Attempt)
	}
	assert.Equal(t, delaystream.HandlerRetried, done[0].Outcome)
	assert.Equal(t, delaystream.HandlerRetried, done[1].Outcome)
	assert.Equal(t, delaystream.HandlerDeadLettered, done[2].Outcome)
	assert.Equal(t, delaystream.ReasonAttempts, done[2].Reason)

	billing, err := q.Handle("billing", fail)
	require.NoError(t, err)
	dead, err := billing.DeadLetters(ctx, "", 10)
	require.NoError(t, err)
	require.Len(t, dead, 1)
	assert.Equal(t, "m", dead[0].ID)
	assert.Equal(t, "boom", dead[0].LastError)
}

// A snoozed message comes back when the clock reaches it, with the same
// attempt.
func TestWorkSnoozeKeepsAttempt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := dstest.New(t, "orders")
	schedule(t, q, "m", delaystream.After(0))
	var attempts []int
	h := func(_ context.Context, d *delaystream.Delivery) error {
		if attempts = append(attempts, d.Attempt); len(attempts) == 1 {
			return delaystream.Snooze(time.Minute)
		}
		return nil
	}
	_, err := q.Work(ctx, "g", h)
	require.NoError(t, err)
	q.Advance(time.Minute - time.Millisecond)
	_, err = q.Work(ctx, "g", h)
	require.NoError(t, err)
	assert.Equal(t, []int{1}, attempts)
	q.Advance(time.Millisecond)
	done, err := q.Work(ctx, "g", h)
	require.NoError(t, err)
	require.Len(t, done, 1)
	assert.Equal(t, delaystream.HandlerAcked, done[0].Outcome)
	assert.Equal(t, []int{1, 1}, attempts)
}

// A message past its deadline (by the host's clock) is dead-lettered
// without running the handler.
func TestWorkExpired(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := dstest.New(t, "orders")
	_, err := q.Schedule(ctx, delaystream.Message{ID: "m", Deadline: q.Now().Add(-time.Minute)},
		delaystream.At(q.Now().Add(-time.Hour)))
	require.NoError(t, err)
	done, err := q.Work(ctx, "g", func(context.Context, *delaystream.Delivery) error {
		t.Error("handler ran")
		return nil
	})
	require.NoError(t, err)
	require.Len(t, done, 1)
	assert.Equal(t, dstest.Handled{ID: "m", Attempt: 1, Outcome: delaystream.HandlerDeadLettered, Reason: delaystream.ReasonExpired}, done[0])
}

func TestWorkTyped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	type order struct{ ID int }
	q := dstest.New(t, "orders")
	_, err := delaystream.Schedule(ctx, q.Queue, "good", order{ID: 7}, delaystream.After(0))
	require.NoError(t, err)
	_, err = q.Schedule(ctx, delaystream.Message{ID: "bad", Payload: []byte{0xc1}}, delaystream.After(time.Second))
	require.NoError(t, err)
	q.Advance(time.Second)
	var got []int
	done, err := dstest.WorkTyped(ctx, q, "g", func(_ context.Context, _ *delaystream.Delivery, o order) error {
		got = append(got, o.ID)
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, []int{7}, got)
	require.Len(t, done, 2)
	assert.Equal(t, delaystream.HandlerAcked, done[0].Outcome)
	assert.Equal(t, "bad", done[1].ID)
	assert.Equal(t, delaystream.HandlerDeadLettered, done[1].Outcome)
	assert.Equal(t, delaystream.ReasonUndecodable, done[1].Reason)
	assert.Error(t, done[1].Err)
}

// Every group gets every message, whenever its first Work is, and retries
// in one group alone.
func TestWorkGroups(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := dstest.New(t, "orders")
	schedule(t, q, "a", delaystream.After(0))
	schedule(t, q, "b", delaystream.After(time.Second))
	q.Advance(time.Second)
	fail := func(context.Context, *delaystream.Delivery) error { return errors.New("boom") }
	done, err := q.Work(ctx, "billing", fail, delaystream.WithBackoff(delaystream.ConstantBackoff(time.Minute)))
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b"}, ids(done))

	done, err = q.Work(ctx, "audit", ack)
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b"}, ids(done))
	done, err = q.Work(ctx, "audit", ack)
	require.NoError(t, err)
	assert.Empty(t, done)

	q.Advance(time.Minute)
	done, err = q.Work(ctx, "audit", ack)
	require.NoError(t, err)
	assert.Empty(t, done, "billing's retries are billing's")
	done, err = q.Work(ctx, "billing", ack)
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b"}, ids(done))
}

func ids(done []dstest.Handled) []string {
	var out []string
	for _, h := range done {
		out = append(out, h.ID)
	}
	return out
}

// What a handler schedules due now is handled in the same Work; what it
// schedules later waits.
func TestWorkFollowUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := dstest.New(t, "orders")
	schedule(t, q, "first", delaystream.After(0))
	done, err := q.Work(ctx, "g", func(ctx context.Context, d *delaystream.Delivery) error {
		if d.ID != "first" {
			return nil
		}
		if _, err := q.Schedule(ctx, delaystream.Message{ID: "now"}, delaystream.After(0)); err != nil {
			return err
		}
		_, err := q.Schedule(ctx, delaystream.Message{ID: "later"}, delaystream.After(time.Hour))
		return err
	})
	require.NoError(t, err)
	assert.Equal(t, []string{"first", "now"}, ids(done))
	waiting, err := q.Scheduled(ctx)
	require.NoError(t, err)
	require.Len(t, waiting, 1)
	assert.Equal(t, "later", waiting[0].ID)
}

// Many messages over shards and concurrent workers: each handled once.
func TestWorkConcurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := dstest.New(t, "orders", delaystream.WithShards(4))
	const n = 50
	items := make([]delaystream.Item, n)
	for i := range items {
		items[i] = delaystream.Item{Message: delaystream.Message{ID: fmt.Sprintf("m%02d", i)}, When: delaystream.After(time.Duration(i) * time.Millisecond)}
	}
	_, err := q.ScheduleBatch(ctx, items)
	require.NoError(t, err)
	q.Advance(n * time.Millisecond)
	var mu sync.Mutex
	seen := map[string]int{}
	done, err := q.Work(ctx, "g", func(_ context.Context, d *delaystream.Delivery) error {
		mu.Lock()
		defer mu.Unlock()
		seen[d.ID]++
		return nil
	}, delaystream.WithWorkers(8))
	require.NoError(t, err)
	assert.Len(t, done, n)
	assert.Len(t, seen, n)
	for id, k := range seen {
		assert.Equal(t, 1, k, id)
	}
}

// Work promotes by itself, whatever the queue's options say.
func TestWorkWithoutPromotion(t *testing.T) {
	t.Parallel()
	q := dstest.New(t, "orders", delaystream.WithoutPromotion())
	schedule(t, q, "m", delaystream.After(0))
	done, err := q.Work(context.Background(), "g", ack)
	require.NoError(t, err)
	assert.Equal(t, []string{"m"}, ids(done))
}

// Work stopped by its ctx returns ctx's error and hands the message back
// to the group; the next Work delivers it again.
func TestWorkCancelled(t *testing.T) {
	t.Parallel()
	q := dstest.New(t, "orders", delaystream.WithDrainTimeout(100*time.Millisecond), delaystream.WithLogger(quiet))
	schedule(t, q, "m", delaystream.After(0))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done, err := q.Work(ctx, "g", func(hctx context.Context, _ *delaystream.Delivery) error {
		cancel()
		<-hctx.Done() // the drain timeout
		return hctx.Err()
	})
	require.ErrorIs(t, err, context.Canceled)
	require.Len(t, done, 1)
	assert.Equal(t, delaystream.HandlerHandedBack, done[0].Outcome)

	var deliveries int64
	done, err = q.Work(context.Background(), "g", func(_ context.Context, d *delaystream.Delivery) error {
		deliveries = d.Deliveries
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, []string{"m"}, ids(done))
	// 2 on Redis; miniredis counts the hand-back's XCLAIM JUSTID as one more.
	assert.GreaterOrEqual(t, deliveries, int64(2))

	done, err = q.Work(ctx, "g", ack) // ctx is done
	require.ErrorIs(t, err, context.Canceled)
	assert.Empty(t, done)
}

// A message that comes back without delay for ever stops Work.
func TestWorkRunaway(t *testing.T) {
	t.Parallel()
	q := dstest.New(t, "orders")
	schedule(t, q, "m", delaystream.After(0))
	done, err := q.Work(context.Background(), "g", func(context.Context, *delaystream.Delivery) error {
		return delaystream.Snooze(0)
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `message "m" handled 1000 times`)
	assert.GreaterOrEqual(t, len(done), 999)
}

func TestWorkInvalid(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := dstest.New(t, "orders")
	for _, tc := range []struct {
		name string
		work func() ([]dstest.Handled, error)
		is   error
	}{
		{"nil handler", func() ([]dstest.Handled, error) { return q.Work(ctx, "g", nil) }, delaystream.ErrInvalidOption},
		{"nil typed handler", func() ([]dstest.Handled, error) {
			return dstest.WorkTyped[int](ctx, q, "g", nil)
		}, delaystream.ErrInvalidOption},
		{"group name", func() ([]dstest.Handled, error) { return q.Work(ctx, "a b", ack) }, delaystream.ErrInvalidName},
		{"group option", func() ([]dstest.Handled, error) {
			return q.Work(ctx, "g", ack, delaystream.WithWorkers(0))
		}, delaystream.ErrInvalidOption},
	} {
		t.Run(tc.name, func(t *testing.T) {
			done, err := tc.work()
			assert.ErrorIs(t, err, tc.is)
			assert.Empty(t, done)
		})
	}
}
