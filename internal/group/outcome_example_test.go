package group_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream/internal/group"
	"github.com/delaystream/delaystream/internal/stream"
)

// Compile-only: needs a Redis server, so no Output line. OnDelivered and
// OnHandled give everything per delivery that metrics need: delivery lag,
// promotion lag (by the Redis clock: the entry id's time minus the due
// time), and the handler's run time by outcome.
func ExampleHooks() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()

	hooks := group.Hooks{
		OnDelivered: func(m *group.Message) {
			if m.Deliveries == 1 {
				slog.Info("promoted", "id", m.ID, "lag", stream.EntryTime(m.EntryID).Sub(m.Due))
			}
			slog.Info("delivered", "id", m.ID, "lag", time.Since(m.Due))
		},
		OnHandled: func(m *group.Message, o group.Outcome, took time.Duration) {
			slog.Info("handled", "id", m.ID, "outcome", o.String(), "took", took)
		},
	}
	c, err := group.New(rdb, "orders", "billing", func(ctx context.Context, m *group.Message) error {
		return nil
	}, group.WithHooks(hooks))
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = c.Run(context.Background())
}

// Outcomes print as metric label values.
func ExampleOutcome_String() {
	for _, o := range []group.Outcome{group.OutcomeAcked, group.OutcomeRetried, group.OutcomeDeadLettered,
		group.OutcomeDropped, group.OutcomeReclaimed, group.OutcomeHandedBack, group.OutcomeUnsettled} {
		fmt.Println(o)
	}
	// Output:
	// acked
	// retried
	// dead_lettered
	// dropped
	// reclaimed
	// handed_back
	// unsettled
}
