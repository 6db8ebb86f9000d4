package group

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream/stream"
)

// opTimeout bounds one Redis call made for a message outcome, so a hung
// connection cannot stall a worker for ever.
const opTimeout = 5 * time.Second

// core is the part of a Consumer its roles share: where it reads, its
// settings, its counters and the entries it holds. New fills it in; it
// lives as long as the Consumer.
type core struct {
	rdb   redis.UniversalClient
	queue string
	group string
	keys  stream.Keys
	main  stream.Lane
	retry stream.Lane
	dead  string
	h     Handler
	cfg   config
	ctr   counters
	held  holdings
}

// ensureGroups creates the group on the queue stream and its retry lane.
func (c *core) ensureGroups(ctx context.Context) error {
	start := "0"
	if c.cfg.fromNew {
		start = "$"
	}
	for _, s := range []struct{ key, start string }{{c.main.Stream, start}, {c.retry.Stream, "0"}} {
		err := c.rdb.XGroupCreateMkStream(ctx, s.key, c.group, s.start).Err()
		if err != nil && !redis.HasErrorPrefix(err, "BUSYGROUP") {
			return fmt.Errorf("create group %s on %s: %w", c.group, s.key, err)
		}
	}
	return nil
}

// runState is what one Run shares between its roles (reader, reclaimer,
// workers, settler, acker, extender, trimmer); each role keeps its own
// state in its own type.
type runState struct {
	c        *core
	log      *slog.Logger
	workCtx  context.Context // handlers' parent: cancelled only by the drain timeout
	opCtx    context.Context // for recording outcomes: never cancelled (each call has its own timeout)
	handlers sync.WaitGroup  // the workers; extension goes on until they are done
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
