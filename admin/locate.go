package admin

import (
	"context"
	"fmt"

	"github.com/delaystream/delaystream"
)

// Locate returns every place of message id in queue (see
// delaystream.Queue.Locate): waiting, ready or pending in a group,
// retrying, dead-lettered or quarantined. It reads the queue's shard count
// from its record, then searches the id's shard only: one call per
// delaystream.LocateBatch entries read (one call on a shard holding fewer)
// once the Inspector knows the queue's groups (it remembers them between
// calls, like a Queue). An unknown queue wraps delaystream.ErrNotFound; a
// message found nowhere is not an error (Location.Found is false).
func (in *Inspector) Locate(ctx context.Context, queue, id string) (delaystream.Location, error) {
	info, err := in.queue(ctx, queue)
	if err != nil {
		return delaystream.Location{}, err
	}
	q, err := in.locator(queue, info.Shards)
	if err != nil {
		return delaystream.Location{}, err
	}
	return q.Locate(ctx, id)
}

// maxLocators bounds the Queues the Inspector keeps for Locate.
const maxLocators = 256

type locatorKey struct {
	queue  string
	shards int
}

// locator returns the Queue that locates messages in queue of shards
// shards, kept between calls so that it remembers the queue's groups.
func (in *Inspector) locator(queue string, shards int) (*delaystream.Queue, error) {
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

// DeadLetterIDs returns the entry ids of the dead letters of message id in
// group of queue (found with [Inspector.Locate]), for the dead-letter
// calls that take entry ids. None found wraps delaystream.ErrNotFound.
func (in *Inspector) DeadLetterIDs(ctx context.Context, queue, group, id string) ([]string, error) {
	loc, err := in.Locate(ctx, queue, id)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range loc.Groups {
		if p.Group == group && p.Place == delaystream.PlaceDeadLettered {
			out = append(out, p.EntryID)
		}
	}
	if len(out) == 0 {
		partial := ""
		if loc.Partial {
			partial = fmt.Sprintf(" within the first %d entries", delaystream.LocateScanLimit)
		}
		return nil, fmt.Errorf("no dead letter of message %s in group %s of queue %s%s: %w", id, group, queue, partial, delaystream.ErrNotFound)
	}
	return out, nil
}
