package admin

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/internal/stream"
)

// lane is one quarantine stream of a queue.
type lane struct {
	name, key string
	shard     int
}

// Quarantine lists up to opts.Limit (0 means 100; it takes no other
// field but MaxPayloadBytes, see [ListOptions]) quarantined entries of
// queue, oldest first: those of its main lanes, then of the retry lanes
// of its groups.
func (in *Operator) Quarantine(ctx context.Context, queue string, opts ListOptions) ([]delaystream.Quarantined, error) {
	if err := opts.check("Quarantine", false, false, math.MaxInt); err != nil {
		return nil, err
	}
	h, err := in.open(ctx, queue)
	if err != nil {
		return nil, err
	}
	groups, err := in.groupNames(ctx, h)
	if err != nil {
		return nil, err
	}
	var lanes []lane
	for i := range h.layout.Shards() {
		lanes = append(lanes, lane{"main", h.layout.Shard(i).Main().Quarantine, i})
	}
	for _, g := range groups {
		if stream.ValidateName("group", g) != nil {
			continue // a group created outside delaystream has no retry lane
		}
		for i := range h.layout.Shards() {
			lanes = append(lanes, lane{"retry:" + g, h.layout.Shard(i).Retry(g).Quarantine, i})
		}
	}
	out := []delaystream.Quarantined{}
	limit := opts.limit()
	for _, l := range lanes {
		if len(out) >= limit {
			break
		}
		qs, err := readQuarantine(ctx, in.rdb, l.key, int64(limit-len(out)), opts.MaxPayloadBytes)
		if err != nil {
			return nil, fmt.Errorf("quarantine of %s: %w", queue, err)
		}
		for _, q := range qs {
			out = append(out, delaystream.Quarantined(q.Entry(l.shard, l.name, h.layout.Shards() > 1)))
		}
	}
	slices.SortStableFunc(out, func(a, b delaystream.Quarantined) int { return a.At.Compare(b.At) })
	return out, nil
}

// readQuarantine reads up to count entries of the quarantine stream key,
// cut to maxPayload bytes of each payload when it is above 0.
func readQuarantine(ctx context.Context, rdb redis.UniversalClient, key string, count int64, maxPayload int) ([]stream.CutQuarantined, error) {
	if maxPayload > 0 {
		return stream.ReadQuarantineCut(ctx, rdb, key, "", count, maxPayload)
	}
	qs, err := stream.ReadQuarantine(ctx, rdb, key, "", count)
	out := make([]stream.CutQuarantined, len(qs))
	for i, q := range qs {
		out[i] = q.Whole()
	}
	return out, err
}
