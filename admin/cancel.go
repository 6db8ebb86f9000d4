package admin

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/internal/stream"
)

// CancelOptions selects the waiting messages of [Inspector.CancelMany]:
// the ids given, and every waiting message whose id starts with IDPrefix.
type CancelOptions struct {
	IDs      []string
	IDPrefix string // messages with their own ids only: generated ids have no prefix of the caller's
	DryRun   bool   // find them, cancel nothing
}

// CancelResult reports what [Inspector.CancelMany] did, or would do.
type CancelResult struct {
	Queue   string `json:"queue"`
	DryRun  bool   `json:"dry_run"`
	Matched int    `json:"matched"` // waiting messages selected
	Done    int    `json:"done"`    // cancelled (0 on a dry run)
	// IDs are the ids matched (at most MaxReportedIDs; see IDsTruncated).
	IDs          []string `json:"ids"`
	IDsTruncated bool     `json:"ids_truncated,omitempty"`
	// NotWaiting are requested ids that were not waiting (already due,
	// cancelled, or unknown), and prefix matches that stopped waiting
	// before they were cancelled.
	NotWaiting []string `json:"not_waiting,omitempty"`
}

// CancelMany cancels the waiting messages of queue that opts selects: the
// ids given, and those whose id starts with opts.IDPrefix (found with
// HSCAN over each shard's envelopes: messages with their own ids). At
// least one of the two is required, else the error wraps
// delaystream.ErrInvalidOption, as does an invalid id; nothing is written
// then, nor on a dry run.
func (in *Inspector) CancelMany(ctx context.Context, queue string, opts CancelOptions) (CancelResult, error) {
	res := CancelResult{Queue: queue, DryRun: opts.DryRun, IDs: []string{}}
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
		if opts.DryRun {
			if _, err := h.producer.Get(ctx, id); err != nil {
				if !errorsIsNotFound(err) {
					return res, invalidMessage(err)
				}
				res.NotWaiting = append(res.NotWaiting, id)
				continue
			}
		} else {
			ok, err := h.producer.Cancel(ctx, id)
			if err != nil {
				return res, invalidMessage(err)
			}
			if !ok {
				res.NotWaiting = append(res.NotWaiting, id)
				continue
			}
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

// idsWithPrefix returns the ids of the waiting messages of h with their
// own ids that start with prefix, shard by shard.
func (in *Inspector) idsWithPrefix(ctx context.Context, h *handle, prefix string) ([]string, error) {
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

func errorsIsNotFound(err error) bool { return errors.Is(err, delaystream.ErrNotFound) }
