package group_test

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/codec"
	"github.com/delaystream/delaystream/internal/delay"
	"github.com/delaystream/delaystream/internal/group"
)

func nopHandler(context.Context, *group.Message) error { return nil }

// Every option refuses its bad values with an error wrapping
// ErrInvalidOption and accepts its boundary values. New talks to no server,
// so the client points nowhere.
func TestOptionsValidation(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = rdb.Close() })
	const day = 24 * time.Hour
	cases := []struct {
		name string
		opt  group.Option
		ok   bool
	}{
		{"prefix empty", group.WithPrefix(""), false},
		{"prefix with brace", group.WithPrefix("a{b"), false},
		{"prefix with space", group.WithPrefix("a b"), false},
		{"prefix ok", group.WithPrefix("app:v2"), true},
		{"consumer name empty", group.WithConsumerName(""), false},
		{"consumer name with space", group.WithConsumerName("a b"), false},
		{"consumer name ok", group.WithConsumerName("host-1"), true},
		{"workers 0", group.WithWorkers(0), false},
		{"workers -1", group.WithWorkers(-1), false},
		{"workers 4097", group.WithWorkers(4097), false},
		{"workers 1", group.WithWorkers(1), true},
		{"workers 4096", group.WithWorkers(4096), true},
		{"visibility 99ms", group.WithVisibilityTimeout(99 * time.Millisecond), false},
		{"visibility 0", group.WithVisibilityTimeout(0), false},
		{"visibility 1h+1ns", group.WithVisibilityTimeout(time.Hour + 1), false},
		{"visibility 100ms", group.WithVisibilityTimeout(100 * time.Millisecond), true},
		{"visibility 1h", group.WithVisibilityTimeout(time.Hour), true},
		{"reclaim 9ms", group.WithReclaimInterval(9 * time.Millisecond), false},
		{"reclaim 10m+1ns", group.WithReclaimInterval(10*time.Minute + 1), false},
		{"reclaim 10ms", group.WithReclaimInterval(10 * time.Millisecond), true},
		{"without reclaim", group.WithoutReclaim(), true},
		{"drain -1ns", group.WithDrainTimeout(-1), false},
		{"drain 1h+1ns", group.WithDrainTimeout(time.Hour + 1), false},
		{"drain 0", group.WithDrainTimeout(0), true},
		{"max attempts 0", group.WithMaxAttempts(0), false},
		{"max attempts 1001", group.WithMaxAttempts(1001), false},
		{"max attempts 1", group.WithMaxAttempts(1), true},
		{"max deliveries 0", group.WithMaxDeliveries(0), false},
		{"max deliveries 1001", group.WithMaxDeliveries(1001), false},
		{"max deliveries 1000", group.WithMaxDeliveries(1000), true},
		{"backoff nil", group.WithBackoff(nil), false},
		{"backoff constant", group.WithBackoff(group.ConstantBackoff(time.Second)), true},
		{"start at new", group.WithStartAtNew(), true},
		{"dead-letter cap 0", group.WithDeadLetterCap(0), false},
		{"dead-letter cap 1e9+1", group.WithDeadLetterCap(1e9 + 1), false},
		{"dead-letter cap 1", group.WithDeadLetterCap(1), true},
		{"trim 99ms", group.WithTrimInterval(99 * time.Millisecond), false},
		{"trim 1h+1ns", group.WithTrimInterval(time.Hour + 1), false},
		{"trim 100ms", group.WithTrimInterval(100 * time.Millisecond), true},
		{"without trim", group.WithoutTrim(), true},
		{"retention 0", group.WithRetention(0), false},
		{"retention 30d+1ns", group.WithRetention(30*day + 1), false},
		{"retention 1ms", group.WithRetention(time.Millisecond), true},
		{"stale consumer 59s", group.WithStaleConsumerAfter(59 * time.Second), false},
		{"stale consumer 30d+1ns", group.WithStaleConsumerAfter(30*day + 1), false},
		{"stale consumer 1m", group.WithStaleConsumerAfter(time.Minute), true},
		{"logger nil", group.WithLogger(nil), false},
		{"logger ok", group.WithLogger(slog.New(slog.DiscardHandler)), true},
		{"hooks zero", group.WithHooks(group.Hooks{}), true},
		{"nil option", nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := group.New(rdb, "q", "g", nopHandler, tc.opt)
			if tc.ok {
				require.NoError(t, err)
				assert.NotNil(t, c)
				return
			}
			assert.ErrorIs(t, err, group.ErrInvalidOption)
			assert.Nil(t, c)
			// The standalone constructors validate the same options.
			_, err = group.NewDeadLetters(rdb, "q", "g", tc.opt)
			assert.ErrorIs(t, err, group.ErrInvalidOption, "NewDeadLetters")
			_, err = group.ReadStats(context.Background(), rdb, "q", "g", tc.opt)
			assert.ErrorIs(t, err, group.ErrInvalidOption, "ReadStats")
		})
	}
}

func TestNewArgumentsValidation(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = rdb.Close() })
	cases := []struct {
		name  string
		rdb   redis.UniversalClient
		queue string
		group string
		h     group.Handler
	}{
		{"nil client", nil, "q", "g", nopHandler},
		{"nil handler", rdb, "q", "g", nil},
		{"empty group", rdb, "q", "", nopHandler},
		{"group with brace", rdb, "q", "g}", nopHandler},
		{"group with space", rdb, "q", "a b", nopHandler},
		{"group with control character", rdb, "q", "a\nb", nopHandler},
		{"group too long", rdb, "q", strings.Repeat("g", 129), nopHandler},
		{"empty queue", rdb, "", "g", nopHandler},
		{"queue with brace", rdb, "{q}", "g", nopHandler},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := group.New(tc.rdb, tc.queue, tc.group, tc.h)
			assert.ErrorIs(t, err, group.ErrInvalidOption)
			assert.Nil(t, c)
			if tc.h != nil {
				_, err = group.NewDeadLetters(tc.rdb, tc.queue, tc.group)
				assert.ErrorIs(t, err, group.ErrInvalidOption, "NewDeadLetters")
				_, err = group.ReadStats(context.Background(), tc.rdb, tc.queue, tc.group)
				assert.ErrorIs(t, err, group.ErrInvalidOption, "ReadStats")
			}
		})
	}
	c, err := group.New(rdb, "q", strings.Repeat("g", 128), nopHandler)
	require.NoError(t, err, "a 128-byte group name is fine")
	assert.NotEmpty(t, c.Name(), "a default consumer name")
}

func TestExponentialBackoff(t *testing.T) {
	t.Parallel()
	const base, limit = 100 * time.Millisecond, time.Second
	b := group.ExponentialBackoff(base, limit)
	cases := []struct {
		attempt int
		lo, hi  time.Duration
	}{
		{2, 80 * time.Millisecond, 120 * time.Millisecond}, // first retry: base ±20 %
		{3, 160 * time.Millisecond, 240 * time.Millisecond},
		{4, 320 * time.Millisecond, 480 * time.Millisecond},
		{5, 640 * time.Millisecond, 960 * time.Millisecond},
		{6, 800 * time.Millisecond, limit}, // capped: the cap is never exceeded
		{100, 800 * time.Millisecond, limit},
		{math.MaxInt32, 800 * time.Millisecond, limit},
	}
	for _, tc := range cases {
		lo, hi := time.Duration(math.MaxInt64), time.Duration(0)
		for range 2000 {
			d := b(tc.attempt)
			lo, hi = min(lo, d), max(hi, d)
		}
		assert.GreaterOrEqual(t, lo, tc.lo, "attempt %d", tc.attempt)
		assert.LessOrEqual(t, hi, tc.hi, "attempt %d", tc.attempt)
		assert.Greater(t, hi-lo, (tc.hi-tc.lo)/2, "attempt %d: jitter spreads retries", tc.attempt)
	}
	// Degenerate arguments neither panic nor overflow.
	assert.Zero(t, group.ExponentialBackoff(0, time.Second)(5))
	assert.Zero(t, group.ExponentialBackoff(-time.Second, time.Second)(2))
	assert.Zero(t, group.ExponentialBackoff(time.Second, -time.Second)(2))
	huge := group.ExponentialBackoff(time.Second, math.MaxInt64)
	for _, a := range []int{2, 40, 70, 1000} {
		assert.Positive(t, huge(a), "attempt %d", a)
	}
	assert.Equal(t, 3*time.Second, group.ConstantBackoff(3*time.Second)(7))
}

type order struct {
	ID   int
	Note string
}

// Typed decodes the payload with the producer's codec; a payload that does
// not decode is dead-lettered at once and never reaches the typed handler.
func TestTypedHandler(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	h.startMover()
	got := make(chan order, 2)
	c := h.consumer("g", group.Typed(codec.Msgpack, func(_ context.Context, m *group.Message, v order) error {
		got <- v
		return nil
	}))
	r := start(t, c.Run)
	_, err := delay.NewTyped[order](h.q).Schedule(ctx, "o1", order{ID: 5001, Note: "cancel"}, delay.After(0))
	require.NoError(t, err)
	_, err = h.q.Schedule(ctx, delay.Message{ID: "o2", Payload: []byte{0xc1}}, delay.After(0)) // 0xc1: never valid msgpack
	require.NoError(t, err)

	select {
	case v := <-got:
		assert.Equal(t, order{ID: 5001, Note: "cancel"}, v)
	case <-time.After(10 * time.Second):
		require.FailNow(t, "typed message not delivered")
	}
	waitFor(t, 10*time.Second, func() bool { return c.Counters().DeadLettered == 1 })
	r.stop(t)
	assert.Empty(t, got, "the undecodable payload reached the typed handler")
	dls := deadLetters(t, c.DeadLetters())
	require.Len(t, dls, 1)
	assert.Equal(t, "o2", dls[0].Envelope.ID)
	assert.Equal(t, group.ReasonUndecodable, dls[0].Reason)
	assert.Contains(t, dls[0].LastError, "undecodable payload")
	assert.Equal(t, []byte{0xc1}, dls[0].Envelope.Payload)
}

func TestErrorWrappers(t *testing.T) {
	t.Parallel()
	cause := errors.New("cause")
	var de *group.DeadLetterError
	require.ErrorAs(t, group.DeadLetter(cause), &de)
	assert.ErrorIs(t, group.DeadLetter(cause), cause)
	assert.Equal(t, "dead-letter: cause", group.DeadLetter(cause).Error())
	var dr *group.DropError
	require.ErrorAs(t, group.Drop(cause), &dr)
	assert.ErrorIs(t, group.Drop(cause), cause)
	assert.Equal(t, "drop: <nil>", group.Drop(nil).Error())
}
