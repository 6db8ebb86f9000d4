package delay_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/internal/delay"
	"github.com/delaystream/delaystream/internal/redistest"
	"github.com/delaystream/delaystream/internal/scripts"
	"github.com/delaystream/delaystream/internal/wire"
)

// The group-commit tests that are about who waits for whom run inside a
// testing/synctest bubble, against miniredis served over net.Pipe: a
// goroutine waiting for a call in flight counts as blocked, so
// synctest.Wait says when every caller has queued, and the order callers
// arrive in is the order the test starts them.

// pipeRedis returns an in-bubble miniredis and a client of it.
func pipeRedis(t *testing.T) (*miniredis.Miniredis, *redis.Client) {
	mr := miniredis.NewMiniRedis()
	rdb := redis.NewClient(&redis.Options{
		// An IP address, and no maintenance notifications: go-redis would
		// otherwise resolve a host name, and DNS cannot run in a bubble.
		Addr:                     "127.0.0.1:6379",
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		Dialer:                   func(context.Context, string, string) (net.Conn, error) { return mr.Dial() },
	})
	t.Cleanup(func() {
		_ = rdb.Close()
		mr.Close()
	})
	return mr, rdb
}

// gate is a go-redis hook that records how many messages each schedule
// script call carries (alone or in a pipeline), can hold the next script
// calls until opened, and can fail the next one.
type gate struct {
	mu      sync.Mutex
	calls   []int         // messages per schedule script call, in order
	hold    int           // how many more calls to hold
	release chan struct{} // closed by open
	fail    error         // the next call's error, once
}

func newGate() *gate { return &gate{release: make(chan struct{})} }

// holdNext makes the next n schedule script calls wait for open.
func (g *gate) holdNext(n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.hold = n
}

// open lets the calls held so far go on; calls held later wait for the
// next open.
func (g *gate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	close(g.release)
	g.release = make(chan struct{})
}

func (g *gate) failNext(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.fail = err
}

func (g *gate) sizes() []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]int(nil), g.calls...)
}

// messages returns how many messages cmd carries if it is a schedule
// script call, else -1.
func messages(cmd redis.Cmder) int {
	args := cmd.Args()
	if len(args) < 3 || (cmd.Name() != "evalsha" && cmd.Name() != "eval") {
		return -1
	}
	body, _ := args[1].(string)
	per := 0
	switch body {
	case scripts.Schedule.Hash():
		per = 4
	case scripts.ScheduleGenerated.Hash():
		per = 2
	default:
		return -1
	}
	keys, _ := args[2].(int)
	return (len(args) - 3 - keys - 1) / per
}

// enter records the script calls among cmds and returns whether to hold
// them and the error to fail them with.
func (g *gate) enter(cmds ...redis.Cmder) (wait chan struct{}, fail error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	found := false
	for _, c := range cmds {
		if n := messages(c); n >= 0 {
			g.calls = append(g.calls, n)
			found = true
		}
	}
	if !found {
		return nil, nil
	}
	fail, g.fail = g.fail, nil
	if g.hold > 0 {
		g.hold--
		return g.release, fail
	}
	return nil, fail
}

func (g *gate) DialHook(next redis.DialHook) redis.DialHook { return next }
func (g *gate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		wait, fail := g.enter(cmd)
		if wait != nil {
			<-wait
		}
		if fail != nil {
			cmd.SetErr(fail)
			return fail
		}
		return next(ctx, cmd)
	}
}
func (g *gate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		wait, fail := g.enter(cmds...)
		if wait != nil {
			<-wait
		}
		if fail != nil {
			for _, c := range cmds {
				c.SetErr(fail)
			}
			return fail
		}
		return next(ctx, cmds)
	}
}

// bubbleQueue returns a queue on an in-bubble miniredis with a gate, its
// scripts loaded and its shard count recorded (one message scheduled).
func bubbleQueue(t *testing.T, opts ...delay.Option) (*delay.Queue, *gate, *miniredis.Miniredis) {
	mr, rdb := pipeRedis(t)
	g := newGate()
	rdb.AddHook(g)
	q, err := delay.New(rdb, "q", append([]delay.Option{delay.WithPrefix("gc")}, opts...)...)
	require.NoError(t, err)
	_, err = q.Schedule(context.Background(), delay.Message{ID: "warm-up"}, delay.After(time.Hour))
	require.NoError(t, err)
	_, err = q.Schedule(context.Background(), delay.Message{}, delay.After(time.Hour))
	require.NoError(t, err)
	g.mu.Lock()
	g.calls = nil
	g.mu.Unlock()
	return q, g, mr
}

// call is one Schedule call started by callers.
type call struct {
	res  delay.Result
	err  error
	done atomic.Bool
}

// callers starts Schedule calls one at a time, each once the previous
// ones are blocked (queued, or in a held call), so they arrive in order.
type callers struct {
	t     *testing.T
	q     *delay.Queue
	wg    sync.WaitGroup
	calls []*call
}

func (c *callers) start(ctx context.Context, msg delay.Message, when delay.When) *call {
	cl := &call{}
	c.calls = append(c.calls, cl)
	c.wg.Go(func() {
		cl.res, cl.err = c.q.Schedule(ctx, msg, when)
		cl.done.Store(true)
	})
	synctest.Wait()
	return cl
}

// While a call is in flight, the calls that arrive wait and are then sent
// together, in one script call, each with its own result; a lone caller
// is sent at once, alone.
func TestGroupCommitCoalesces(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		q, g, _ := bubbleQueue(t)

		// One caller at a time: one script call each, of one message.
		for i := range 3 {
			res, err := q.Schedule(ctx, delay.Message{ID: fmt.Sprint("alone-", i)}, delay.After(time.Hour))
			require.NoError(t, err)
			require.Equal(t, delay.Created, res.Outcome)
		}
		require.Equal(t, []int{1, 1, 1}, g.sizes())

		g.holdNext(1)
		base := time.Now().Add(time.Hour).Truncate(time.Millisecond)
		cs := &callers{t: t, q: q}
		first := cs.start(ctx, delay.Message{ID: "first", Payload: []byte("first")}, delay.At(base))
		assert.False(t, first.done.Load(), "the first call is held")
		const n = 40
		for i := range n {
			msg := delay.Message{Payload: []byte(strconv.Itoa(i))}
			if i%2 == 0 {
				msg.ID = fmt.Sprint("id-", i)
			}
			cs.start(ctx, msg, delay.At(base.Add(time.Duration(i)*time.Second)))
		}
		for _, c := range cs.calls {
			assert.False(t, c.done.Load(), "every caller waits while the first call is in flight")
		}
		require.Equal(t, []int{1, 1, 1, 1}, g.sizes(), "nothing else sent while the first call is in flight")
		g.open()
		cs.wg.Wait()
		assert.Equal(t, []int{1, 1, 1, 1, n}, g.sizes(), "the waiting callers sent in one script call")

		require.NoError(t, first.err)
		assert.Equal(t, delay.Result{ID: "first", Due: base, Outcome: delay.Created}, first.res)
		seen := map[string]bool{}
		for i, c := range cs.calls[1:] {
			require.NoError(t, c.err, "caller %d", i)
			assert.Equal(t, delay.Created, c.res.Outcome, "caller %d", i)
			assert.True(t, base.Add(time.Duration(i)*time.Second).Equal(c.res.Due), "caller %d: its own due time, got %v", i, c.res.Due)
			if i%2 == 0 {
				assert.Equal(t, fmt.Sprint("id-", i), c.res.ID)
			} else {
				assert.True(t, wire.GeneratedLayout(c.res.ID), "caller %d: generated id %q", i, c.res.ID)
			}
			assert.False(t, seen[c.res.ID], "caller %d: id %s given twice", i, c.res.ID)
			seen[c.res.ID] = true
			env, err := q.Get(ctx, c.res.ID)
			require.NoError(t, err, "caller %d", i)
			assert.Equal(t, strconv.Itoa(i), string(env.Payload), "caller %d: its own payload", i)
		}
	})
}

// Calls of one id sent together are applied in their callers' arrival
// order, each with its own duplicate policy, as if made one after the
// other.
func TestGroupCommitSameIDInArrivalOrder(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		q, g, _ := bubbleQueue(t)
		base := time.Now().Add(time.Hour).Truncate(time.Millisecond)
		at := func(m int) delay.When { return delay.At(base.Add(time.Duration(m) * time.Minute)) }

		g.holdNext(1)
		cs := &callers{t: t, q: q}
		cs.start(ctx, delay.Message{ID: "other"}, at(0)) // in flight: the rest wait
		a1 := cs.start(ctx, delay.Message{ID: "a", Payload: []byte("a1")}, at(1))
		a2 := cs.start(ctx, delay.Message{ID: "a", Payload: []byte("a2")}, at(2)) // queue default: keep
		a3 := cs.start(ctx, delay.Message{ID: "a", Payload: []byte("a3"), OnDuplicate: delay.Replace}, at(3))
		a4 := cs.start(ctx, delay.Message{ID: "a", Payload: []byte("a4"), OnDuplicate: delay.Reject}, at(4))
		a5 := cs.start(ctx, delay.Message{ID: "a", Payload: []byte("a5"), OnDuplicate: delay.Replace}, at(5))
		g.open()
		cs.wg.Wait()
		require.Equal(t, []int{1, 5}, g.sizes(), "the five calls of id a in one script call")

		for _, tc := range []struct {
			c       *call
			outcome delay.Outcome
			minute  int
		}{{a1, delay.Created, 1}, {a2, delay.Kept, 1}, {a3, delay.Replaced, 3}, {a4, delay.Rejected, 3}, {a5, delay.Replaced, 5}} {
			assert.Equal(t, tc.outcome, tc.c.res.Outcome)
			assert.Equal(t, "a", tc.c.res.ID)
			assert.True(t, base.Add(time.Duration(tc.minute)*time.Minute).Equal(tc.c.res.Due), "%s: due %v", tc.outcome, tc.c.res.Due)
			if tc.outcome == delay.Rejected {
				require.ErrorIs(t, tc.c.err, delay.ErrDuplicate)
				assert.EqualError(t, tc.c.err, "schedule a: delaystream: duplicate message id")
			} else {
				require.NoError(t, tc.c.err)
			}
		}
		env, err := q.Get(ctx, "a")
		require.NoError(t, err)
		assert.Equal(t, "a5", string(env.Payload))
		assert.True(t, base.Add(5*time.Minute).Equal(env.Due))
	})
}

// Invalid messages are refused at their own call, before they wait for
// anything, and write nothing; the valid calls around them go through.
func TestGroupCommitValidationPerCall(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		q, g, _ := bubbleQueue(t, delay.WithMaxPayload(10))
		g.holdNext(1)
		cs := &callers{t: t, q: q}
		cs.start(ctx, delay.Message{ID: "ok-0"}, delay.After(time.Hour))
		bad := []*call{
			cs.start(ctx, delay.Message{ID: "big", Payload: make([]byte, 11)}, delay.After(time.Hour)),
			cs.start(ctx, delay.Message{ID: "bad\x00id"}, delay.After(time.Hour)),
			cs.start(ctx, delay.Message{ID: "hdr", Headers: map[string]string{"ds.x": "y"}}, delay.After(time.Hour)),
			cs.start(ctx, delay.Message{ID: "when"}, delay.When{}),
			cs.start(ctx, delay.Message{ID: "deadline", Deadline: time.Now()}, delay.After(time.Hour)),
		}
		for i, c := range bad {
			require.True(t, c.done.Load(), "invalid call %d returned at once, while a call is in flight", i)
			require.ErrorIs(t, c.err, delay.ErrInvalidMessage, "call %d", i)
			assert.NotContains(t, c.err.Error(), "item", "a single message's error speaks of no items")
			assert.Equal(t, delay.Result{}, c.res)
		}
		ok1 := cs.start(ctx, delay.Message{ID: "ok-1"}, delay.After(time.Hour))
		ok2 := cs.start(ctx, delay.Message{}, delay.After(time.Hour))
		g.open()
		cs.wg.Wait()
		assert.Equal(t, []int{1, 2}, g.sizes(), "only the valid calls were sent")
		require.NoError(t, ok1.err)
		require.NoError(t, ok2.err)
		n, err := q.Len(ctx)
		require.NoError(t, err)
		assert.Equal(t, int64(2+3), n, "the warm-up's two and the three valid ones")
		for _, id := range []string{"big", "bad\x00id", "hdr", "when", "deadline"} {
			_, err := q.Get(ctx, id)
			if errors.Is(err, delay.ErrInvalidMessage) {
				continue
			}
			assert.ErrorIs(t, err, delay.ErrNotFound, id)
		}
	})
}

// A caller whose ctx ends while it waits returns at once and fails nobody
// else. Still queued, its message is not written; taken by a call in
// flight, it may be (here it is).
func TestGroupCommitCancelledWaiter(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		q, g, _ := bubbleQueue(t)
		g.holdNext(1)
		cs := &callers{t: t, q: q}
		lead := cs.start(ctx, delay.Message{ID: "lead"}, delay.After(time.Hour))
		before := cs.start(ctx, delay.Message{ID: "before"}, delay.After(time.Hour))
		short, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		gone := cs.start(short, delay.Message{ID: "gone"}, delay.After(time.Hour))
		after := cs.start(ctx, delay.Message{ID: "after"}, delay.After(time.Hour))

		time.Sleep(time.Second) // fake time: the short ctx ends
		synctest.Wait()
		require.True(t, gone.done.Load(), "the cancelled caller returned while the call is still held")
		require.ErrorIs(t, gone.err, context.DeadlineExceeded)
		assert.Equal(t, delay.Result{}, gone.res)
		assert.False(t, lead.done.Load())

		// The next call is held too: a caller it took is cancelled while
		// it is in flight.
		g.holdNext(1)
		g.open()
		synctest.Wait()
		require.True(t, lead.done.Load())
		require.NoError(t, lead.err)
		assert.Equal(t, []int{1, 2}, g.sizes(), "before and after in one call, without the cancelled one")
		sender := cs.start(ctx, delay.Message{ID: "sender"}, delay.After(time.Hour)) // waits for the held call
		inflight, cancel2 := context.WithCancel(ctx)
		late := cs.start(inflight, delay.Message{ID: "late"}, delay.After(time.Hour))
		// sender sends a third call with late's message; hold it, then
		// cancel late.
		g.holdNext(1)
		g.open()
		synctest.Wait()
		require.NoError(t, before.err)
		require.NoError(t, after.err)
		assert.Equal(t, delay.Created, after.res.Outcome)
		assert.Equal(t, []int{1, 2, 2}, g.sizes(), "late's call is in flight")
		cancel2()
		synctest.Wait()
		require.True(t, late.done.Load(), "a caller whose call is in flight returns when its ctx ends")
		require.ErrorIs(t, late.err, context.Canceled)
		assert.False(t, sender.done.Load())
		g.open()
		cs.wg.Wait()
		require.NoError(t, sender.err)

		_, err := q.Get(ctx, "gone")
		assert.ErrorIs(t, err, delay.ErrNotFound, "a caller cancelled while queued wrote nothing")
		_, err = q.Get(ctx, "late")
		assert.NoError(t, err, "a caller cancelled while its call was in flight may still be written")
		for _, id := range []string{"lead", "before", "after", "sender"} {
			_, err := q.Get(ctx, id)
			assert.NoError(t, err, id)
		}
		// The group is idle again: a lone call goes straight out.
		_, err = q.Schedule(ctx, delay.Message{ID: "next"}, delay.After(time.Hour))
		require.NoError(t, err)
		assert.Equal(t, []int{1, 2, 2, 1}, g.sizes())
	})
}

// A grouped call that fails fails every caller in it with its error; the
// call before it, and the one after it, are not affected.
func TestGroupCommitFlushErrorReachesEveryCaller(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		q, g, _ := bubbleQueue(t)
		g.holdNext(1)
		cs := &callers{t: t, q: q}
		lead := cs.start(ctx, delay.Message{ID: "lead"}, delay.After(time.Hour))
		var group []*call
		for i := range 5 {
			msg := delay.Message{}
			if i%2 == 0 {
				msg.ID = fmt.Sprint("m", i)
			}
			group = append(group, cs.start(ctx, msg, delay.After(time.Hour)))
		}
		boom := errors.New("connection reset (injected)")
		g.failNext(boom) // the held call has entered the hook: this is the group's
		g.open()
		cs.wg.Wait()
		assert.Equal(t, []int{1, 5}, g.sizes())
		require.NoError(t, lead.err)
		for i, c := range group {
			require.ErrorIs(t, c.err, boom, "caller %d", i)
			assert.Equal(t, "schedule q: connection reset (injected)", c.err.Error(), "caller %d", i)
			assert.Equal(t, delay.Result{}, c.res, "caller %d: Unknown, and no half-made generated id", i)
		}
		res, err := q.Schedule(ctx, delay.Message{ID: "m0"}, delay.After(time.Hour))
		require.NoError(t, err)
		assert.Equal(t, delay.Created, res.Outcome, "the failed call wrote nothing")
	})
}

// In a sharded queue a grouped call makes one script call per shard: a
// shard's failure fails its own callers only.
func TestGroupCommitShardErrorReachesItsCallers(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		q, g, mr := bubbleQueue(t, delay.WithShards(2))
		l := q.Layout()
		var ids [2][]string // caller ids per shard
		for i := 0; len(ids[0]) < 3 || len(ids[1]) < 3; i++ {
			id := fmt.Sprint("o", i)
			if s := l.ShardOf(id); len(ids[s]) < 3 {
				ids[s] = append(ids[s], id)
			}
		}
		g.holdNext(1)
		cs := &callers{t: t, q: q}
		cs.start(ctx, delay.Message{ID: ids[0][0]}, delay.After(time.Hour))
		byShard := map[int][]*call{}
		for k := 1; k < 3; k++ {
			for s := range 2 {
				byShard[s] = append(byShard[s], cs.start(ctx, delay.Message{ID: ids[s][k]}, delay.After(time.Hour)))
			}
		}
		broken := l.Shard(1).Main().Delayed
		mr.Del(broken)
		require.NoError(t, mr.Set(broken, "not a sorted set"))
		g.open()
		cs.wg.Wait()
		assert.Equal(t, []int{1, 2, 2}, g.sizes(), "one call per shard, in one pipeline")
		for _, c := range byShard[0] {
			require.NoError(t, c.err)
			assert.Equal(t, delay.Created, c.res.Outcome)
		}
		for _, c := range byShard[1] {
			require.Error(t, c.err)
			assert.NotErrorIs(t, c.err, delay.ErrDuplicate)
			assert.True(t, strings.Contains(c.err.Error(), "WRONGTYPE") || strings.Contains(c.err.Error(), broken),
				"the shard's own error: %v", c.err)
			assert.Equal(t, delay.Result{}, c.res)
		}
	})
}

// Without group commit every call is sent on its own: a call does not
// wait for another one in flight.
func TestWithoutGroupCommit(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		q, g, _ := bubbleQueue(t, delay.WithoutGroupCommit())
		g.holdNext(1)
		cs := &callers{t: t, q: q}
		held := cs.start(ctx, delay.Message{ID: "held"}, delay.After(time.Hour))
		other := cs.start(ctx, delay.Message{ID: "other"}, delay.After(time.Hour))
		third := cs.start(ctx, delay.Message{}, delay.After(time.Hour))
		assert.False(t, held.done.Load())
		require.True(t, other.done.Load(), "sent while another call is in flight")
		require.True(t, third.done.Load())
		require.NoError(t, other.err)
		require.NoError(t, third.err)
		g.open()
		cs.wg.Wait()
		require.NoError(t, held.err)
		assert.Equal(t, []int{1, 1, 1}, g.sizes())
	})
}

// countScripts counts the schedule script calls and the messages they
// carry, pipelined or not.
type countScripts struct{ calls, msgs atomic.Int64 }

func (h *countScripts) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *countScripts) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.count(cmd)
		return next(ctx, cmd)
	}
}
func (h *countScripts) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			h.count(c)
		}
		return next(ctx, cmds)
	}
}
func (h *countScripts) count(cmd redis.Cmder) {
	if n := messages(cmd); n >= 0 {
		h.calls.Add(1)
		h.msgs.Add(int64(n))
	}
}

// hammer runs workers goroutines, each making each Schedule calls with
// unique payloads (every third message with a generated id, the others
// with id "<prefix><worker>-<i>"), and checks every caller's own result:
// its id, Created, and its payload stored under that id.
func hammer(t *testing.T, q *delay.Queue, workers, each int) {
	t.Helper()
	ctx := context.Background()
	type got struct {
		res     delay.Result
		payload string
	}
	results := make([][]got, workers)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				payload := fmt.Sprintf("%d-%d", w, i)
				msg := delay.Message{Payload: []byte(payload)}
				if i%3 != 0 {
					msg.ID = "c" + payload
				}
				res, err := q.Schedule(ctx, msg, delay.After(time.Hour+time.Duration(i)*time.Millisecond))
				if err != nil {
					errs <- fmt.Errorf("worker %d call %d: %w", w, i, err)
					return
				}
				if msg.ID != "" && res.ID != msg.ID {
					errs <- fmt.Errorf("worker %d call %d: got id %s", w, i, res.ID)
					return
				}
				results[w] = append(results[w], got{res, payload})
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	seen := map[string]bool{}
	for w := range workers {
		require.Len(t, results[w], each)
		for _, g := range results[w] {
			require.Equal(t, delay.Created, g.res.Outcome, g.payload)
			require.False(t, seen[g.res.ID], "id %s given twice", g.res.ID)
			seen[g.res.ID] = true
			env, err := q.Get(ctx, g.res.ID)
			require.NoError(t, err, g.payload)
			require.Equal(t, g.payload, string(env.Payload), "the caller's own payload under its id %s", g.res.ID)
			require.True(t, env.Due.Equal(g.res.Due), g.payload)
		}
	}
	n, err := q.Len(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(workers*each), n)
}

// Many goroutines calling Schedule on a real server: each gets its own
// result, and the calls were grouped.
func TestGroupCommitConcurrentRedis(t *testing.T) {
	t.Parallel()
	for _, shards := range []int{1, 4} {
		t.Run(fmt.Sprint(shards, "-shards"), func(t *testing.T) {
			t.Parallel()
			rdb := redis.NewClient(redistest.Options(t, redistest.Addr(t)))
			t.Cleanup(func() { _ = rdb.Close() })
			h := &countScripts{}
			rdb.AddHook(h)
			q, err := delay.New(rdb, "q", delay.WithPrefix(redistest.Prefix(t)), delay.WithShards(shards))
			require.NoError(t, err)
			const workers, each = 64, 40
			hammer(t, q, workers, each)
			require.EqualValues(t, workers*each, h.msgs.Load())
			assert.Less(t, h.calls.Load(), int64(workers*each/2), "%d script calls for %d messages", h.calls.Load(), workers*each)
			t.Logf("%d messages in %d script calls", workers*each, h.calls.Load())
		})
	}
}

// Callers whose ctx ends at random points, on a real server: every
// caller returns, none fails but by its ctx, what a nil error reports is
// stored, and the queue keeps working.
func TestGroupCommitRandomCancellation(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	q, err := delay.New(rdb, "q", delay.WithPrefix(redistest.Prefix(t)))
	require.NoError(t, err)
	const workers, each = 32, 60
	var wg sync.WaitGroup
	var ok, cancelled atomic.Int64
	failures := make(chan error, workers*each)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration((w*each+i)%7)*100*time.Microsecond)
				id := fmt.Sprintf("w%d-%d", w, i)
				res, err := q.Schedule(ctx, delay.Message{ID: id, Payload: []byte(id)}, delay.After(time.Hour))
				cancel()
				switch {
				case err == nil:
					ok.Add(1)
					env, gerr := q.Get(context.Background(), id)
					if gerr != nil || string(env.Payload) != id || res.Outcome != delay.Created {
						failures <- fmt.Errorf("%s: reported %v, stored %q, %v", id, res.Outcome, env.Payload, gerr)
					}
				case errors.Is(err, context.DeadlineExceeded):
					cancelled.Add(1)
				default:
					failures <- fmt.Errorf("%s: %w", id, err)
				}
			}
		})
	}
	wg.Wait()
	close(failures)
	for err := range failures {
		require.NoError(t, err)
	}
	t.Logf("%d written, %d cancelled", ok.Load(), cancelled.Load())
	assert.Positive(t, ok.Load())
	assert.Positive(t, cancelled.Load())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := q.Schedule(ctx, delay.Message{ID: "after"}, delay.After(time.Hour))
	require.NoError(t, err, "the queue is not stuck")
	assert.Equal(t, delay.Created, res.Outcome)
}

// On a Redis Cluster a sharded queue groups calls per master: every
// caller gets its own result, and the masters' calls were grouped.
func TestGroupCommitCluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, err := redistest.SpawnCluster(3, 0)
	require.NoError(t, err)
	t.Cleanup(c.Stop)
	rdb := c.Client()
	t.Cleanup(func() { _ = rdb.Close() })
	h := &countScripts{}
	rdb.AddHook(h)
	q, err := delay.New(rdb, "orders", delay.WithPrefix(redistest.Prefix(t)), delay.WithShards(16))
	require.NoError(t, err)
	// The scripts loaded on every master first (a ClusterClient's SCRIPT
	// LOAD goes to all), so no call is counted twice for a NOSCRIPT retry.
	require.NoError(t, scripts.Schedule.Load(ctx, rdb).Err())
	require.NoError(t, scripts.ScheduleGenerated.Load(ctx, rdb).Err())
	const workers, each = 64, 30
	hammer(t, q, workers, each)
	require.EqualValues(t, workers*each, h.msgs.Load())
	assert.Less(t, h.calls.Load(), int64(workers*each/2), "%d script calls for %d messages", h.calls.Load(), workers*each)
	t.Logf("%d messages in %d script calls", workers*each, h.calls.Load())
}

// Under WithReplicaAck grouped calls wait for their replicas once per
// call: every caller's message is on the replica when its call returns.
func TestGroupCommitReplicaAck(t *testing.T) {
	t.Parallel()
	master, replicaAddr := masterWithReplica(t)
	replica := client(t, redis.Options{Addr: replicaAddr})
	rdb := client(t, redis.Options{Addr: master})
	h := &countScripts{}
	rdb.AddHook(h)
	q, err := delay.New(rdb, "orders", delay.WithPrefix(redistest.Prefix(t)), delay.WithReplicaAck(1, 5*time.Second))
	require.NoError(t, err)
	ctx := context.Background()
	const workers, each = 32, 20
	var wg sync.WaitGroup
	failures := make(chan error, workers*each)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				id := fmt.Sprintf("w%d-%d", w, i)
				res, err := q.Schedule(ctx, delay.Message{ID: id}, delay.After(time.Hour))
				if err != nil {
					failures <- fmt.Errorf("%s: %w", id, err)
					continue
				}
				score, err := replica.ZScore(ctx, q.Keys().Main().Delayed, id).Result()
				if err != nil || !res.Due.Equal(time.UnixMilli(int64(score))) {
					failures <- fmt.Errorf("%s: not on the replica when Schedule returned: %v", id, err)
				}
			}
		})
	}
	wg.Wait()
	close(failures)
	for err := range failures {
		require.NoError(t, err)
	}
	require.EqualValues(t, workers*each, h.msgs.Load())
	assert.Less(t, h.calls.Load(), int64(workers*each/2), "%d script calls for %d messages", h.calls.Load(), workers*each)
	info, err := rdb.Info(ctx, "commandstats").Result()
	require.NoError(t, err)
	waits := 0
	for _, line := range strings.Split(info, "\r\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_wait:calls="); ok {
			waits, err = strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
			require.NoError(t, err)
		}
	}
	assert.Less(t, waits, workers*each/2, "one WAIT per grouped call")
	t.Logf("%d messages, %d script calls, %d WAITs", workers*each, h.calls.Load(), waits)
}
