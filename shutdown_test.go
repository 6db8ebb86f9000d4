package delaystream_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/internal/redistest"
)

// loud keeps the records at Warn and above.
type loud struct {
	mu   sync.Mutex
	recs []string
}

func (l *loud) Enabled(_ context.Context, lv slog.Level) bool { return lv >= slog.LevelWarn }
func (l *loud) WithAttrs([]slog.Attr) slog.Handler            { return l }
func (l *loud) WithGroup(string) slog.Handler                 { return l }
func (l *loud) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", r.Level, r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, b.String())
	return nil
}

func (l *loud) records() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.recs...)
}

// A clean stop logs nothing at Warn or above, whatever ends Run's
// context: its deadline (go-redis puts it on the sockets, so calls in
// flight fail a moment before the context reports its end), a
// cancellation, or a cancellation with a cause (what signal.NotifyContext
// does when the signal comes; sending the process a real signal would
// stop every parallel test's context at once). Each way stops a queue
// with a group 20 times, unsharded and sharded, at varied moments from
// its start-up to its steady state, and Run returns nil every time.
func TestCleanStopIsQuiet(t *testing.T) {
	t.Parallel()
	type stopper func(context.Context, time.Duration) (context.Context, context.CancelFunc)
	kinds := map[string]stopper{
		"deadline": context.WithTimeout,
		"cancel": func(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(ctx)
			t := time.AfterFunc(d, cancel)
			return ctx, func() { t.Stop(); cancel() }
		},
		"cause": func(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancelCause(ctx)
			sig := errors.New("terminated signal received")
			t := time.AfterFunc(d, func() { cancel(sig) })
			return ctx, func() { t.Stop(); cancel(nil) }
		},
	}
	for name, stop := range kinds {
		for _, shards := range []int{1, 4} {
			t.Run(fmt.Sprintf("%s/shards=%d", name, shards), func(t *testing.T) {
				t.Parallel()
				rdb := redistest.Client(t)
				logs := &loud{}
				prefix := redistest.Prefix(t)
				var handled atomic.Int64 // over every run
				var seenMu sync.Mutex
				seen := map[string]int{} // message id -> times handled
				var ids []string         // scheduled, in order
				queue := func() *delaystream.Queue {
					q, err := delaystream.New(rdb, "quiet", delaystream.WithPrefix(prefix), delaystream.WithShards(shards),
						delaystream.WithLogger(slog.New(logs)), delaystream.WithDrainTimeout(5*time.Second))
					require.NoError(t, err)
					_, err = q.Handle("g", func(_ context.Context, d *delaystream.Delivery) error {
						seenMu.Lock()
						seen[d.ID]++
						seenMu.Unlock()
						handled.Add(1)
						return nil
					})
					require.NoError(t, err)
					return q
				}
				for i := range 20 {
					q := queue()
					res, err := q.Schedule(context.Background(), delaystream.Message{Payload: []byte("x")}, delaystream.After(0))
					require.NoError(t, err)
					ids = append(ids, res.ID)
					// From 30 ms (during start-up) to 258 ms (steady state).
					ctx, cancel := stop(context.Background(), time.Duration(30+12*i)*time.Millisecond)
					done := make(chan error, 1)
					go func() { done <- q.Run(ctx) }()
					select {
					case err := <-done:
						require.NoError(t, err, "run %d: nil after a requested stop", i)
					case <-time.After(15 * time.Second):
						require.FailNow(t, "Run did not return", "run %d", i)
					}
					cancel()
					require.Empty(t, logs.records(), "run %d (stopped after %d ms)", i, 30+12*i)
				}
				// The runs did run: what they handled, and a last run that goes
				// on until every message of the 20 was handled, then stops.
				t.Logf("%d of 20 messages handled by the timed runs", handled.Load())
				q := queue()
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() { done <- q.Run(ctx) }()
				if !assert.Eventually(t, func() bool { return handled.Load() >= 20 }, 30*time.Second, 10*time.Millisecond,
					"every message scheduled by the timed runs handled") {
					seenMu.Lock()
					for i, id := range ids {
						if seen[id] == 0 {
							loc, err := q.Locate(context.Background(), id)
							t.Logf("message %d (%s) not handled; located: %+v (err %v)", i, id, loc, err)
						}
					}
					seenMu.Unlock()
					t.Logf("the queue's state:\n%s", queueState(rdb, prefix))
					t.Logf("consumers' goroutines:\n%s", consumerStacks())
					t.FailNow()
				}
				cancel()
				require.NoError(t, <-done)
				assert.Empty(t, logs.records(), "the last run")
			})
		}
	}
}
