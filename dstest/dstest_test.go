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
	"sync/atomic"
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

// handle adds group g to q with h and opts, as the application would.
func handle(t *testing.T, q *dstest.Queue, g string, h delaystream.Handler, opts ...delaystream.GroupOption) *delaystream.Group {
	t.Helper()
	grp, err := q.Handle(g, h, opts...)
	require.NoError(t, err)
	return grp
}

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
	handle(t, q, "g", ack)

	assert.True(t, start.Add(time.Minute-time.Millisecond).Equal(q.Advance(time.Minute-time.Millisecond)))
	done, err := q.Work(ctx, "g")
	require.NoError(t, err)
	assert.Empty(t, done)

	q.Advance(time.Millisecond)
	assert.True(t, start.Add(time.Minute).Equal(q.Now()))
	done, err = q.Work(ctx, "g")
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
			handle(t, q, "g", tc.h, tc.opts...)
			done, err := q.Work(context.Background(), "g")
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
	billing := handle(t, q, "billing", fail, delaystream.WithMaxAttempts(3), delaystream.WithBackoff(delaystream.ConstantBackoff(0)))
	done, err := q.Work(ctx, "billing")
	require.NoError(t, err)
	require.Len(t, done, 3)
	for i, h := range done {
		assert.Equal(t, i+1, h.Attempt)
	}
	assert.Equal(t, delaystream.HandlerRetried, done[0].Outcome)
	assert.Equal(t, delaystream.HandlerRetried, done[1].Outcome)
	assert.Equal(t, delaystream.HandlerDeadLettered, done[2].Outcome)
	assert.Equal(t, delaystream.ReasonAttempts, done[2].Reason)

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
	handle(t, q, "g", h)
	_, err := q.Work(ctx, "g")
	require.NoError(t, err)
	q.Advance(time.Minute - time.Millisecond)
	_, err = q.Work(ctx, "g")
	require.NoError(t, err)
	assert.Equal(t, []int{1}, attempts)
	q.Advance(time.Millisecond)
	done, err := q.Work(ctx, "g")
	require.NoError(t, err)
	require.Len(t, done, 1)
	assert.Equal(t, delaystream.HandlerAcked, done[0].Outcome)
	assert.Equal(t, []int{1, 1}, attempts)
}

// A message's deadline is judged by the server's clock: Advance past it
// and the message is dead-lettered without running the handler; before
// it, the message is handled.
func TestWorkExpired(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := dstest.New(t, "orders")
	for _, id := range []string{"late", "on time"} {
		_, err := q.Schedule(ctx, delaystream.Message{ID: id, Deadline: q.Now().Add(time.Hour)}, delaystream.After(time.Minute))
		require.NoError(t, err)
	}
	var ran []string
	handle(t, q, "g", func(_ context.Context, d *delaystream.Delivery) error {
		ran = append(ran, d.ID)
		return nil
	})
	_, err := q.Reschedule(ctx, "late", delaystream.At(q.Now().Add(2*time.Hour)))
	require.NoError(t, err)
	q.Advance(time.Minute)
	done, err := q.Work(ctx, "g")
	require.NoError(t, err)
	assert.Equal(t, []string{"on time"}, ran, "before its deadline")
	assert.Equal(t, []string{"on time"}, ids(done))

	q.Advance(2 * time.Hour) // past the deadline, by the server's clock only
	done, err = q.Work(ctx, "g")
	require.NoError(t, err)
	require.Len(t, done, 1)
	assert.Equal(t, dstest.Handled{ID: "late", Attempt: 1, Outcome: delaystream.HandlerDeadLettered, Reason: delaystream.ReasonExpired}, done[0])
	assert.Equal(t, []string{"on time"}, ran, "the handler did not run")
}

func TestWorkTyped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	type order struct{ ID int }
	q := dstest.New(t, "orders")
	_, err := delaystream.Schedule(ctx, q.Queue, delaystream.Message{ID: "good"}, order{ID: 7}, delaystream.After(0))
	require.NoError(t, err)
	_, err = q.Schedule(ctx, delaystream.Message{ID: "bad", Payload: []byte{0xc1}}, delaystream.After(time.Second))
	require.NoError(t, err)
	q.Advance(time.Second)
	var got []int
	_, err = delaystream.HandleTyped(q.Queue, "g", func(_ context.Context, _ *delaystream.Delivery, o order) error {
		got = append(got, o.ID)
		return nil
	})
	require.NoError(t, err)
	done, err := q.Work(ctx, "g")
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
	failing := true
	handle(t, q, "billing", func(context.Context, *delaystream.Delivery) error {
		if failing {
			return errors.New("boom")
		}
		return nil
	}, delaystream.WithBackoff(delaystream.ConstantBackoff(time.Minute)))
	handle(t, q, "audit", ack)
	done, err := q.Work(ctx, "billing")
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b"}, ids(done))

	done, err = q.Work(ctx, "audit")
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b"}, ids(done))
	done, err = q.Work(ctx, "audit")
	require.NoError(t, err)
	assert.Empty(t, done)

	q.Advance(time.Minute)
	done, err = q.Work(ctx, "audit")
	require.NoError(t, err)
	assert.Empty(t, done, "billing's retries are billing's")
	failing = false
	done, err = q.Work(ctx, "billing")
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
	handle(t, q, "g", func(ctx context.Context, d *delaystream.Delivery) error {
		if d.ID != "first" {
			return nil
		}
		if _, err := q.Schedule(ctx, delaystream.Message{ID: "now"}, delaystream.After(0)); err != nil {
			return err
		}
		_, err := q.Schedule(ctx, delaystream.Message{ID: "later"}, delaystream.After(time.Hour))
		return err
	})
	done, err := q.Work(ctx, "g")
	require.NoError(t, err)
	assert.Equal(t, []string{"first", "now"}, ids(done))
	waiting, err := q.Scheduled(ctx)
	require.NoError(t, err)
	require.Len(t, waiting, 1)
	assert.Equal(t, "later", waiting[0].ID)
}

// Many messages over shards, in a group that runs eight workers in
// production: each handled once, one at a time.
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
	var running, most atomic.Int32
	handle(t, q, "g", func(_ context.Context, d *delaystream.Delivery) error {
		n := running.Add(1)
		defer running.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		mu.Lock()
		defer mu.Unlock()
		seen[d.ID]++
		return nil
	}, delaystream.WithWorkers(8))
	done, err := q.Work(ctx, "g")
	require.NoError(t, err)
	assert.Len(t, done, n)
	assert.Len(t, seen, n)
	assert.Equal(t, int32(1), most.Load(), "one handler at a time")
	for id, k := range seen {
		assert.Equal(t, 1, k, id)
	}
}

// Work promotes by itself, whatever the queue's options say.
func TestWorkWithoutPromotion(t *testing.T) {
	t.Parallel()
	q := dstest.New(t, "orders", delaystream.WithoutPromotion())
	schedule(t, q, "m", delaystream.After(0))
	handle(t, q, "g", ack)
	done, err := q.Work(context.Background(), "g")
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
	first := true
	var deliveries int64
	handle(t, q, "g", func(hctx context.Context, d *delaystream.Delivery) error {
		if first {
			first = false
			cancel()
			<-hctx.Done() // the drain timeout
			return hctx.Err()
		}
		deliveries = d.Deliveries
		return nil
	})
	done, err := q.Work(ctx, "g")
	require.ErrorIs(t, err, context.Canceled)
	require.Len(t, done, 1)
	assert.Equal(t, delaystream.HandlerHandedBack, done[0].Outcome)

	done, err = q.Work(context.Background(), "g")
	require.NoError(t, err)
	assert.Equal(t, []string{"m"}, ids(done))
	// 2 on Redis; miniredis counts the hand-back's XCLAIM JUSTID as one more.
	assert.GreaterOrEqual(t, deliveries, int64(2))

	done, err = q.Work(ctx, "g") // ctx is done
	require.ErrorIs(t, err, context.Canceled)
	assert.Empty(t, done)
}

// A message that comes back without delay for ever stops Work.
func TestWorkRunaway(t *testing.T) {
	t.Parallel()
	q := dstest.New(t, "orders")
	schedule(t, q, "m", delaystream.After(0))
	handle(t, q, "g", func(context.Context, *delaystream.Delivery) error {
		return delaystream.Snooze(0)
	})
	done, err := q.Work(context.Background(), "g")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `message "m" handled 1000 times`)
	assert.GreaterOrEqual(t, len(done), 999)
}

// Work refuses a group the queue was not given.
func TestWorkInvalid(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := dstest.New(t, "orders")
	schedule(t, q, "m", delaystream.After(0))
	done, err := q.Work(ctx, "g")
	assert.ErrorIs(t, err, delaystream.ErrInvalidOption)
	assert.Contains(t, err.Error(), `no group "g"`)
	assert.Empty(t, done)
	_, err = q.Settle(ctx, "g")
	assert.ErrorIs(t, err, delaystream.ErrInvalidOption)
	waiting, err := q.Scheduled(ctx)
	require.NoError(t, err)
	assert.Len(t, waiting, 1, "nothing delivered")
}

// Settle runs a group through its backoffs and snoozes by moving the
// clock, and returns each message's deliveries; a message waiting to be
// due stays waiting.
func TestSettle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := dstest.New(t, "orders")
	start := q.Now()
	schedule(t, q, "flaky", delaystream.After(0))
	schedule(t, q, "doomed", delaystream.After(0))
	schedule(t, q, "sleepy", delaystream.After(0))
	schedule(t, q, "later", delaystream.After(24*time.Hour))
	tries := map[string]int{}
	handle(t, q, "g", func(_ context.Context, d *delaystream.Delivery) error {
		tries[d.ID]++
		switch {
		case d.ID == "flaky" && tries[d.ID] < 3:
			return errors.New("flaky")
		case d.ID == "doomed":
			return errors.New("doomed")
		case d.ID == "sleepy" && tries[d.ID] == 1:
			return delaystream.Snooze(time.Hour)
		}
		return nil
	}, delaystream.WithMaxAttempts(4), delaystream.WithBackoff(delaystream.ConstantBackoff(time.Minute)))

	got, err := q.Settle(ctx, "g")
	require.NoError(t, err)
	outcomes := func(hs []dstest.Handled) []delaystream.HandlerOutcome {
		var out []delaystream.HandlerOutcome
		for _, h := range hs {
			out = append(out, h.Outcome)
		}
		return out
	}
	r, a, d := delaystream.HandlerRetried, delaystream.HandlerAcked, delaystream.HandlerDeadLettered
	assert.Equal(t, []delaystream.HandlerOutcome{r, r, a}, outcomes(got["flaky"]))
	assert.Equal(t, []delaystream.HandlerOutcome{r, r, r, d}, outcomes(got["doomed"]))
	assert.Equal(t, []delaystream.HandlerOutcome{r, a}, outcomes(got["sleepy"]))
	assert.Equal(t, 1, got["sleepy"][1].Attempt, "a snooze keeps the attempt")
	assert.NotContains(t, got, "later")
	assert.True(t, start.Add(time.Hour).Equal(q.Now()), "the clock moved to the last retry: %s", q.Now().Sub(start))
	waiting, err := q.Scheduled(ctx)
	require.NoError(t, err)
	require.Len(t, waiting, 1)
	assert.Equal(t, "later", waiting[0].ID)
}
