package admin

import (
	"context"

	"github.com/delaystream/delaystream"
)

// Queue returns a delaystream.Queue of queue under the Operator's
// prefix, its shard count read from the queue's record, for what an
// operator does through the queue's own API: Locate, Get, Cancel,
// Reschedule and the recurring schedules (DefineRecurring, ListRecurring,
// GetRecurring, PauseRecurring, ResumeRecurring, DeleteRecurring). It
// only serves those calls: never Run it or Handle a group on it. opts
// add to the prefix and the shard count: the parsers of the spec kinds
// the schedules use beyond "every" (delaystream.WithSpecParser,
// contrib/cron's Option), so that their Spec is filled in (a schedule of
// another kind is reported with its SpecKind and SpecText only), or the
// codec of the payloads. Without opts the Operator keeps the Queue
// between calls, so that Locate remembers the queue's groups (it then
// searches the id's shard in one call per delaystream.LocateBatch entries
// read). An unknown queue wraps delaystream.ErrNotFound.
func (in *Operator) Queue(ctx context.Context, queue string, opts ...delaystream.Option) (*delaystream.Queue, error) {
	info, err := in.queue(ctx, queue)
	if err != nil {
		return nil, err
	}
	if len(opts) > 0 {
		all := append([]delaystream.Option{delaystream.WithPrefix(in.prefix), delaystream.WithShards(info.Shards),
			delaystream.WithoutPromotion()}, opts...)
		q, err := delaystream.New(in.rdb, queue, all...)
		if err != nil {
			return nil, invalid(err)
		}
		return q, nil
	}
	return in.locator(queue, info.Shards)
}

// maxLocators bounds the Queues the Operator keeps (Queue without
// options).
const maxLocators = 256

type locatorKey struct {
	queue  string
	shards int
}

// locator returns the Queue of queue of shards shards, kept between
// calls so that it remembers the queue's groups.
func (in *Operator) locator(queue string, shards int) (*delaystream.Queue, error) {
	k := locatorKey{queue, shards}
	in.mu.Lock()
	defer in.mu.Unlock()
	if q, ok := in.locators[k]; ok {
		return q, nil
	}
	// New checks the names and talks to no server.
	q, err := delaystream.New(in.rdb, queue, delaystream.WithPrefix(in.prefix), delaystream.WithShards(shards),
		delaystream.WithoutPromotion())
	if err != nil {
		return nil, invalid(err)
	}
	if len(in.locators) >= maxLocators {
		clear(in.locators)
	}
	in.locators[k] = q
	return q, nil
}
