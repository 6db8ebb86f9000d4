package group_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"

	"github.com/delaystream/delaystream/internal/group"
	"github.com/delaystream/delaystream/internal/redistest"
)

// readCounts is a go-redis hook that records the largest COUNT of the
// XREADGROUP calls made through the client.
type readCounts struct{ max atomic.Int64 }

func (h *readCounts) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *readCounts) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.see(cmd)
		return next(ctx, cmd)
	}
}

// The reader sends its reads in a pipeline (one per round, the streams
// to read in it).
func (h *readCounts) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			h.see(cmd)
		}
		return next(ctx, cmds)
	}
}

func (h *readCounts) see(cmd redis.Cmder) {
	args := cmd.Args()
	if len(args) > 0 && strings.EqualFold(fmt.Sprint(args[0]), "xreadgroup") {
		for i := 0; i+1 < len(args); i++ {
			if strings.EqualFold(fmt.Sprint(args[i]), "count") {
				var n int64
				fmt.Sscan(fmt.Sprint(args[i+1]), &n)
				for m := h.max.Load(); n > m && !h.max.CompareAndSwap(m, n); m = h.max.Load() {
				}
			}
		}
	}
}

// The default read-ahead follows the handlers' pace: fast handlers get
// large reads (up to 256 entries beyond the workers), slow ones never hold
// more than 4 × workers queued, so they leave the rest of the backlog to
// other consumers of the group. WithPrefetch fixes it.
func TestReadAheadFollowsHandlerPace(t *testing.T) {
	t.Parallel()
	const workers = 2
	tests := []struct {
		name     string
		n        int
		work     time.Duration // each handler call
		opts     []group.Option
		min, max int64 // bounds on the largest XREADGROUP COUNT
	}{
		{"fast handlers read far ahead", 3000, 0, nil, 100, workers + 256},
		{"slow handlers keep a short queue", 40, 20 * time.Millisecond, nil, 1, workers + 4*workers},
		{"fixed prefetch", 3000, 0, []group.Option{group.WithPrefetch(3)}, 1, workers + 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			h.startMover()
			client := redis.NewClient(redistest.Options(t, redistest.Addr(t)))
			t.Cleanup(func() { _ = client.Close() })
			counts := &readCounts{}
			client.AddHook(counts)
			var handled atomic.Int64
			c := h.consumerOn(client, "g", func(context.Context, *group.Message) error {
				if tt.work > 0 {
					// The handler's work: its pace (the time handlers
					// take) is what the read-ahead follows, a duration
					// measured, not a wait for an event.
					time.Sleep(tt.work)
				}
				handled.Add(1)
				return nil
			}, append([]group.Option{group.WithWorkers(workers)}, tt.opts...)...)
			r := start(t, c.Run)
			h.schedule(ids("r", tt.n), 0)
			waitFor(t, 30*time.Second, func() bool { return c.Counters().Acked == uint64(tt.n) })
			r.stop(t)
			assert.EqualValues(t, tt.n, handled.Load())
			got := counts.max.Load()
			t.Logf("largest XREADGROUP COUNT: %d", got)
			assert.GreaterOrEqual(t, got, tt.min)
			assert.LessOrEqual(t, got, tt.max)
		})
	}
}
