package delaystream_test

import (
	"context"
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

// logEvents counts the log lines whose message starts with one of the
// prefixes it is asked about: the events a test waits for.
type logEvents struct {
	mu sync.Mutex
	n  map[string]int
}

func (l *logEvents) Enabled(context.Context, slog.Level) bool { return true }
func (l *logEvents) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logEvents) WithGroup(string) slog.Handler            { return l }
func (l *logEvents) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n == nil {
		l.n = map[string]int{}
	}
	msg, _, _ := strings.Cut(r.Message, ":")
	l.n[msg]++
	return nil
}

// count returns how many lines starting with msg (up to its first colon)
// were logged.
func (l *logEvents) count(msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n[msg]
}

// handled records each delivery of a message: when its handler started.
type handled struct {
	mu    sync.Mutex
	at    map[string][]time.Time
	early []string
}

func (h *handled) add(d *delaystream.Delivery) {
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.at == nil {
		h.at = map[string][]time.Time{}
	}
	h.at[d.ID] = append(h.at[d.ID], now)
	if now.Before(d.Due) {
		h.early = append(h.early, fmt.Sprintf("%s handled %s before its due time", d.ID, d.Due.Sub(now)))
	}
}

func (h *handled) count(prefix string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for id, ts := range h.at {
		if strings.HasPrefix(id, prefix) {
			n += len(ts)
		}
	}
	return n
}

// checkOnce asserts that each of the n messages prefix0 … prefix<n-1> was
// handled exactly once and none early.
func (h *handled) checkOnce(t *testing.T, prefix string, n int) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range n {
		id := fmt.Sprintf("%s%d", prefix, i)
		assert.Len(t, h.at[id], 1, "message %s", id)
	}
	assert.Empty(t, h.early)
}

// pauseProc is one process of the pause tests: a Queue with the group
// "g", its logger's events, and its Run.
type pauseProc struct {
	q    *delaystream.Queue
	g    *delaystream.Group
	logs *logEvents
	stop context.CancelFunc
	done chan error
}

func startPauseProc(t *testing.T, rdb redis.UniversalClient, prefix string, shards int, h *handled, block func(*delaystream.Delivery)) *pauseProc {
	t.Helper()
	p := &pauseProc{logs: &logEvents{}, done: make(chan error, 1)}
	var err error
	p.q, err = delaystream.New(rdb, "jobs", delaystream.WithPrefix(prefix), delaystream.WithShards(shards),
		delaystream.WithLogger(slog.New(p.logs)), delaystream.WithDrainTimeout(5*time.Second))
	require.NoError(t, err)
	p.g, err = p.q.Handle("g", func(_ context.Context, d *delaystream.Delivery) error {
		h.add(d)
		if block != nil {
			block(d)
		}
		return nil
	}, delaystream.WithWorkers(4), delaystream.WithReclaimInterval(100*time.Millisecond))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	p.stop = cancel
	go func() { p.done <- p.q.Run(ctx) }()
	t.Cleanup(p.halt)
	return p
}

// halt stops the process's Run and waits for it (idempotent).
func (p *pauseProc) halt() {
	p.stop()
	if p.done != nil {
		<-p.done
		p.done = nil
	}
}

func scheduleN(t *testing.T, q *delaystream.Queue, prefix string, n int, in time.Duration) {
	t.Helper()
	items := make([]delaystream.Item, n)
	for i := range items {
		items[i] = delaystream.Item{Message: delaystream.Message{ID: fmt.Sprintf("%s%d", prefix, i), Payload: []byte("x")},
			When: delaystream.After(in)}
	}
	_, err := q.ScheduleBatch(context.Background(), items)
	require.NoError(t, err)
}

// A paused group takes nothing in either of two processes: what is
// promoted meanwhile waits in the stream (lag), nothing is pending, a
// handler running when the pause came finishes and is acknowledged; after
// the resume (from the other process) every message is handled once and
// none early.
func TestGroupPause(t *testing.T) {
	t.Parallel()
	for _, shards := range []int{1, 4, 8} {
		t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			var rdb redis.UniversalClient = redistest.Client(t)
			if shards == 8 { // on a Cluster of 3 masters: the notice is a shard channel's
				cl, err := redistest.SpawnCluster(3, 0)
				require.NoError(t, err)
				t.Cleanup(cl.Stop)
				cc := cl.Client()
				t.Cleanup(func() { _ = cc.Close() })
				rdb = cc
			}
			prefix := redistest.Prefix(t)
			h := &handled{}
			release := make(chan struct{})
			started := make(chan struct{}, 1)
			block := func(d *delaystream.Delivery) {
				if d.ID == "slow" {
					started <- struct{}{}
					<-release
				}
			}
			a := startPauseProc(t, rdb, prefix, shards, h, block)
			b := startPauseProc(t, rdb, prefix, shards, h, block)

			// A handler runs when the pause comes.
			_, err := a.q.Schedule(ctx, delaystream.Message{ID: "slow"}, delaystream.After(0))
			require.NoError(t, err)
			<-started
			require.NoError(t, a.g.Pause(ctx))
			require.Eventually(t, func() bool {
				return a.logs.count("group paused") == 1 && b.logs.count("group paused") == 1
			}, 5*time.Second, 10*time.Millisecond, "both processes hear of the pause")
			st, err := b.g.Stats(ctx)
			require.NoError(t, err)
			assert.False(t, st.PausedSince.IsZero(), "stats show the pause")
			assert.WithinDuration(t, time.Now(), st.PausedSince, time.Minute)
			close(release)
			require.Eventually(t, func() bool {
				st, err := a.g.Stats(ctx)
				return err == nil && st.Pending == 0
			}, 10*time.Second, 20*time.Millisecond, "the running handler finishes and is acknowledged while paused")

			const n = 40
			scheduleN(t, a.q, "m", n, 200*time.Millisecond)
			require.Eventually(t, func() bool {
				st, err := a.g.Stats(ctx)
				return err == nil && st.Lag == n
			}, 10*time.Second, 20*time.Millisecond, "promoted into the stream, not read")
			assert.Never(t, func() bool { return h.count("m") > 0 }, time.Second, 20*time.Millisecond, "nothing handled while paused")
			st, err = a.g.Stats(ctx)
			require.NoError(t, err)
			assert.Zero(t, st.Pending, "nothing taken while paused")
			assert.EqualValues(t, n, st.Lag)

			require.NoError(t, b.g.Resume(ctx))
			require.Eventually(t, func() bool { return h.count("m") >= n }, 10*time.Second, 10*time.Millisecond)
			require.Eventually(t, func() bool {
				st, err := a.g.Stats(ctx)
				return err == nil && st.Pending == 0 && st.Lag == 0
			}, 10*time.Second, 20*time.Millisecond)
			h.checkOnce(t, "m", n)
			assert.Equal(t, 1, h.count("slow"))
			st, err = b.g.Stats(ctx)
			require.NoError(t, err)
			assert.True(t, st.PausedSince.IsZero())
			assert.Equal(t, 1, a.logs.count("group resumed"))
			assert.Equal(t, 1, b.logs.count("group resumed"))
		})
	}
}

// A paused queue promotes nothing in either of two processes: due
// messages wait and show as overdue, also after both processes restart
// (which report the pause); after the resume every message is handled
// once and none early.
func TestQueuePause(t *testing.T) {
	t.Parallel()
	for _, shards := range []int{1, 4} {
		t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			rdb := redistest.Client(t)
			prefix := redistest.Prefix(t)
			h := &handled{}
			a := startPauseProc(t, rdb, prefix, shards, h, nil)
			b := startPauseProc(t, rdb, prefix, shards, h, nil)
			require.NoError(t, a.q.Pause(ctx))
			st, err := b.q.Stats(ctx)
			require.NoError(t, err)
			assert.WithinDuration(t, time.Now(), st.PausedSince, time.Minute)

			const n = 30
			scheduleN(t, a.q, "m", n, 100*time.Millisecond)
			require.Eventually(t, func() bool {
				st, err := b.q.Stats(ctx)
				return err == nil && st.Overdue == n
			}, 10*time.Second, 20*time.Millisecond, "due messages wait, overdue")
			assert.Never(t, func() bool { return h.count("m") > 0 }, time.Second, 20*time.Millisecond, "nothing promoted while paused")

			// Both processes stop; two new ones find the pause and report it.
			a.halt()
			b.halt()
			c := startPauseProc(t, rdb, prefix, shards, h, nil)
			d := startPauseProc(t, rdb, prefix, shards, h, nil)
			require.Eventually(t, func() bool {
				return c.logs.count("queue paused") == 1 && d.logs.count("queue paused") == 1
			}, 10*time.Second, 10*time.Millisecond, "the pause is reported at start")
			assert.Never(t, func() bool { return h.count("m") > 0 }, time.Second, 20*time.Millisecond, "nothing promoted after the restart")
			st, err = d.q.Stats(ctx)
			require.NoError(t, err)
			assert.EqualValues(t, n, st.Overdue)

			require.NoError(t, d.q.Resume(ctx))
			require.Eventually(t, func() bool { return h.count("m") >= n }, 10*time.Second, 10*time.Millisecond)
			st, err = c.q.Stats(ctx)
			require.NoError(t, err)
			assert.True(t, st.PausedSince.IsZero())
			assert.Zero(t, st.Waiting)
			h.checkOnce(t, "m", n)
		})
	}
}
