package admin

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/internal/stream"
)

// Cancel cancels the waiting messages of queue that opts selects: the
// ids opts.IDs gives, and those whose id starts with opts.IDPrefix (found
// with HSCAN over each shard's envelopes: messages with their own ids).
// At least one of the two is required, else the error wraps
// delaystream.ErrInvalidOption, as does an invalid id or a field Cancel
// does not take (it takes IDs, IDPrefix and DryRun); nothing is written
// then, nor on a dry run. Requested ids that are not waiting (already
// due, cancelled, or unknown), and prefix matches that stopped waiting
// before they were cancelled, are reported in NotFound, which is not an
// error.
func (in *Operator) Cancel(ctx context.Context, queue string, opts ActionOptions) (ActionResult, error) {
	res := ActionResult{Queue: queue, Action: "cancel", DryRun: opts.DryRun, IDs: []string{}}
	if err := opts.only("Cancel", "ids", "prefix", "dry"); err != nil {
		return res, err
	}
	if len(opts.IDs) == 0 && opts.IDPrefix == "" {
		return res, fmt.Errorf("%w: cancel: give ids or an id prefix", delaystream.ErrInvalidOption)
	}
	h, err := in.open(ctx, queue)
	if err != nil {
		return res, err
	}
	ids := opts.IDs
	if opts.IDPrefix != "" {
		found, err := in.idsWithPrefix(ctx, h, opts.IDPrefix)
		if err != nil {
			return res, err
		}
		ids = append(ids, found...)
	}
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		waiting, err := cancelOne(ctx, h, id, opts.DryRun)
		if err != nil {
			return res, err
		}
		if !waiting {
			res.NotFound = append(res.NotFound, id)
			continue
		}
		if !opts.DryRun {
			res.Done++
		}
		res.Matched++
		if len(res.IDs) < MaxReportedIDs {
			res.IDs = append(res.IDs, id)
		} else {
			res.IDsTruncated = true
		}
	}
	return res, nil
}

// cancelOne cancels the waiting message id of h (dry: only looks for it)
// and reports whether it was waiting.
func cancelOne(ctx context.Context, h *handle, id string, dry bool) (bool, error) {
	if dry {
		if _, err := h.producer.Get(ctx, id); err != nil {
			if !errors.Is(err, delaystream.ErrNotFound) {
				return false, invalidMessage(err)
			}
			return false, nil
		}
		return true, nil
	}
	ok, err := h.producer.Cancel(ctx, id)
	if err != nil {
		return false, invalidMessage(err)
	}
	return ok, nil
}

// idsWithPrefix returns the ids of the waiting messages of h with their
// own ids that start with prefix, shard by shard.
func (in *Operator) idsWithPrefix(ctx context.Context, h *handle, prefix string) ([]string, error) {
	pattern := stream.EscapeGlob(prefix) + "*"
	var out []string
	for i := range h.layout.Shards() {
		it := in.rdb.HScan(ctx, h.layout.Shard(i).Main().Envelopes, 0, pattern, 1000).Iterator()
		for n := 0; it.Next(ctx); n++ {
			if n%2 == 0 { // field, value, field, value...
				out = append(out, it.Val())
			}
		}
		if err := it.Err(); err != nil {
			return nil, fmt.Errorf("cancel: ids with prefix %q: %w", prefix, err)
		}
	}
	slices.Sort(out)
	return out, nil
}
