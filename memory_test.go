package delaystream_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/internal/redistest"
)

// logBuf is a logger's output, safe for concurrent use.
type logBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuf) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// memoryServer starts a redis-server of its own with args, and returns a
// client of it.
func memoryServer(t *testing.T, args ...string) (*redis.Client, string) {
	t.Helper()
	s, err := redistest.Spawn(args...)
	require.NoError(t, err)
	t.Cleanup(s.Stop)
	rdb := redis.NewClient(redistest.Options(t, s.Addr))
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb, s.Addr
}

// startRun runs q until the stop it returns is called, which checks that
// Run returned nil.
func startRun(t *testing.T, q *delaystream.Queue) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- q.Run(ctx) }()
	return func() {
		t.Helper()
		cancel()
		require.NoError(t, <-done)
	}
}

// A server that may evict (maxmemory set, allkeys-lru) is reported at the
// start of Run: a WARN naming the server, the policy and the fix, the
// eviction hook, and Stats. With WithNoEvictionRequired, Run and Schedule
// refuse it with ErrEvictionPolicy and write nothing.
func TestEvictionPolicyReported(t *testing.T) {
	t.Parallel()
	rdb, addr := memoryServer(t, "--maxmemory", "8mb", "--maxmemory-policy", "allkeys-lru")
	ctx := context.Background()

	t.Run("reported", func(t *testing.T) {
		var logs logBuf
		hooked := make(chan []delaystream.RedisMemory, 4)
		q, err := delaystream.New(rdb, "orders", delaystream.WithPrefix(redistest.Prefix(t)), delaystream.WithLogger(logs.logger()),
			delaystream.WithEvictionHook(func(s []delaystream.RedisMemory) { hooked <- s }))
		require.NoError(t, err)
		_, err = q.Handle("billing", func(context.Context, *delaystream.Delivery) error { return nil })
		require.NoError(t, err)
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- q.Run(rctx) }()
		defer func() {
			cancel()
			require.NoError(t, <-done)
		}()

		select {
		case s := <-hooked:
			require.Len(t, s, 1)
			assert.Equal(t, addr, s[0].Addr)
			assert.Equal(t, "allkeys-lru", s[0].Policy)
			assert.Equal(t, int64(8<<20), s[0].Max)
			assert.True(t, s[0].Evicts())
		case err := <-done:
			t.Fatalf("Run returned %v", err)
		case <-time.After(30 * time.Second):
			t.Fatal("the eviction hook was not called")
		}
		l := logs.String()
		assert.Contains(t, l, "level=WARN")
		assert.Contains(t, l, "maxmemory-policy noeviction")
		assert.Contains(t, l, "server="+addr)
		assert.Contains(t, l, "policy=allkeys-lru")
		assert.Contains(t, l, "maxmemory=\"8.0 MiB\"")
		assert.Equal(t, 1, strings.Count(l, "may evict"), "reported once, not once per check")

		st, err := q.Stats(ctx)
		require.NoError(t, err)
		require.Len(t, st.Evicting, 1)
		assert.Equal(t, "allkeys-lru", st.Evicting[0].Policy)
	})

	t.Run("refused", func(t *testing.T) {
		prefix := redistest.Prefix(t)
		q, err := delaystream.New(rdb, "orders", delaystream.WithPrefix(prefix), delaystream.WithNoEvictionRequired(),
			delaystream.WithLogger(slog.New(slog.DiscardHandler)))
		require.NoError(t, err)
		_, err = q.Handle("billing", func(context.Context, *delaystream.Delivery) error { return nil })
		require.NoError(t, err)

		_, err = q.Schedule(ctx, delaystream.Message{ID: "a", Payload: []byte("x")}, delaystream.After(time.Minute))
		require.ErrorIs(t, err, delaystream.ErrEvictionPolicy)
		assert.Contains(t, err.Error(), "allkeys-lru")
		_, err = q.ScheduleBatch(ctx, []delaystream.Item{{Message: delaystream.Message{ID: "b"}, When: delaystream.After(time.Minute)}})
		require.ErrorIs(t, err, delaystream.ErrEvictionPolicy)
		_, err = delaystream.Schedule(ctx, q, delaystream.Message{ID: "c"}, "typed", delaystream.After(time.Minute))
		require.ErrorIs(t, err, delaystream.ErrEvictionPolicy)

		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		err = q.Run(rctx)
		require.ErrorIs(t, err, delaystream.ErrEvictionPolicy)
		assert.Empty(t, redistest.Keys(t, rdb, prefix), "nothing written")
	})

	t.Run("noeviction accepted", func(t *testing.T) {
		rdb, _ := memoryServer(t, "--maxmemory", "8mb", "--maxmemory-policy", "noeviction")
		q, err := delaystream.New(rdb, "orders", delaystream.WithPrefix(redistest.Prefix(t)), delaystream.WithNoEvictionRequired())
		require.NoError(t, err)
		_, err = q.Schedule(ctx, delaystream.Message{ID: "a"}, delaystream.After(time.Minute))
		require.NoError(t, err)
		st, err := q.Stats(ctx)
		require.NoError(t, err)
		assert.Empty(t, st.Evicting)
	})
}

// fill schedules messages (200 B payloads, due at due) in batches until
// Redis refuses a write for memory, and returns the ids it accepted and
// the refusal.
func fill(ctx context.Context, t *testing.T, q *delaystream.Queue, due time.Time) ([]string, error) {
	t.Helper()
	payload := bytes.Repeat([]byte("p"), 200)
	var ids []string
	for batch := 0; batch < 1000; batch++ {
		items := make([]delaystream.Item, 500)
		for i := range items {
			items[i] = delaystream.Item{Message: delaystream.Message{ID: fmt.Sprintf("m%d-%d", batch, i), Payload: payload}, When: delaystream.At(due)}
		}
		rs, err := q.ScheduleBatch(ctx, items)
		for _, r := range rs {
			if r.Outcome == delaystream.OutcomeCreated {
				ids = append(ids, r.ID)
			}
		}
		if err != nil {
			return ids, err
		}
	}
	t.Fatal("Redis never refused a write")
	return nil, nil
}

// Against noeviction with 8 MiB, writes past the limit are refused with
// ErrOutOfMemory and a text that says what happened, and nothing is
// written; promotion is not refused: every message accepted before is
// delivered, once, with maxmemory left as it is.
func TestOutOfMemory(t *testing.T) {
	t.Parallel()
	rdb, _ := memoryServer(t, "--maxmemory", "8mb", "--maxmemory-policy", "noeviction")
	ctx := context.Background()
	var logs logBuf
	q, err := delaystream.New(rdb, "orders", delaystream.WithPrefix(redistest.Prefix(t)), delaystream.WithLogger(logs.logger()))
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the queue's log:\n%s", logs.String())
		}
	})
	var mu sync.Mutex
	got := map[string]int{}
	g, err := q.Handle("billing", func(_ context.Context, d *delaystream.Delivery) error {
		mu.Lock()
		defer mu.Unlock()
		got[d.ID]++
		return nil
	}, delaystream.WithWorkers(8))
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			st, err := q.Stats(ctx)
			t.Logf("queue: %+v (%v)", st, err)
			gs, err := g.Stats(ctx)
			t.Logf("group: %+v (%v); counters %+v", gs, err, g.Counters())
		}
	})
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- q.Run(rctx) }()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()
	// A first message delivered: the group exists and reads.
	_, err = q.Schedule(ctx, delaystream.Message{ID: "canary"}, delaystream.After(0))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return got["canary"] == 1
	}, 30*time.Second, 10*time.Millisecond)

	now, err := rdb.Time(ctx).Result()
	require.NoError(t, err)
	ids, err := fill(ctx, t, q, now.Add(3*time.Second))
	require.ErrorIs(t, err, delaystream.ErrOutOfMemory)
	require.NotEmpty(t, ids)

	// The queue drains at the limit (see TestFullRedisDrains), so memory
	// may fall below it at once; the limit is set a tenth under what is
	// used, so that the next write is refused.
	used, _, err := usedMemory(ctx, rdb)
	require.NoError(t, err)
	require.NoError(t, rdb.ConfigSet(ctx, "maxmemory", fmt.Sprint(used*9/10)).Err())
	_, err = q.Schedule(ctx, delaystream.Message{ID: "one-more", Payload: []byte("x")}, delaystream.After(time.Second))
	require.ErrorIs(t, err, delaystream.ErrOutOfMemory)
	msg := err.Error()
	assert.Contains(t, msg, "write refused, nothing written: used ")
	assert.Contains(t, msg, "maxmemory-policy noeviction (Redis: OOM command not allowed")
	assert.Regexp(t, `used [0-9.]+ MiB, maxmemory [0-9.]+ MiB`, msg)
	_, err = q.Get(ctx, "one-more")
	require.ErrorIs(t, err, delaystream.ErrNotFound, "nothing written")

	// The count is read under the lock and compared outside it: a failing
	// comparison formats its operands, and formatting thousands of ids
	// while holding the lock would keep the handlers from recording.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		assert.Equal(c, len(ids)+1, n, "messages delivered")
	}, 60*time.Second, 100*time.Millisecond, "every accepted message delivered")
	mu.Lock()
	defer mu.Unlock()
	for _, id := range ids {
		assert.Equal(t, 1, got[id], id)
	}
}

// A failure on a server that refuses writes for memory (noeviction,
// maxmemory 1: every write that may add memory is refused) is retried all
// the same: the retry moves the message, it does not add one. The next
// attempt succeeds, with maxmemory left as it is; the handler ran once per
// attempt.
func TestRetryOverMemoryLimit(t *testing.T) {
	t.Parallel()
	rdb, _ := memoryServer(t, "--maxmemory-policy", "noeviction")
	ctx := context.Background()
	var logs logBuf
	q, err := delaystream.New(rdb, "orders", delaystream.WithPrefix(redistest.Prefix(t)), delaystream.WithLogger(logs.logger()))
	require.NoError(t, err)
	var mu sync.Mutex
	var outcomes []delaystream.HandlerOutcome
	handled := make(chan struct{})
	calls := 0
	_, err = q.Handle("billing", func(context.Context, *delaystream.Delivery) error {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls == 1 {
			// Memory is full from now on: the retry's write is refused.
			if err := rdb.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
				return err
			}
			return errors.New("first attempt fails")
		}
		return nil
	}, delaystream.WithVisibilityTimeout(time.Second), delaystream.WithHooks(delaystream.Hooks{
		OnHandled: func(_ *delaystream.Delivery, o delaystream.HandlerOutcome, _ time.Duration) {
			mu.Lock()
			defer mu.Unlock()
			outcomes = append(outcomes, o)
			if o == delaystream.HandlerAcked {
				close(handled)
			}
		},
	}))
	require.NoError(t, err)
	_, err = q.Schedule(ctx, delaystream.Message{ID: "a", Payload: []byte("x")}, delaystream.After(0))
	require.NoError(t, err)

	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- q.Run(rctx) }()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()
	select {
	case <-handled:
	case <-time.After(60 * time.Second):
		t.Fatal("the failure was never handled again")
	}
	_, err = q.Schedule(ctx, delaystream.Message{ID: "b", Payload: []byte("x")}, delaystream.After(0))
	require.ErrorIs(t, err, delaystream.ErrOutOfMemory, "the server still refuses writes that add data")
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []delaystream.HandlerOutcome{delaystream.HandlerRetried, delaystream.HandlerAcked}, outcomes)
	assert.Equal(t, 2, calls)
	assert.NotContains(t, logs.String(), "scheduling retry failed")
	assert.NotContains(t, logs.String(), "Redis refuses writes for memory")
}

// On a Cluster every master is read: the one master configured to evict
// is reported, by its address, and only it; a sharded queue refuses to
// run on it WithNoEvictionRequired.
func TestEvictionPolicyCluster(t *testing.T) {
	t.Parallel()
	c, err := redistest.SpawnCluster(3, 0)
	require.NoError(t, err)
	defer c.Stop()
	rdb := c.Client()
	defer rdb.Close()
	ctx := context.Background()
	evicting := c.Servers()[1].Addr
	node := redis.NewClient(redistest.Options(t, evicting))
	defer node.Close()
	require.NoError(t, node.ConfigSet(ctx, "maxmemory", "64mb").Err())
	require.NoError(t, node.ConfigSet(ctx, "maxmemory-policy", "volatile-lru").Err())

	q, err := delaystream.New(rdb, "orders", delaystream.WithPrefix(redistest.Prefix(t)), delaystream.WithShards(6))
	require.NoError(t, err)
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	require.Len(t, st.Evicting, 1)
	assert.Equal(t, evicting, st.Evicting[0].Addr)
	assert.Equal(t, "volatile-lru", st.Evicting[0].Policy)

	strict, err := delaystream.New(rdb, "orders", delaystream.WithPrefix(redistest.Prefix(t)), delaystream.WithShards(6),
		delaystream.WithNoEvictionRequired(), delaystream.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	_, err = strict.Schedule(ctx, delaystream.Message{ID: "a"}, delaystream.After(time.Minute))
	require.ErrorIs(t, err, delaystream.ErrEvictionPolicy)
	assert.Contains(t, err.Error(), evicting)
}

// While Redis refuses writes for memory (noeviction, maxmemory 1), the
// failures of a group's handlers are settled all the same: each is retried
// and handled once more (or dead-lettered once, with one attempt allowed),
// nothing is refused, and maxmemory stays as it is.
func TestConsumersSettleOverMemoryLimit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		attempts int // allowed: 1 dead-letters the failure, 2 retries it
	}{{"retry", 2}, {"dead-letter", 1}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testConsumersSettleOverMemoryLimit(t, tc.attempts)
		})
	}
}

func testConsumersSettleOverMemoryLimit(t *testing.T, attempts int) {
	const (
		n       = 12
		workers = 4
	)
	rdb, _ := memoryServer(t, "--maxmemory-policy", "noeviction")
	ctx := context.Background()
	var logs logBuf
	prefix := redistest.Prefix(t)
	q, err := delaystream.New(rdb, "orders", delaystream.WithPrefix(prefix), delaystream.WithLogger(logs.logger()))
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the queue's log:\n%s", logs.String())
		}
	})
	full := make(chan struct{}) // closed once Redis refuses writes
	var mu sync.Mutex
	calls := map[string][]int{} // id -> attempts handled
	outcomes := map[string][]delaystream.HandlerOutcome{}
	g, err := q.Handle("billing", func(_ context.Context, d *delaystream.Delivery) error {
		mu.Lock()
		calls[d.ID] = append(calls[d.ID], d.Attempt)
		mu.Unlock()
		if d.Attempt == 1 {
			<-full
			return errors.New("first attempt fails")
		}
		return nil
	}, delaystream.WithWorkers(workers), delaystream.WithMaxAttempts(attempts), delaystream.WithBackoff(delaystream.ConstantBackoff(10*time.Millisecond)),
		delaystream.WithVisibilityTimeout(time.Second), delaystream.WithReclaimInterval(100*time.Millisecond),
		delaystream.WithHooks(delaystream.Hooks{OnHandled: func(d *delaystream.Delivery, o delaystream.HandlerOutcome, _ time.Duration) {
			mu.Lock()
			defer mu.Unlock()
			outcomes[d.ID] = append(outcomes[d.ID], o)
		}}))
	require.NoError(t, err)
	defer startRun(t, q)()
	for i := range n {
		_, err = q.Schedule(ctx, delaystream.Message{ID: fmt.Sprint("m", i)}, delaystream.After(0))
		require.NoError(t, err)
	}
	// Every message is in the stream, and the workers are busy with the
	// first ones, before writes are refused.
	require.Eventually(t, func() bool {
		st, err := q.Stats(ctx)
		mu.Lock()
		started := len(calls)
		mu.Unlock()
		return err == nil && st.Waiting == 0 && started == workers
	}, 30*time.Second, 10*time.Millisecond)
	require.NoError(t, rdb.ConfigSet(ctx, "maxmemory", "1").Err())
	close(full)

	want := delaystream.HandlerRetried
	if attempts == 1 {
		want = delaystream.HandlerDeadLettered
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		mu.Lock()
		defer mu.Unlock()
		for i := range n {
			id := fmt.Sprint("m", i)
			if attempts == 1 {
				assert.Equal(c, []delaystream.HandlerOutcome{want}, outcomes[id], id)
			} else {
				// Hooks run concurrently: the retry's outcome may be
				// reported before the failure's.
				assert.ElementsMatch(c, []delaystream.HandlerOutcome{want, delaystream.HandlerAcked}, outcomes[id], id)
			}
		}
	}, 60*time.Second, 50*time.Millisecond, "every message settled over the limit")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		st, err := g.Stats(ctx)
		if assert.NoError(c, err) {
			assert.Zero(c, st.Pending)
			assert.Zero(c, st.RetryWaiting)
			if attempts == 1 {
				assert.Equal(c, int64(n), st.DeadLetters)
			} else {
				assert.Zero(c, st.DeadLetters)
			}
		}
	}, 30*time.Second, 50*time.Millisecond)
	// A counter moves once the client has the reply of the call that
	// settled the entry, a moment after Redis shows it settled.
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		c := g.Counters()
		assert.Equal(ct, uint64(n), c.Failed)
		if attempts == 1 {
			assert.Equal(ct, uint64(n), c.DeadLettered)
		} else {
			assert.Equal(ct, uint64(n), c.Retried)
			assert.Equal(ct, uint64(n), c.Acked)
		}
	}, 10*time.Second, 10*time.Millisecond, "the counters")
	c := g.Counters()
	assert.Zero(t, c.Reclaimed)
	assert.Zero(t, c.MemoryRefused)
	out := logs.String()
	assert.NotContains(t, out, "Redis refuses writes for memory")
	assert.NotContains(t, out, "scheduling retry failed")
	assert.NotContains(t, out, "dead-lettering failed")
}
