package delaystream_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/codec"
	"github.com/delaystream/delaystream/internal/redistest"
	"github.com/delaystream/delaystream/internal/stream"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// seen records deliveries per group: group -> message id -> payloads.
type seen struct {
	mu  sync.Mutex
	got map[string]map[string][]string
	n   int
}

func (s *seen) add(g, id, payload string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.got == nil {
		s.got = map[string]map[string][]string{}
	}
	if s.got[g] == nil {
		s.got[g] = map[string][]string{}
	}
	s.got[g][id] = append(s.got[g][id], payload)
	s.n++
}

func (s *seen) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// One Queue: a producer, the mover and two groups under one Run, one
// prefix. Every group gets every message once with its own payload, typed
// payloads go through the queue's codec, and Run returns nil after its
// ctx is cancelled.
func TestQueueFanOut(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	q, err := delaystream.New(rdb, "orders", delaystream.WithPrefix(prefix), delaystream.WithCodec(codec.JSON),
		delaystream.WithDrainTimeout(time.Second))
	require.NoError(t, err)

	var s seen
	groups := map[string]*delaystream.Group{}
	for _, g := range []string{"billing", "audit"} {
		grp, err := q.Handle(g, func(_ context.Context, m *delaystream.Delivery) error {
			s.add(g, m.ID, string(m.Payload))
			return nil
		}, delaystream.WithWorkers(2))
		require.NoError(t, err)
		assert.Equal(t, g, grp.Name())
		groups[g] = grp
	}
	type order struct{ N int }
	typed := make(chan order, 20)
	_, err = delaystream.HandleTyped(q, "typed", func(_ context.Context, _ *delaystream.Delivery, o order) error {
		typed <- o
		return nil
	})
	require.NoError(t, err)

	want := map[string][]string{}
	for i := range 10 {
		msg := delaystream.Message{ID: fmt.Sprintf("order:%d", i), Payload: fmt.Appendf(nil, `{"N":%d}`, i)}
		if i%2 == 1 {
			msg.ID = "" // a generated id
		}
		res, err := q.Schedule(ctx, msg, delaystream.After(time.Duration(i)*10*time.Millisecond))
		require.NoError(t, err)
		want[res.ID] = []string{string(msg.Payload)}
	}
	res, err := delaystream.Schedule(ctx, q, delaystream.Message{ID: "typed:1"}, order{N: 42}, delaystream.After(0))
	require.NoError(t, err)
	want[res.ID] = []string{`{"N":42}`}

	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- q.Run(runCtx) }()
	// Every group: billing and audit through s, the typed group through typed.
	deadline := time.Now().Add(20 * time.Second)
	for s.count() != 2*len(want) || len(typed) != len(want) {
		select {
		case err := <-done:
			require.FailNow(t, "Run returned before every group was served", "err %v", err)
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.mu.Lock()
			billing, audit := len(s.got["billing"]), len(s.got["audit"])
			s.mu.Unlock()
			require.FailNow(t, "not every group was served", "billing %d, audit %d, typed %d of %d",
				billing, audit, len(typed), len(want))
		}
	}
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err, "nil after a requested stop")
	case <-time.After(5 * time.Second):
		require.FailNow(t, "Run did not return")
	}
	assert.Equal(t, want, s.got["billing"])
	assert.Equal(t, want, s.got["audit"])
	got := map[int]bool{}
	for len(typed) > 0 {
		got[(<-typed).N] = true
	}
	assert.Len(t, got, 11, "the typed group decodes every payload with the queue's codec")
	assert.True(t, got[42])
	assert.Equal(t, uint64(11), groups["billing"].Counters().Acked)
	st, err := groups["audit"].Stats(ctx)
	require.NoError(t, err)
	assert.Equal(t, "audit", st.Group)
	assert.Zero(t, st.Pending)
	assert.Zero(t, st.DeadLetters)
}

// A Queue built WithoutPromotion runs only its groups; another process's
// Queue (here: one with no groups) promotes for it.
func TestQueueWithoutPromotion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	consumers, err := delaystream.New(rdb, "q", delaystream.WithPrefix(prefix), delaystream.WithoutPromotion())
	require.NoError(t, err)
	got := make(chan string, 1)
	_, err = consumers.Handle("g", func(_ context.Context, m *delaystream.Delivery) error { got <- m.ID; return nil })
	require.NoError(t, err)
	promoter, err := delaystream.New(rdb, "q", delaystream.WithPrefix(prefix))
	require.NoError(t, err)
	_, err = promoter.Schedule(ctx, delaystream.Message{ID: "x"}, delaystream.After(0))
	require.NoError(t, err)

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for _, q := range []*delaystream.Queue{consumers, promoter} {
		wg.Go(func() { assert.NoError(t, q.Run(runCtx)) })
	}
	select {
	case id := <-got:
		assert.Equal(t, "x", id)
	case <-time.After(10 * time.Second):
		require.FailNow(t, "not delivered")
	}
	cancel()
	wg.Wait()
}

// Parts of one queue cannot disagree: a part option that sets its own
// prefix or codec is refused with a clear error, as are bad arguments.
func TestNewRefuses(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	for _, tc := range []struct {
		name  string
		queue string
		opts  []delaystream.Option
		want  string
	}{
		{"bad queue name", "a b", nil, "queue name"},
		{"nil option", "q", []delaystream.Option{nil}, "nil option"},
		{"bad prefix", "q", []delaystream.Option{delaystream.WithPrefix("{x}")}, "prefix name"},
		{"nil codec", "q", []delaystream.Option{delaystream.WithCodec(nil)}, "nil codec"},
		{"drain", "q", []delaystream.Option{delaystream.WithDrainTimeout(0)}, "drain timeout"},
		{"shards", "q", []delaystream.Option{delaystream.WithShards(0)}, "shard count"},
		{"too many shards", "q", []delaystream.Option{delaystream.WithShards(stream.MaxShards + 1)}, "shard count"},
		{"max payload", "q", []delaystream.Option{delaystream.WithMaxPayload(-1)}, "payload"},
		{"replica ack", "q", []delaystream.Option{delaystream.WithReplicaAck(0, time.Second)}, "replicas"},
		{"expire after", "q", []delaystream.Option{delaystream.WithExpireAfter(-time.Second)}, "expire"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := delaystream.New(rdb, tc.queue, tc.opts...)
			require.ErrorIs(t, err, delaystream.ErrInvalidOption)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	_, err := delaystream.New(nil, "q")
	require.ErrorIs(t, err, delaystream.ErrInvalidOption)

	// Group options are checked when the group is added.
	q, err := delaystream.New(rdb, "q", delaystream.WithDuplicatePolicy(delaystream.PolicyReplace))
	require.NoError(t, err)
	nop := func(context.Context, *delaystream.Delivery) error { return nil }
	for _, tc := range []struct {
		name string
		opt  delaystream.GroupOption
		want string
	}{
		{"workers", delaystream.WithWorkers(0), "workers"},
		{"nil backoff", delaystream.WithBackoff(nil), "backoff"},
		{"handler timeout", delaystream.WithHandlerTimeout(0), "handler timeout"},
		{"nil middleware", delaystream.WithMiddleware(nil), "middleware"},
		{"visibility", delaystream.WithVisibilityTimeout(time.Microsecond), "visibility"},
	} {
		_, err = q.Handle("g", nop, tc.opt)
		require.ErrorIs(t, err, delaystream.ErrInvalidOption, tc.name)
		assert.Contains(t, err.Error(), tc.want, tc.name)
	}
	_, err = q.Handle("g", nil)
	require.ErrorIs(t, err, delaystream.ErrInvalidOption)
	_, err = q.Handle("a b", nop)
	require.ErrorIs(t, err, delaystream.ErrInvalidOption)
	_, err = q.Handle("g", nop)
	require.NoError(t, err, "a refused group was not added")
}

// Groups are added before Run, once each; Run runs once at a time; a
// Queue with nothing to run says so.
func TestQueueLifecycle(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	nop := func(context.Context, *delaystream.Delivery) error { return nil }

	idle, err := delaystream.New(rdb, "q", delaystream.WithPrefix(prefix), delaystream.WithoutPromotion())
	require.NoError(t, err)
	err = idle.Run(context.Background())
	require.ErrorIs(t, err, delaystream.ErrInvalidOption)
	assert.Contains(t, err.Error(), "nothing to run")

	q, err := delaystream.New(rdb, "q", delaystream.WithPrefix(prefix))
	require.NoError(t, err)
	_, err = q.Handle("g", nop)
	require.NoError(t, err)
	_, err = q.Handle("g", nop)
	require.ErrorIs(t, err, delaystream.ErrInvalidOption, "a group added twice")

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- q.Run(ctx) }()
	require.Eventually(t, func() bool {
		_, err := q.Handle("late", nop)
		return errors.Is(err, delaystream.ErrRunning)
	}, 5*time.Second, time.Millisecond, "Handle after Run started")
	require.ErrorIs(t, q.Run(ctx), delaystream.ErrRunning)
	cancel()
	require.NoError(t, <-done)
	require.NoError(t, q.Run(ctx), "a stopped Queue may run again (here: at once stopped)")
}

// The Queue forwards what tools and tests ask of a queue: its keys, its
// waiting messages and its quarantine.
func TestQueueInspection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	q, err := delaystream.New(rdb, "q", delaystream.WithPrefix(prefix))
	require.NoError(t, err)
	assert.Equal(t, "q", q.Name())
	layout, err := stream.NewLayout(prefix, "q", 1)
	require.NoError(t, err)
	_, err = q.Schedule(ctx, delaystream.Message{ID: "later"}, delaystream.After(time.Hour))
	require.NoError(t, err)
	n, err := q.Len(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(1), n)
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(1), st.Waiting)
	assert.Zero(t, st.Overdue)

	require.NoError(t, rdb.ZAdd(ctx, layout.Shard(0).Main().Delayed, redis.Z{Member: "orphan", Score: 1}).Err())
	ctx2, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- q.Run(ctx2) }()
	var qs []delaystream.Quarantined
	require.Eventually(t, func() bool {
		qs, err = q.Quarantine(ctx, "", 10)
		return err == nil && len(qs) == 1
	}, 5*time.Second, 5*time.Millisecond)
	cancel()
	require.NoError(t, <-done)
	assert.Equal(t, "orphan", qs[0].ID)
	assert.Equal(t, stream.ReasonMissingEnvelope, qs[0].Reason)
}

// A sharded Queue: every part gets the count, messages of every shard
// reach every group, and the quarantine is read across shards with
// cursors that name the shard.
func TestQueueSharded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	const shards = 4
	q, err := delaystream.New(rdb, "orders", delaystream.WithPrefix(prefix), delaystream.WithShards(shards),
		delaystream.WithDrainTimeout(time.Second), delaystream.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	layout, err := stream.NewLayout(prefix, "orders", shards)
	require.NoError(t, err)
	var s seen
	for _, g := range []string{"billing", "audit"} {
		_, err := q.Handle(g, func(_ context.Context, m *delaystream.Delivery) error {
			s.add(g, m.ID, string(m.Payload))
			return nil
		})
		require.NoError(t, err)
	}
	// A foreign member in two shards' waiting sets: quarantined per shard.
	for _, i := range []int{1, 3} {
		require.NoError(t, rdb.ZAdd(ctx, layout.Shard(i).Main().Delayed, redis.Z{Score: 1, Member: "\x07bad"}).Err())
	}
	want := map[string][]string{}
	for i := range 40 {
		msg := delaystream.Message{ID: fmt.Sprintf("order:%d", i), Payload: fmt.Appendf(nil, "p%d", i)}
		if i%2 == 1 {
			msg.ID = ""
		}
		res, err := q.Schedule(ctx, msg, delaystream.After(time.Duration(i)*5*time.Millisecond))
		require.NoError(t, err)
		want[res.ID] = []string{string(msg.Payload)}
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- q.Run(runCtx) }()
	require.Eventually(t, func() bool { return s.count() == 2*len(want) }, 10*time.Second, 5*time.Millisecond)
	cancel()
	require.NoError(t, <-done)
	assert.Equal(t, want, s.got["billing"])
	assert.Equal(t, want, s.got["audit"])

	var got []delaystream.Quarantined
	after := ""
	for {
		page, err := q.Quarantine(ctx, after, 1)
		require.NoError(t, err)
		if len(page) == 0 {
			break
		}
		got = append(got, page...)
		after = page[len(page)-1].EntryID
	}
	require.Len(t, got, 2)
	assert.True(t, strings.HasSuffix(got[0].EntryID, "@1"), got[0].EntryID)
	assert.True(t, strings.HasSuffix(got[1].EntryID, "@3"), got[1].EntryID)
	_, err = q.Quarantine(ctx, "1-0", 1)
	require.ErrorIs(t, err, delaystream.ErrInvalidOption, "an unqualified cursor on a sharded queue")
}
