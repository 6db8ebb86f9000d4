package delay_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/codec"
	"github.com/delaystream/delaystream/internal/delay"
	"github.com/delaystream/delaystream/internal/scripts"
)

// maxDue is the latest due time accepted: the last millisecond of year 9999.
var maxDue = time.Date(9999, 12, 31, 23, 59, 59, 999_000_000, time.UTC)

func TestScheduleInvalidMessageWritesNothing(t *testing.T) {
	t.Parallel()
	future := delay.After(time.Hour)
	manyHeaders := map[string]string{}
	for i := range delay.MaxHeaders + 1 {
		manyHeaders["h"+strconv.Itoa(i)] = "v"
	}
	schedule := func(m delay.Message, w delay.When) func(context.Context, *testing.T, *delay.Queue) error {
		return func(ctx context.Context, t *testing.T, q *delay.Queue) error {
			res, err := q.Schedule(ctx, m, w)
			assert.Equal(t, delay.Result{}, res)
			return err
		}
	}
	valid := delay.Message{ID: "ok", Payload: []byte("x")}
	tests := []struct {
		name string
		run  func(context.Context, *testing.T, *delay.Queue) error
		msg  string
	}{
		{"id too long", schedule(delay.Message{ID: strings.Repeat("i", delay.MaxIDLen+1)}, future), "id is 257 bytes, max 256"},
		{"id with newline", schedule(delay.Message{ID: "a\nb"}, future), "control character"},
		{"id with unit separator", schedule(delay.Message{ID: "a\x1fb"}, future), "control character"},
		{"id with DEL", schedule(delay.Message{ID: "a\x7f"}, future), "control character"},
		{"id with C1 control", schedule(delay.Message{ID: "a\u009bb"}, future), "control character"},
		{"id not UTF-8", schedule(delay.Message{ID: "\xc3("}, future), "not valid UTF-8"},
		{"payload over max", schedule(delay.Message{Payload: make([]byte, 11)}, future), "payload is 11 bytes, max 10"},
		{"too many headers", schedule(delay.Message{Headers: manyHeaders}, future), "65 headers, max 64"},
		{"empty header key", schedule(delay.Message{Headers: map[string]string{"": "v"}}, future), "empty header key"},
		{"reserved header", schedule(delay.Message{Headers: map[string]string{"ds.attempt": "2"}}, future), `reserved prefix "ds."`},
		{"header key too long", schedule(delay.Message{Headers: map[string]string{strings.Repeat("k", delay.MaxHeaderLen+1): "v"}}, future), "longer than 4096"},
		{"header value too long", schedule(delay.Message{Headers: map[string]string{"k": strings.Repeat("v", delay.MaxHeaderLen+1)}}, future), "longer than 4096"},
		{"unknown message policy", schedule(delay.Message{OnDuplicate: delay.Policy(4)}, future), "unknown duplicate policy 4"},
		{"zero When", schedule(valid, delay.When{}), "zero When"},
		{"negative After", schedule(valid, delay.After(-time.Nanosecond)), "negative delay -1ns"},
		{"zero At", schedule(valid, delay.At(time.Time{})), "zero time in At"},
		{"At after year 9999", schedule(valid, delay.At(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC))), "after year 9999"},
		{"At rounding past year 9999", schedule(valid, delay.At(maxDue.Add(time.Nanosecond))), "after year 9999"},
		{"batch with one bad item", func(ctx context.Context, t *testing.T, q *delay.Queue) error {
			items := make([]delay.Item, 10)
			for i := range items {
				items[i] = delay.Item{Message: delay.Message{ID: fmt.Sprint("b", i)}, When: future}
			}
			items[7].When = delay.After(-time.Second)
			res, err := q.ScheduleBatch(ctx, items)
			assert.Nil(t, res)
			return err
		}, "schedule item 7: delaystream: invalid message: negative delay"},
		{"cancel empty id", func(ctx context.Context, t *testing.T, q *delay.Queue) error {
			ok, err := q.Cancel(ctx, "")
			assert.False(t, ok)
			return err
		}, "cancel: delaystream: invalid message: empty id"},
		{"get control-char id", func(ctx context.Context, t *testing.T, q *delay.Queue) error {
			_, err := q.Get(ctx, "a\tb")
			return err
		}, "get: delaystream: invalid message"},
		{"reschedule empty id", func(ctx context.Context, t *testing.T, q *delay.Queue) error {
			_, err := q.Reschedule(ctx, "", future)
			return err
		}, "reschedule: delaystream: invalid message: empty id"},
		{"reschedule zero When", func(ctx context.Context, t *testing.T, q *delay.Queue) error {
			_, err := q.Reschedule(ctx, "id", delay.When{})
			return err
		}, "reschedule id: delaystream: invalid message: zero When"},
		{"typed encoding failure", func(ctx context.Context, t *testing.T, q *delay.Queue) error {
			_, err := delay.NewTyped[func()](q).Schedule(ctx, "f", func() {}, future)
			return err
		}, "delaystream: invalid message: codec: msgpack marshal"},
	}
	onEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		q := b.queue(t, delay.WithMaxPayload(10))
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				err := tt.run(ctx, t, q)
				require.Error(t, err)
				assert.ErrorIs(t, err, delay.ErrInvalidMessage)
				assert.Contains(t, err.Error(), tt.msg)
				assert.NotContains(t, err.Error(), "item 0", "a single message's error speaks of no items")
				assert.Zero(t, b.keyCount(t), "an invalid call wrote to Redis")
			})
		}
		n, err := q.Len(ctx)
		require.NoError(t, err)
		assert.Zero(t, n)
	})
}

func TestSchedulePolicies(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		queue    []delay.Option
		override delay.Policy
		outcome  delay.Outcome
		duplErr  bool // Schedule returns ErrDuplicate
		replaced bool // the second message is stored
	}{
		{name: "default is keep", outcome: delay.Kept},
		{name: "queue keep", queue: []delay.Option{delay.WithDuplicatePolicy(delay.Keep)}, outcome: delay.Kept},
		{name: "queue replace", queue: []delay.Option{delay.WithDuplicatePolicy(delay.Replace)}, outcome: delay.Replaced, replaced: true},
		{name: "queue reject", queue: []delay.Option{delay.WithDuplicatePolicy(delay.Reject)}, outcome: delay.Rejected, duplErr: true},
		{name: "explicit queue default", queue: []delay.Option{delay.WithDuplicatePolicy(delay.Replace)}, override: delay.QueueDefault, outcome: delay.Replaced, replaced: true},
		{name: "message replace over queue keep", override: delay.Replace, outcome: delay.Replaced, replaced: true},
		{name: "message reject over queue keep", override: delay.Reject, outcome: delay.Rejected, duplErr: true},
		{name: "message keep over queue reject", queue: []delay.Option{delay.WithDuplicatePolicy(delay.Reject)}, override: delay.Keep, outcome: delay.Kept},
		{name: "message keep over queue replace", queue: []delay.Option{delay.WithDuplicatePolicy(delay.Replace)}, override: delay.Keep, outcome: delay.Kept},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			onEachBackend(t, func(t *testing.T, b backend) {
				ctx := context.Background()
				q := b.queue(t, tt.queue...)
				due1 := time.Now().Add(time.Hour).Truncate(time.Millisecond)
				due2 := due1.Add(time.Hour)

				res, err := q.Schedule(ctx, delay.Message{ID: "m", Payload: []byte("v1"), Headers: map[string]string{"n": "1"}}, delay.At(due1))
				require.NoError(t, err)
				assert.Equal(t, delay.Result{ID: "m", Due: due1, Outcome: delay.Created}, res)

				res, err = q.Schedule(ctx, delay.Message{ID: "m", Payload: []byte("v2"), OnDuplicate: tt.override}, delay.At(due2))
				if tt.duplErr {
					require.ErrorIs(t, err, delay.ErrDuplicate)
					assert.Contains(t, err.Error(), "schedule m: delaystream: duplicate message id")
				} else {
					require.NoError(t, err)
				}
				assert.Equal(t, "m", res.ID)
				assert.Equal(t, tt.outcome, res.Outcome)

				env, err := q.Get(ctx, "m")
				require.NoError(t, err)
				if tt.replaced {
					assert.True(t, due2.Equal(res.Due))
					assert.True(t, due2.Equal(env.Due))
					assert.Equal(t, []byte("v2"), env.Payload)
					assert.Nil(t, env.Headers)
				} else {
					assert.True(t, due1.Equal(res.Due), "the existing due time is reported")
					assert.True(t, due1.Equal(env.Due))
					assert.Equal(t, []byte("v1"), env.Payload)
					assert.Equal(t, map[string]string{"n": "1"}, env.Headers)
				}
				n, err := q.Len(ctx)
				require.NoError(t, err)
				assert.Equal(t, int64(1), n)
			})
		})
	}
}

func TestScheduleBatchDuplicatesInsideOneBatch(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		q := b.queue(t)
		base := time.Now().Add(time.Hour).Truncate(time.Millisecond)
		at := func(i int) delay.When { return delay.At(base.Add(time.Duration(i) * time.Minute)) }
		items := []delay.Item{
			{Message: delay.Message{ID: "a", Payload: []byte("a1")}, When: at(0)},
			{Message: delay.Message{ID: "b", Payload: []byte("b1")}, When: at(1)},
			{Message: delay.Message{ID: "a", Payload: []byte("a2")}, When: at(2)},                             // queue default: keep
			{Message: delay.Message{ID: "b", Payload: []byte("b2"), OnDuplicate: delay.Replace}, When: at(3)}, // replace
			{Message: delay.Message{ID: "a", Payload: []byte("a3"), OnDuplicate: delay.Reject}, When: at(4)},  // reject
			{Message: delay.Message{ID: "c"}, When: at(5)},
		}
		res, err := q.ScheduleBatch(ctx, items)
		require.NoError(t, err, "duplicates are outcomes, not errors")
		require.Len(t, res, len(items))
		want := []struct {
			id      string
			outcome delay.Outcome
			minute  int
		}{
			{"a", delay.Created, 0}, {"b", delay.Created, 1}, {"a", delay.Kept, 0},
			{"b", delay.Replaced, 3}, {"a", delay.Rejected, 0}, {"c", delay.Created, 5},
		}
		for i, w := range want {
			assert.Equal(t, w.id, res[i].ID, "item %d", i)
			assert.Equal(t, w.outcome, res[i].Outcome, "item %d", i)
			assert.True(t, base.Add(time.Duration(w.minute)*time.Minute).Equal(res[i].Due), "item %d due %v", i, res[i].Due)
		}
		a, err := q.Get(ctx, "a")
		require.NoError(t, err)
		assert.Equal(t, "a1", string(a.Payload))
		bb, err := q.Get(ctx, "b")
		require.NoError(t, err)
		assert.Equal(t, "b2", string(bb.Payload))
		n, err := q.Len(ctx)
		require.NoError(t, err)
		assert.Equal(t, int64(3), n)
	})
}

// countEvals counts script calls, pipelined or not.
type countEvals struct{ calls atomic.Int64 }

func (h *countEvals) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *countEvals) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.count(cmd)
		return next(ctx, cmd)
	}
}
func (h *countEvals) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			h.count(c)
		}
		return next(ctx, cmds)
	}
}
func (h *countEvals) count(cmd redis.Cmder) {
	if n := cmd.Name(); n == "evalsha" || n == "eval" {
		h.calls.Add(1)
	}
}

func TestScheduleBatchChunking(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		hook := &countEvals{}
		b.rdb.(*redis.Client).AddHook(hook)
		q := b.queue(t, delay.WithBatchSize(3))
		base := time.Now().Add(time.Hour).Truncate(time.Millisecond)
		items := make([]delay.Item, 10)
		for i := range items {
			items[i] = delay.Item{Message: delay.Message{ID: fmt.Sprintf("id-%02d", i), Payload: []byte{byte(i)}},
				When: delay.At(base.Add(time.Duration(10-i) * time.Second))}
		}
		// Load the script first, so that a NOSCRIPT retry does not count.
		_, err := q.Schedule(ctx, delay.Message{ID: "warm-up"}, delay.After(time.Hour))
		require.NoError(t, err)
		before := hook.calls.Load()

		res, err := q.ScheduleBatch(ctx, items)
		require.NoError(t, err)
		assert.Equal(t, int64(4), hook.calls.Load()-before, "10 items in chunks of 3: 4 script calls")
		require.Len(t, res, 10)
		for i, r := range res {
			assert.Equal(t, fmt.Sprintf("id-%02d", i), r.ID)
			assert.Equal(t, delay.Created, r.Outcome)
			assert.True(t, base.Add(time.Duration(10-i)*time.Second).Equal(r.Due), "item %d: %v", i, r.Due)
			env, err := q.Get(ctx, r.ID)
			require.NoError(t, err)
			assert.Equal(t, []byte{byte(i)}, env.Payload)
		}
		n, err := q.Len(ctx)
		require.NoError(t, err)
		assert.Equal(t, int64(11), n)

		res, err = q.ScheduleBatch(ctx, nil)
		require.NoError(t, err)
		assert.Empty(t, res)
	})
}

func TestScheduleGeneratesIDs(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		q := b.queue(t)
		// More ids than one read of random bytes serves (256).
		items := make([]delay.Item, 600)
		for i := range items {
			items[i] = delay.Item{Message: delay.Message{Payload: []byte("x")}, When: delay.After(time.Hour)}
		}
		items[300].Message.ID = "given"
		res, err := q.ScheduleBatch(ctx, items)
		require.NoError(t, err)
		seen := map[string]bool{}
		for i, r := range res {
			assert.Equal(t, delay.Created, r.Outcome)
			assert.False(t, seen[r.ID], "duplicate id %s", r.ID)
			seen[r.ID] = true
			if i == 300 {
				assert.Equal(t, "given", r.ID)
				continue
			}
			require.Len(t, r.ID, 26)
			assert.NoError(t, delay.ValidateID(r.ID))
			// The time part of a generated id is its due time.
			assert.Equal(t, r.Due, ulidTime(t, r.ID), "id %s", r.ID)
			got, err := q.Get(ctx, r.ID)
			require.NoError(t, err, "get %s", r.ID)
			assert.Equal(t, []byte("x"), got.Payload)
		}
		n, err := q.Len(ctx)
		require.NoError(t, err)
		assert.Equal(t, int64(600), n)
	})
}

// ulidTime decodes the millisecond timestamp in the first 10 characters of
// a ULID.
func ulidTime(t *testing.T, id string) time.Time {
	t.Helper()
	const alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
	var ms int64
	for _, c := range id[:10] {
		i := strings.IndexRune(alphabet, c)
		require.GreaterOrEqual(t, i, 0, "character %q of %s", c, id)
		ms = ms<<5 | int64(i)
	}
	return time.UnixMilli(ms)
}

func TestNewID(t *testing.T) {
	t.Parallel()
	t.Run("unique and well formed", func(t *testing.T) {
		t.Parallel()
		before := time.Now().Truncate(time.Millisecond)
		const n = 10000
		ids := make([]string, n)
		seen := make(map[string]bool, n)
		for i := range ids {
			ids[i] = delay.NewID()
			require.Len(t, ids[i], 26)
			require.False(t, seen[ids[i]], "duplicate id %s", ids[i])
			seen[ids[i]] = true
		}
		after := time.Now()
		for i, id := range ids {
			require.LessOrEqual(t, id[0], byte('7'), "a 48-bit time leaves the first digit <= 7")
			ts := ulidTime(t, id)
			require.False(t, ts.Before(before) || ts.After(after), "id %s time %v outside [%v, %v]", id, ts, before, after)
			if i > 0 {
				// The time part never goes backwards, so ids sort by creation time.
				require.LessOrEqual(t, ids[i-1][:10], id[:10])
			}
		}
	})
	t.Run("later ids sort after earlier ones", func(t *testing.T) {
		t.Parallel()
		prev := delay.NewID()
		for range 5 {
			// Wait for the next millisecond by reading the clock.
			for ms := time.Now().UnixMilli(); time.Now().UnixMilli() == ms; {
			}
			next := delay.NewID()
			assert.Less(t, prev, next)
			prev = next
		}
	})
}

func TestValidateID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		id    string
		valid bool
	}{
		{"order:5001:cancel", true},
		{"with space and {braces}", true},
		{"ünïcödé-✓", true},
		{strings.Repeat("x", delay.MaxIDLen), true},
		{"", false},
		{strings.Repeat("x", delay.MaxIDLen+1), false},
		{"tab\t", false},
		{"nul\x00", false},
		{"sep\x1f", false},
		{"del\x7f", false},
		{"c1\u0085", false},
		{"bad\xff", false},
	}
	for _, tt := range tests {
		t.Run(strconv.Quote(tt.id), func(t *testing.T) {
			t.Parallel()
			err := delay.ValidateID(tt.id)
			if tt.valid {
				assert.NoError(t, err)
			} else {
				assert.ErrorIs(t, err, delay.ErrInvalidMessage)
			}
		})
	}
}

func TestDueTimes(t *testing.T) {
	t.Parallel()
	base := time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		at   time.Time
		want int64 // due, Unix ms
	}{
		{"exact millisecond", base, base.UnixMilli()},
		{"one nanosecond rounds up", base.Add(time.Nanosecond), base.UnixMilli() + 1},
		{"sub-millisecond rounds up", base.Add(999_999 * time.Nanosecond), base.UnixMilli() + 1},
		{"beyond year 2262 rounds up too", time.Date(3000, 1, 1, 0, 0, 0, 1, time.UTC), time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli() + 1},
		{"beyond year 2262, exact", time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()},
		{"last millisecond of year 9999", maxDue, 253402300799999},
		{"other time zone", base.In(time.FixedZone("X", 5*3600)), base.UnixMilli()},
		{"Unix epoch", time.UnixMilli(0), 0},
		{"before 1970 is due at once", time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC), 0},
		{"just before 1970", time.UnixMilli(0).Add(-500 * time.Microsecond), 0},
	}
	onEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		q := b.queue(t)
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				id := fmt.Sprint("due-", i)
				res, err := q.Schedule(ctx, delay.Message{ID: id}, delay.At(tt.at))
				require.NoError(t, err)
				assert.Equal(t, tt.want, res.Due.UnixMilli())
				assert.False(t, res.Due.Before(tt.at) && tt.want > 0, "due %v is before %v", res.Due, tt.at)
				env, err := q.Get(ctx, id)
				require.NoError(t, err)
				assert.Equal(t, tt.want, env.Due.UnixMilli(), "stored score")
			})
		}
	})
}

// After is measured from the Redis clock, not this host's: with miniredis
// the server clock can be set far from the host's.
func TestAfterUsesRedisClock(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		q := b.queue(t)
		if b.mr != nil {
			server := time.Date(2040, 1, 1, 0, 0, 0, 0, time.UTC)
			b.mr.SetTime(server)
			tests := []struct {
				d    time.Duration
				want time.Time
			}{
				{0, server},
				{5 * time.Second, server.Add(5 * time.Second)},
				{1500 * time.Microsecond, server.Add(2 * time.Millisecond)}, // rounded up
				{time.Nanosecond, server.Add(time.Millisecond)},
			}
			for i, tt := range tests {
				res, err := q.Schedule(ctx, delay.Message{ID: fmt.Sprint("a", i)}, delay.After(tt.d))
				require.NoError(t, err)
				assert.True(t, tt.want.Equal(res.Due), "After(%s): due %v, want %v", tt.d, res.Due, tt.want)
			}
			st, err := q.Stats(ctx)
			require.NoError(t, err)
			assert.True(t, server.Equal(st.Now), "Stats reports the Redis clock")
			assert.Equal(t, int64(1), st.Overdue, "After(0) is due at once")

			// Between two milliseconds, "now" is rounded up: never early.
			b.mr.SetTime(server.Add(500 * time.Microsecond))
			res, err := q.Schedule(ctx, delay.Message{ID: "mid"}, delay.After(time.Second))
			require.NoError(t, err)
			assert.True(t, server.Add(time.Second+time.Millisecond).Equal(res.Due), "due %v", res.Due)
			got, err := q.Reschedule(ctx, "mid", delay.After(0))
			require.NoError(t, err)
			assert.True(t, server.Add(time.Millisecond).Equal(got), "due %v", got)
			return
		}
		before := time.Now().Truncate(time.Millisecond)
		res, err := q.Schedule(ctx, delay.Message{ID: "a"}, delay.After(time.Minute))
		require.NoError(t, err)
		after := time.Now()
		assert.False(t, res.Due.Before(before.Add(time.Minute)), "due %v", res.Due)
		assert.False(t, res.Due.After(after.Add(time.Minute+time.Millisecond)), "due %v", res.Due)
	})
}

func TestCancel(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		q := b.queue(t)
		_, err := q.Schedule(ctx, delay.Message{ID: "c1", Payload: []byte("x")}, delay.After(time.Hour))
		require.NoError(t, err)
		_, err = q.Schedule(ctx, delay.Message{ID: "c2"}, delay.After(time.Hour))
		require.NoError(t, err)

		ok, err := q.Cancel(ctx, "c1")
		require.NoError(t, err)
		assert.True(t, ok)
		ok, err = q.Cancel(ctx, "c1")
		require.NoError(t, err)
		assert.False(t, ok, "already cancelled")
		ok, err = q.Cancel(ctx, "never")
		require.NoError(t, err)
		assert.False(t, ok)

		_, err = q.Get(ctx, "c1")
		assert.ErrorIs(t, err, delay.ErrNotFound)
		_, err = q.Get(ctx, "c2")
		assert.NoError(t, err)

		ok, err = q.Cancel(ctx, "c2")
		require.NoError(t, err)
		assert.True(t, ok)
		assert.Equal(t, []string{q.Layout().Meta()}, b.keys(t),
			"cancelling the last message leaves no keys but the queue's record of its shard count")

		// A cancelled id can be scheduled again.
		res, err := q.Schedule(ctx, delay.Message{ID: "c1"}, delay.After(time.Hour))
		require.NoError(t, err)
		assert.Equal(t, delay.Created, res.Outcome)
	})
}

func TestReschedule(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		q := b.queue(t)
		due1 := time.Now().Add(time.Hour).Truncate(time.Millisecond)
		_, err := q.Schedule(ctx, delay.Message{ID: "r", Payload: []byte("keep me")}, delay.At(due1))
		require.NoError(t, err)

		due2 := due1.Add(30 * time.Minute).Add(time.Microsecond)
		got, err := q.Reschedule(ctx, "r", delay.At(due2))
		require.NoError(t, err)
		assert.Equal(t, due2.Truncate(time.Millisecond).Add(time.Millisecond).UnixMilli(), got.UnixMilli(), "rounded up")
		env, err := q.Get(ctx, "r")
		require.NoError(t, err)
		assert.True(t, got.Equal(env.Due))
		assert.Equal(t, "keep me", string(env.Payload), "reschedule keeps the envelope")

		got, err = q.Reschedule(ctx, "r", delay.After(0))
		require.NoError(t, err)
		st, err := q.Stats(ctx)
		require.NoError(t, err)
		// Due at once: Redis "now", rounded up to the millisecond.
		assert.LessOrEqual(t, got.UnixMilli(), st.Now.UnixMilli()+1, "After(0) is due by the Redis clock")
		assert.WithinDuration(t, st.Now, got, time.Second)

		past := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
		got, err = q.Reschedule(ctx, "r", delay.At(past))
		require.NoError(t, err)
		assert.True(t, past.Equal(got))
		st, err = q.Stats(ctx)
		require.NoError(t, err)
		assert.Equal(t, int64(1), st.Overdue)
		assert.True(t, past.Equal(st.NextDue))

		_, err = q.Reschedule(ctx, "missing", delay.After(time.Second))
		require.ErrorIs(t, err, delay.ErrNotFound)
		assert.Contains(t, err.Error(), "reschedule missing: ")
		n, err := q.Len(ctx)
		require.NoError(t, err)
		assert.Equal(t, int64(1), n, "rescheduling a missing id creates nothing")
	})
}

func TestGet(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		q := b.queue(t)
		due := time.Now().Add(time.Hour).Truncate(time.Millisecond)
		before := time.Now().Truncate(time.Millisecond)
		_, err := q.Schedule(ctx, delay.Message{ID: "g", Payload: []byte("body"),
			Headers: map[string]string{"trace": "t-1", "tenant": "acme"}}, delay.At(due))
		require.NoError(t, err)
		after := time.Now()

		env, err := q.Get(ctx, "g")
		require.NoError(t, err)
		assert.Equal(t, "g", env.ID)
		assert.Equal(t, []byte("body"), env.Payload)
		assert.Equal(t, map[string]string{"trace": "t-1", "tenant": "acme"}, env.Headers)
		assert.Equal(t, 1, env.Attempt)
		assert.True(t, due.Equal(env.Due))
		assert.False(t, env.Created.Before(before) || env.Created.After(after), "created %v", env.Created)

		_, err = q.Get(ctx, "nope")
		require.ErrorIs(t, err, delay.ErrNotFound)
		assert.Contains(t, err.Error(), "get nope: ")

		lane := q.Keys().Main()
		t.Run("foreign envelope", func(t *testing.T) {
			require.NoError(t, b.rdb.ZAdd(ctx, lane.Delayed, redis.Z{Member: "foreign", Score: float64(due.UnixMilli())}).Err())
			require.NoError(t, b.rdb.HSet(ctx, lane.Envelopes, "foreign", `{"not":"ours"}`).Err())
			_, err := q.Get(ctx, "foreign")
			require.Error(t, err)
			assert.ErrorIs(t, err, codec.ErrUnknownFormat)
			assert.NotErrorIs(t, err, delay.ErrNotFound)
		})
		t.Run("corrupt envelope", func(t *testing.T) {
			require.NoError(t, b.rdb.ZAdd(ctx, lane.Delayed, redis.Z{Member: "corrupt", Score: float64(due.UnixMilli())}).Err())
			require.NoError(t, b.rdb.HSet(ctx, lane.Envelopes, "corrupt", "\xd5\x01\x80").Err())
			_, err := q.Get(ctx, "corrupt")
			assert.ErrorIs(t, err, codec.ErrCorrupt)
		})
		t.Run("missing envelope", func(t *testing.T) {
			require.NoError(t, b.rdb.ZAdd(ctx, lane.Delayed, redis.Z{Member: "orphan", Score: float64(due.UnixMilli())}).Err())
			_, err := q.Get(ctx, "orphan")
			assert.ErrorIs(t, err, delay.ErrNotFound)
			assert.Contains(t, err.Error(), "envelope missing")
		})
	})
}

func TestStats(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		q := b.queue(t)
		st, err := q.Stats(ctx)
		require.NoError(t, err)
		assert.Zero(t, st.Waiting)
		assert.Zero(t, st.Overdue)
		assert.True(t, st.NextDue.IsZero())
		assert.WithinDuration(t, time.Now(), st.Now, 5*time.Second)

		past := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
		_, err = q.ScheduleBatch(ctx, []delay.Item{
			{Message: delay.Message{ID: "late-1"}, When: delay.At(past)},
			{Message: delay.Message{ID: "late-2"}, When: delay.At(past.Add(time.Minute))},
			{Message: delay.Message{ID: "future"}, When: delay.After(time.Hour)},
		})
		require.NoError(t, err)
		st, err = q.Stats(ctx)
		require.NoError(t, err)
		assert.Equal(t, int64(3), st.Waiting)
		assert.Equal(t, int64(2), st.Overdue)
		assert.True(t, past.Equal(st.NextDue), "next due %v", st.NextDue)
		n, err := q.Len(ctx)
		require.NoError(t, err)
		assert.Equal(t, int64(3), n)
	})
}

type reminder struct {
	User  string   `json:"user" msgpack:"user"`
	Text  string   `json:"text" msgpack:"text"`
	Times []int    `json:"times" msgpack:"times"`
	Tags  []string `json:"tags" msgpack:"tags"`
}

func TestTyped(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		codec codec.Codec
		first byte
	}{
		{"msgpack", codec.Msgpack, 0x84},
		{"json", codec.JSON, '{'},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			onEachBackend(t, func(t *testing.T, b backend) {
				ctx := context.Background()
				q := b.queue(t, delay.WithCodec(tc.codec))
				typed := delay.NewTyped[reminder](q)
				assert.Same(t, q, typed.Queue())

				in := reminder{User: "ann", Text: "stand up", Times: []int{1, 2}, Tags: []string{"x"}}
				res, err := typed.Schedule(ctx, "", in, delay.After(time.Hour))
				require.NoError(t, err)
				assert.Equal(t, delay.Created, res.Outcome)
				require.Len(t, res.ID, 26)

				got, env, err := typed.Get(ctx, res.ID)
				require.NoError(t, err)
				assert.Equal(t, in, got)
				assert.Equal(t, res.ID, env.ID)
				assert.True(t, res.Due.Equal(env.Due))
				require.NotEmpty(t, env.Payload)
				assert.Equal(t, tc.first, env.Payload[0], "encoded with the queue's codec")

				_, _, err = typed.Get(ctx, "missing")
				assert.ErrorIs(t, err, delay.ErrNotFound)

				_, err = q.Schedule(ctx, delay.Message{ID: "raw", Payload: []byte{0xC1, '}'}}, delay.After(time.Hour))
				require.NoError(t, err)
				_, env, err = typed.Get(ctx, "raw")
				require.Error(t, err)
				assert.Contains(t, err.Error(), "get raw: codec: ")
				assert.Equal(t, "raw", env.ID, "the envelope is returned with a decode error")
			})
		})
	}
}

// The schedule and reschedule scripts publish on the lane's wake channel
// only when the new due time becomes the earliest (strictly: a message due
// with the head wakes nothing), for caller-chosen and generated ids. A
// message due beyond the wake horizon wakes nothing, even as the head: a
// mover finds it by a look before it is due.
func TestWakePublish(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, b backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		q := b.queue(t)
		ps := b.rdb.Subscribe(ctx, q.Keys().Main().Wake)
		t.Cleanup(func() { _ = ps.Close() })
		_, err := ps.Receive(ctx) // subscription confirmed
		require.NoError(t, err)

		// Every step's due time is within the wake horizon but the far ones.
		base := time.Now().Add(10 * time.Second).Truncate(time.Millisecond)
		const unit = 500 * time.Millisecond
		at := func(m int) delay.When { return delay.At(base.Add(time.Duration(m) * unit)) }
		ms := func(m int) string { return strconv.FormatInt(base.Add(time.Duration(m)*unit).UnixMilli(), 10) }
		far := scripts.WakeHorizon + time.Second
		steps := []struct {
			name    string
			run     func() error
			publish string // "" = nothing published
		}{
			{"first message, beyond the horizon", func() error { _, err := q.Schedule(ctx, delay.Message{ID: "far"}, delay.After(far)); return err }, ""},
			{"generated id, beyond the horizon", func() error { _, err := q.Schedule(ctx, delay.Message{}, delay.After(far)); return err }, ""},
			{"batch, beyond the horizon", func() error {
				_, err := q.ScheduleBatch(ctx, []delay.Item{
					{Message: delay.Message{ID: "far2"}, When: delay.After(far)},
					{Message: delay.Message{}, When: delay.After(2 * far)},
				})
				return err
			}, ""},
			{"first message", func() error { _, err := q.Schedule(ctx, delay.Message{ID: "a"}, at(60)); return err }, ms(60)},
			{"later message", func() error { _, err := q.Schedule(ctx, delay.Message{ID: "b"}, at(120)); return err }, ""},
			{"earlier message", func() error { _, err := q.Schedule(ctx, delay.Message{ID: "c"}, at(30)); return err }, ms(30)},
			{"kept duplicate", func() error { _, err := q.Schedule(ctx, delay.Message{ID: "b"}, at(1)); return err }, ""},
			{"batch, earliest published once", func() error {
				_, err := q.ScheduleBatch(ctx, []delay.Item{
					{Message: delay.Message{ID: "d"}, When: at(20)},
					{Message: delay.Message{ID: "e"}, When: at(10)},
					{Message: delay.Message{ID: "f"}, When: at(90)},
				})
				return err
			}, ms(10)},
			{"reschedule to the head", func() error { _, err := q.Reschedule(ctx, "b", at(5)); return err }, ms(5)},
			{"reschedule behind the head", func() error { _, err := q.Reschedule(ctx, "a", at(6)); return err }, ""},
			{"due with the head", func() error { _, err := q.Schedule(ctx, delay.Message{ID: "t"}, at(5)); return err }, ""},
			{"generated id, earlier", func() error { _, err := q.Schedule(ctx, delay.Message{}, at(4)); return err }, ms(4)},
			{"generated id, with the head", func() error { _, err := q.Schedule(ctx, delay.Message{}, at(4)); return err }, ""},
			{"generated id, later", func() error { _, err := q.Schedule(ctx, delay.Message{}, at(7)); return err }, ""},
			{"marker", func() error { _, err := q.Schedule(ctx, delay.Message{ID: "z"}, at(0)); return err }, ms(0)},
		}
		var want []string
		for _, s := range steps {
			require.NoError(t, s.run(), s.name)
			if s.publish != "" {
				want = append(want, s.publish)
			}
		}
		var got []string
		for range want {
			msg, err := ps.ReceiveMessage(ctx)
			require.NoError(t, err)
			assert.Equal(t, q.Keys().Main().Wake, msg.Channel)
			got = append(got, msg.Payload)
		}
		// The marker comes last: had a silent step published, the
		// sequence would differ.
		assert.Equal(t, want, got)
	})
}

func TestConcurrentSchedule(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		q := b.queue(t, delay.WithDuplicatePolicy(delay.Reject))
		const workers, each = 8, 25
		errs := make(chan error, workers)
		created := atomic.Int64{}
		for w := range workers {
			go func() {
				for i := range each {
					// Every worker schedules the same ids: exactly one wins each.
					res, err := q.Schedule(ctx, delay.Message{ID: fmt.Sprint("id-", i), Payload: []byte{byte(w)}}, delay.After(time.Hour))
					switch {
					case err == nil && res.Outcome == delay.Created:
						created.Add(1)
					case err != nil && !errors.Is(err, delay.ErrDuplicate):
						errs <- err
						return
					}
				}
				errs <- nil
			}()
		}
		for range workers {
			require.NoError(t, <-errs)
		}
		assert.Equal(t, int64(each), created.Load())
		n, err := q.Len(ctx)
		require.NoError(t, err)
		assert.Equal(t, int64(each), n)
	})
}
