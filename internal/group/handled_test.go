package group_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/internal/group"
	"github.com/delaystream/delaystream/internal/stream"
)

// handledCall is one call of Hooks.OnHandled, with the hooks that ran for
// the same message before it.
type handledCall struct {
	id      string
	attempt int
	outcome group.Outcome
	took    time.Duration
	before  []string // outcome hooks of this message that ran earlier, in order
}

// handledLog records OnHandled and the outcome hooks, to check values and
// order.
type handledLog struct {
	mu    sync.Mutex
	calls []handledCall
	hooks map[string][]string // message id -> outcome hooks seen so far
	lags  []time.Duration     // promotion lag (entry time - due) at OnDelivered, first deliveries
}

func newHandledLog() *handledLog { return &handledLog{hooks: map[string][]string{}} }

func (l *handledLog) note(id, hook string) {
	l.mu.Lock()
	l.hooks[id] = append(l.hooks[id], hook)
	l.mu.Unlock()
}

func (l *handledLog) hooksFor() group.Hooks {
	return group.Hooks{
		OnDelivered: func(m *group.Message) {
			l.note(m.ID, "delivered")
			if m.Deliveries == 1 {
				l.mu.Lock()
				l.lags = append(l.lags, stream.EntryTime(m.EntryID).Sub(m.Due))
				l.mu.Unlock()
			}
		},
		OnAcked:        func(m *group.Message, _ time.Duration) { l.note(m.ID, "acked") },
		OnFailed:       func(m *group.Message, _ error, _ time.Duration) { l.note(m.ID, "failed") },
		OnDeadLettered: func(m *group.Message, _ string) { l.note(m.ID, "dead-lettered") },
		OnDropped:      func(m *group.Message, _ error) { l.note(m.ID, "dropped") },
		OnHandled: func(m *group.Message, o group.Outcome, took time.Duration) {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.calls = append(l.calls, handledCall{id: m.ID, attempt: m.Attempt, outcome: o, took: took,
				before: append([]string(nil), l.hooks[m.ID]...)})
			l.hooks[m.ID] = append(l.hooks[m.ID], "handled:"+o.String())
		},
	}
}

func (l *handledLog) get() []handledCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]handledCall(nil), l.calls...)
}

func (l *handledLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.calls)
}

// Hooks.OnHandled fires once per handler run, after the outcome's own hook,
// with the outcome and the handler's run time, for every outcome.
func TestOnHandled(t *testing.T) {
	t.Parallel()
	fast := []group.Option{
		group.WithBackoff(group.ConstantBackoff(20 * time.Millisecond)),
		group.WithReclaimInterval(20 * time.Millisecond),
	}
	const work = 30 * time.Millisecond // every handler below runs at least this long

	t.Run("acked, retried, dead-lettered, dropped", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.startMover()
		log := newHandledLog()
		c := h.consumer("g", func(_ context.Context, m *group.Message) error {
			// The handler's work, a duration OnHandled must report: the
			// thing measured, not a wait for an event.
			time.Sleep(work)
			switch {
			case m.ID == "ok":
				return nil
			case m.ID == "flaky" && m.Attempt == 1:
				return errors.New("first attempt fails")
			case m.ID == "flaky":
				return nil
			case m.ID == "doomed":
				return fmt.Errorf("attempt %d fails", m.Attempt)
			case m.ID == "poison":
				return group.DeadLetter(errors.New("never"))
			}
			return group.Drop(errors.New("stale")) // "stale"
		}, append(fast, group.WithMaxAttempts(2), group.WithHooks(log.hooksFor()))...)
		r := start(t, c.Run)
		h.schedule([]string{"ok", "flaky", "doomed", "poison", "stale"}, 0)
		// ok 1, flaky 2, doomed 2, poison 1, stale 1 handler runs.
		waitFor(t, 10*time.Second, func() bool { return log.len() >= 7 })
		r.stop(t)

		byID := map[string][]handledCall{}
		for _, call := range log.get() {
			byID[call.id] = append(byID[call.id], call)
			assert.GreaterOrEqual(t, call.took, work, "%s: the handler's run time", call.id)
			assert.Less(t, call.took, 5*time.Second, call.id)
		}
		type want struct {
			attempt int
			outcome group.Outcome
			hook    string // the outcome hook that must have run just before
		}
		for id, ws := range map[string][]want{
			"ok":     {{1, group.OutcomeAcked, "acked"}},
			"flaky":  {{1, group.OutcomeRetried, "failed"}, {2, group.OutcomeAcked, "acked"}},
			"doomed": {{1, group.OutcomeRetried, "failed"}, {2, group.OutcomeDeadLettered, "dead-lettered"}},
			"poison": {{1, group.OutcomeDeadLettered, "dead-lettered"}},
			"stale":  {{1, group.OutcomeDropped, "dropped"}},
		} {
			calls := byID[id]
			require.Len(t, calls, len(ws), id)
			for i, w := range ws {
				assert.Equal(t, w.attempt, calls[i].attempt, id)
				assert.Equal(t, w.outcome, calls[i].outcome, "%s attempt %d: %s", id, w.attempt, calls[i].outcome)
				b := calls[i].before
				require.NotEmpty(t, b, id)
				assert.Equal(t, w.hook, b[len(b)-1], "%s: OnHandled runs after the outcome hook", id)
				assert.Contains(t, b, "delivered", id)
			}
		}
		assert.Len(t, log.lags, 7, "one first delivery per handler run")
		for _, lag := range log.lags {
			assert.GreaterOrEqual(t, lag, time.Duration(0), "an entry is never appended before it is due")
			assert.Less(t, lag, 5*time.Second)
		}
	})

	t.Run("reclaimed", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.startMover()
		log := newHandledLog()
		running := make(chan string, 1)
		c := h.consumer("g", func(ctx context.Context, m *group.Message) error {
			running <- m.EntryID
			<-ctx.Done() // cancelled when the extender finds the entry taken over
			return ctx.Err()
		}, append(fast, group.WithConsumerName("a"), group.WithVisibilityTimeout(300*time.Millisecond),
			group.WithHooks(log.hooksFor()))...)
		r := start(t, c.Run)
		h.schedule([]string{"taken"}, 0)
		entry := <-running
		// Another consumer claims it (as a reclaim would) while it runs.
		require.NoError(t, h.rdb.XClaim(context.Background(), &redis.XClaimArgs{
			Stream: h.mainStream(), Group: "g", Consumer: "thief", Messages: []string{entry},
		}).Err())
		waitFor(t, 10*time.Second, func() bool { return log.len() >= 1 })
		r.stop(t)

		calls := log.get()
		require.Len(t, calls, 1)
		assert.Equal(t, group.OutcomeReclaimed, calls[0].outcome)
		assert.Equal(t, "taken", calls[0].id)
		assert.Greater(t, calls[0].took, time.Duration(0))
		assert.EqualValues(t, 1, c.Counters().OwnershipLost)
	})

	t.Run("handed back", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.startMover()
		log := newHandledLog()
		running := make(chan struct{}, 1)
		const drain = 150 * time.Millisecond
		c := h.consumer("g", func(ctx context.Context, _ *group.Message) error {
			running <- struct{}{}
			<-ctx.Done() // only the drain timeout ends it
			return ctx.Err()
		}, append(fast, group.WithDrainTimeout(drain), group.WithHooks(log.hooksFor()))...)
		r := start(t, c.Run)
		h.schedule([]string{"slow"}, 0)
		<-running
		r.stop(t)

		calls := log.get()
		require.Len(t, calls, 1)
		assert.Equal(t, group.OutcomeHandedBack, calls[0].outcome)
		assert.GreaterOrEqual(t, calls[0].took, drain, "ran until the drain timeout")
		assert.EqualValues(t, 1, c.Counters().HandedBack)
	})

	t.Run("unsettled", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.startMover()
		log := newHandledLog()
		c := h.consumer("g", func(ctx context.Context, _ *group.Message) error {
			// The retry lane's delayed set of the wrong type: the retry
			// script fails, and the entry stays pending.
			if err := h.rdb.Set(ctx, h.retryDelayed("g"), "not a zset", 0).Err(); err != nil {
				return group.Drop(err)
			}
			return errors.New("fails")
		}, append(fast, group.WithHooks(log.hooksFor()))...)
		r := start(t, c.Run)
		h.schedule([]string{"stuck"}, 0)
		waitFor(t, 10*time.Second, func() bool { return log.len() >= 1 })
		r.stop(t)

		calls := log.get()
		require.Len(t, calls, 1)
		assert.Equal(t, group.OutcomeUnsettled, calls[0].outcome)
		assert.Equal(t, []string{"delivered"}, calls[0].before, "no outcome hook: nothing was settled")
		assert.EqualValues(t, 1, h.pending(h.mainStream(), "g"), "left pending for reclaim")
		assert.Zero(t, c.Counters().Retried)
	})
}

func TestOutcomeString(t *testing.T) {
	t.Parallel()
	for o, want := range map[group.Outcome]string{
		group.OutcomeAcked: "acked", group.OutcomeRetried: "retried", group.OutcomeDeadLettered: "dead_lettered",
		group.OutcomeDropped: "dropped", group.OutcomeReclaimed: "reclaimed", group.OutcomeHandedBack: "handed_back",
		group.OutcomeUnsettled: "unsettled", 0: "unknown", 99: "unknown",
	} {
		assert.Equal(t, want, o.String())
	}
}
