package admin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/internal/stream"
)

// DeleteQueueResult reports what [Operator.DeleteQueue] did, or would
// do.
type DeleteQueueResult struct {
	Queue  string   `json:"queue"`
	DryRun bool     `json:"dry_run"`
	Keys   int      `json:"keys"`   // keys of the queue found (deleted unless a dry run)
	Groups []string `json:"groups"` // its consumer groups
	// InUse says who uses the queue: live consumers ("group/consumer")
	// and promoting processes ("mover"); empty when nothing was found.
	InUse []string `json:"in_use,omitempty"`
}

// DeleteQueue deletes queue with everything in it: waiting messages,
// streams, consumer groups with their retry lanes and dead letters,
// quarantine, its record. It is refused, with an error wrapping
// delaystream.ErrRunning and nothing deleted, while the queue is in use
// (a live consumer of any group, see [ConsumerInfo].Live, or a process
// holding a promotion lease or registered as a mover) unless opts.Force.
// It takes Force and DryRun of opts, and refuses any other field.
// The keys are found with SCAN on the node of each shard's slot (SCAN
// MATCH on the shard's hash tag) and deleted one by one, so a queue being
// written meanwhile may keep keys created after the scan.
func (in *Operator) DeleteQueue(ctx context.Context, queue string, opts ActionOptions) (DeleteQueueResult, error) {
	res := DeleteQueueResult{Queue: queue, DryRun: opts.DryRun, Groups: []string{}}
	if err := opts.only("DeleteQueue", "force", "dry"); err != nil {
		return res, err
	}
	h, err := in.open(ctx, queue)
	if err != nil {
		return res, err
	}
	if res.Groups, err = in.groupNames(ctx, h); err != nil {
		return res, err
	}
	if res.InUse, err = in.inUse(ctx, h, res.Groups); err != nil {
		return res, err
	}
	keys, err := in.queueKeys(ctx, h)
	if err != nil {
		return res, err
	}
	res.Keys = len(keys)
	if len(res.InUse) > 0 && !opts.Force && !opts.DryRun {
		return res, fmt.Errorf("queue %s is in use (%s): stop its processes first, or force: %w",
			queue, strings.Join(res.InUse, ", "), delaystream.ErrRunning)
	}
	if opts.DryRun {
		return res, nil
	}
	for _, k := range keys {
		if err := in.rdb.Del(ctx, k).Err(); err != nil {
			return res, fmt.Errorf("delete queue %s: %w", queue, err)
		}
	}
	return res, nil
}

// inUse returns the live consumers of every group ("group/consumer") and
// "mover" when a process promotes the queue.
func (in *Operator) inUse(ctx context.Context, h *handle, groups []string) ([]string, error) {
	var out []string
	for _, g := range groups {
		if live, known := in.present(ctx, h, g); known {
			for name := range live {
				out = append(out, g+"/"+name)
			}
			continue
		}
		cs, err := in.consumers(ctx, h, g)
		if err != nil {
			return nil, err
		}
		for _, c := range cs {
			if c.Live {
				out = append(out, g+"/"+c.Name)
			}
		}
	}
	slices.Sort(out)
	promoting, err := in.promoting(ctx, h, groups)
	if err != nil {
		return nil, err
	}
	if promoting {
		out = append(out, "mover")
	}
	return out, nil
}

// promoting reports whether a process promotes h: it is subscribed to
// the wake-ups of h's lanes (an idle mover holds no lease), holds a lease
// of one of its lanes, or has a live registration as its mover.
func (in *Operator) promoting(ctx context.Context, h *handle, groups []string) (bool, error) {
	now, err := in.rdb.Time(ctx).Result()
	if err != nil {
		return false, err
	}
	n, err := in.rdb.ZCount(ctx, h.layout.Movers(), strconv.FormatInt(now.UnixMilli(), 10), "+inf").Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return false, fmt.Errorf("movers of %s: %w", h.info.Name, err)
	}
	if n > 0 {
		return true, nil
	}
	if n, err := in.wakeSubscribers(ctx, h); err == nil && n > 0 {
		return true, nil // a mover waits for wake-ups
	}
	for i := range h.layout.Shards() {
		k := h.layout.Shard(i)
		leases := []string{k.Main().Lease}
		for _, g := range groups {
			leases = append(leases, k.Retry(g).Lease)
		}
		for _, l := range leases {
			n, err := in.rdb.Exists(ctx, l).Result()
			if err != nil {
				return false, fmt.Errorf("leases of %s: %w", h.info.Name, err)
			}
			if n > 0 {
				return true, nil
			}
		}
	}
	return false, nil
}

// queueKeys returns every key of h: those under each shard's hash tag and
// under the queue's own (its record and registry).
func (in *Operator) queueKeys(ctx context.Context, h *handle) ([]string, error) {
	bases := []string{strings.TrimSuffix(h.layout.Meta(), ":q")}
	for i := range h.layout.Shards() {
		bases = append(bases, strings.TrimSuffix(h.layout.Shard(i).Main().Delayed, ":z"))
	}
	slices.Sort(bases)
	bases = slices.Compact(bases)
	var (
		mu  sync.Mutex
		out []string
	)
	for _, b := range bases {
		err := in.scanSlot(ctx, b+":q", func(ctx context.Context, c *redis.Client) error {
			it := c.Scan(ctx, 0, stream.EscapeGlob(b)+":*", 1000).Iterator()
			for it.Next(ctx) {
				mu.Lock()
				out = append(out, it.Val())
				mu.Unlock()
			}
			return it.Err()
		})
		if err != nil {
			return nil, fmt.Errorf("keys of %s: %w", h.info.Name, err)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// scanSlot runs fn on the server that holds key's slot (a Cluster's
// master, any other client's server).
func (in *Operator) scanSlot(ctx context.Context, key string, fn func(context.Context, *redis.Client) error) error {
	switch c := in.rdb.(type) {
	case *redis.ClusterClient:
		node, err := c.MasterForKey(ctx, key)
		if err != nil {
			return err
		}
		return fn(ctx, node)
	case *redis.Client:
		return fn(ctx, c)
	}
	return fmt.Errorf("%w: deleting a queue needs a *redis.Client or *redis.ClusterClient, not %T", delaystream.ErrInvalidOption, in.rdb)
}

// wakeSubscribers counts the subscribers of the wake-up channels of h's
// main lanes: the movers waiting for wake-ups (shard channels on a sharded
// queue, a classic channel on an unsharded one, on every master).
func (in *Operator) wakeSubscribers(ctx context.Context, h *handle) (int64, error) {
	var total int64
	for i := range h.layout.Shards() {
		wake := h.layout.Shard(i).Main().Wake
		var counts map[string]int64
		var err error
		switch c := in.rdb.(type) {
		case *redis.ClusterClient:
			var mu sync.Mutex
			counts = map[string]int64{}
			err = c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
				var m map[string]int64
				var err error
				if h.layout.Shards() > 1 {
					m, err = n.PubSubShardNumSub(ctx, wake).Result()
				} else {
					m, err = n.PubSubNumSub(ctx, wake).Result()
				}
				mu.Lock()
				defer mu.Unlock()
				counts[wake] += m[wake]
				return err
			})
		default:
			if h.layout.Shards() > 1 {
				counts, err = in.rdb.PubSubShardNumSub(ctx, wake).Result()
			} else {
				counts, err = in.rdb.PubSubNumSub(ctx, wake).Result()
			}
		}
		if err != nil {
			return 0, err
		}
		total += counts[wake]
	}
	return total, nil
}
