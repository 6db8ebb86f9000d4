package admin

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/internal/group"
)

// ActionResult reports what an action did (or, dry, would do): Redrive
// or Purge of dead letters, Cancel of waiting messages, DeleteQuarantined
// or RestoreQuarantined of quarantined entries.
type ActionResult struct {
	Queue  string `json:"queue"`
	Group  string `json:"group,omitempty"` // Redrive, Purge: the group whose dead letters
	Action string `json:"action"`          // "redrive", "purge", "cancel", "delete" or "restore"
	DryRun bool   `json:"dry_run"`
	// Matched is how many entries the selection found (Redrive, Purge,
	// Cancel).
	Matched int `json:"matched"`
	Done    int `json:"done"` // redriven, purged, cancelled, deleted or restored (0 on a dry run)
	// IDs are the ids matched (at most MaxReportedIDs; see IDsTruncated):
	// entry ids, or message ids for Cancel.
	IDs          []string `json:"ids,omitempty"`
	IDsTruncated bool     `json:"ids_truncated,omitempty"`
	// NotFound are requested ids that name nothing to act on (any more):
	// no such dead letter or quarantined entry, or a message not waiting
	// (already due, cancelled or unknown; or, found by prefix, no longer
	// waiting when it was to be cancelled).
	NotFound []string `json:"not_found,omitempty"`
	// Unrecoverable are entries Redrive or RestoreQuarantined left in
	// place: no valid envelope (or no message id) to deliver again;
	// purge or delete them instead.
	Unrecoverable []string `json:"unrecoverable,omitempty"`
}

// DeadLetters lists the dead letters of group g on queue, oldest first
// (newest first with opts.Newest):
// those opts.IDs names, or up to opts.Limit (0 means 100) after opts.After
// that opts.From, opts.To and opts.Reason match, with opts.MaxPayloadBytes
// of each payload at most (see [ListOptions]). It returns an error
// wrapping delaystream.ErrNotFound when the queue has no such group (and
// the group no dead letters), or an id names no dead letter.
func (in *Operator) DeadLetters(ctx context.Context, queue, g string, opts ListOptions) ([]delaystream.DeadLetterEntry, error) {
	if err := opts.check("DeadLetters", true, true, math.MaxInt); err != nil {
		return nil, err
	}
	dl, err := in.deadLetters(ctx, queue, g)
	if err != nil {
		return nil, err
	}
	out := []delaystream.DeadLetterEntry{}
	for _, id := range opts.IDs {
		e, err := dl.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		out = append(out, fromDeadEntry(e))
	}
	if len(opts.IDs) > 0 {
		return out, nil
	}
	f, limit := opts.filter(), opts.limit()
	each := func(ctx context.Context, dl *group.DeadLetters, after string, fn func(delaystream.DeadLetterEntry) bool) error {
		return eachDeadLetter(ctx, dl, after, opts.Newest, fn)
	}
	if opts.MaxPayloadBytes > 0 {
		each = func(ctx context.Context, dl *group.DeadLetters, after string, fn func(delaystream.DeadLetterEntry) bool) error {
			return eachCutDeadLetter(ctx, dl, after, opts.MaxPayloadBytes, opts.Newest, fn)
		}
	}
	err = each(ctx, dl, opts.After, func(d delaystream.DeadLetterEntry) bool {
		if f.match(d) {
			out = append(out, d)
		}
		return len(out) < limit
	})
	return out, err
}

// Redrive moves the dead letters of group g on queue that opts selects
// (IDs, or All narrowed by From, To and Reason) back to that group only:
// delivered again after opts.Delay by the Redis clock, attempt count
// reset, atomically per entry. With opts.DryRun it writes nothing and
// reports what it would move. Requested ids that are no dead letters are
// reported in NotFound, and entries without a valid envelope in
// Unrecoverable; neither is an error.
func (in *Operator) Redrive(ctx context.Context, queue, g string, opts ActionOptions) (ActionResult, error) {
	if opts.Delay < 0 {
		return ActionResult{}, fmt.Errorf("%w: negative delay %s", delaystream.ErrInvalidOption, opts.Delay)
	}
	return in.act(ctx, queue, g, "redrive", opts, func(dl *group.DeadLetters, ids []string, res *ActionResult) error {
		n, err := dl.Redrive(ctx, opts.Delay, ids...)
		res.Done += n
		var re *group.RedriveError
		if errors.As(err, &re) {
			res.NotFound = append(res.NotFound, re.NotFound...)
			res.Unrecoverable = append(res.Unrecoverable, re.Unrecoverable...)
			return nil
		}
		return err
	})
}

// Purge deletes the dead letters of group g on queue that opts selects
// (IDs, or All narrowed by From, To and Reason) for good. With
// opts.DryRun it writes nothing and reports what it would delete.
// Requested ids that are no dead letters are reported in NotFound, which
// is not an error. It takes no Delay.
func (in *Operator) Purge(ctx context.Context, queue, g string, opts ActionOptions) (ActionResult, error) {
	if opts.Delay != 0 {
		return ActionResult{}, fmt.Errorf("%w: Purge takes no delay", delaystream.ErrInvalidOption)
	}
	return in.act(ctx, queue, g, "purge", opts, func(dl *group.DeadLetters, ids []string, res *ActionResult) error {
		n, err := dl.Purge(ctx, ids...)
		res.Done += int(n)
		return err
	})
}

// deadLetters returns the dead-letter handle of group g on queue, and
// fails with ErrNotFound when the queue has no such group and the group
// has no dead letters.
func (in *Operator) deadLetters(ctx context.Context, queue, g string) (*group.DeadLetters, error) {
	h, err := in.open(ctx, queue)
	if err != nil {
		return nil, err
	}
	dl, err := group.NewDeadLetters(in.rdb, queue, g, in.groupOpts(h)...)
	if err != nil {
		return nil, invalid(err)
	}
	names, err := in.groupNames(ctx, h)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(names, g) {
		n, err := dl.Len(ctx)
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, fmt.Errorf("group %s of queue %s: %w", g, queue, delaystream.ErrNotFound)
		}
	}
	return dl, nil
}

// actChunk is how many dead letters one Redrive or Purge call of the core
// takes.
const actChunk = 200

// act resolves the selection of opts and, unless dry, calls do with it
// chunk by chunk.
func (in *Operator) act(ctx context.Context, queue, g, action string, opts ActionOptions,
	do func(dl *group.DeadLetters, ids []string, res *ActionResult) error) (ActionResult, error) {
	if err := opts.checkSelection(action); err != nil {
		return ActionResult{}, err
	}
	dl, err := in.deadLetters(ctx, queue, g)
	if err != nil {
		return ActionResult{}, err
	}
	res := ActionResult{Queue: queue, Group: g, Action: action, DryRun: opts.DryRun, IDs: []string{}}
	ids, err := selectDeadLetters(ctx, dl, opts, &res)
	if err != nil {
		return ActionResult{}, err
	}
	res.Matched = len(ids)
	res.IDs = append(res.IDs, ids[:min(len(ids), MaxReportedIDs)]...)
	res.IDsTruncated = len(ids) > MaxReportedIDs
	if opts.DryRun {
		return res, nil
	}
	for chunk := range slices.Chunk(ids, actChunk) {
		if err := do(dl, chunk, &res); err != nil {
			return res, fmt.Errorf("%s %s/%s: %w", action, queue, g, err)
		}
	}
	return res, nil
}

// checkSelection refuses a selection of dead letters that is not IDs
// alone or All with a filter, and a field of another action.
func (o ActionOptions) checkSelection(action string) error {
	if err := o.only(action, "ids", "all", "filter", "dry", "delay"); err != nil {
		return err
	}
	switch {
	case o.All == (len(o.IDs) > 0):
		return fmt.Errorf("%w: select dead letters by id or all of them (with a filter), not both or neither",
			delaystream.ErrInvalidOption)
	case !o.All && !o.filter().empty():
		return fmt.Errorf("%w: a filter (time range, reason) selects with All only", delaystream.ErrInvalidOption)
	}
	return o.filter().check()
}

// selectDeadLetters returns the entry ids opts selects from dl, and adds
// the requested ids that are no dead letters to res.NotFound.
func selectDeadLetters(ctx context.Context, dl *group.DeadLetters, opts ActionOptions, res *ActionResult) ([]string, error) {
	var ids []string
	if opts.All {
		f := opts.filter()
		err := eachDeadLetter(ctx, dl, "", false, func(d delaystream.DeadLetterEntry) bool {
			if f.match(d) {
				ids = append(ids, d.EntryID)
			}
			return true
		})
		return ids, err
	}
	for _, id := range opts.IDs {
		_, err := dl.Get(ctx, id)
		switch {
		case errors.Is(err, delaystream.ErrNotFound):
			res.NotFound = append(res.NotFound, id)
		case err != nil:
			return nil, err
		default:
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// deadPage is how many dead letters one read of a listing takes.
const deadPage = 500

// eachDeadLetter calls fn with the dead letters after entry id after,
// oldest first (newest first when newest), until fn returns false or none
// is left.
func eachDeadLetter(ctx context.Context, dl *group.DeadLetters, after string, newest bool, fn func(delaystream.DeadLetterEntry) bool) error {
	list := dl.List
	if newest {
		list = dl.ListNewest
	}
	for {
		page, err := list(ctx, after, deadPage)
		if err != nil {
			return err
		}
		for _, e := range page {
			if !fn(fromDeadEntry(e)) {
				return nil
			}
		}
		if len(page) < deadPage {
			return nil
		}
		after = page[len(page)-1].EntryID
	}
}

// eachCutDeadLetter is eachDeadLetter reading at most maxPayload bytes of
// each payload (group.DeadLetters.ListCut).
func eachCutDeadLetter(ctx context.Context, dl *group.DeadLetters, after string, maxPayload int, newest bool, fn func(delaystream.DeadLetterEntry) bool) error {
	for {
		page, err := dl.ListCut(ctx, after, deadPage, maxPayload, newest)
		if err != nil {
			return err
		}
		for _, e := range page {
			d := fromDeadEntry(e.DeadEntry)
			d.Size = e.PayloadSize()
			if !fn(d) {
				return nil
			}
		}
		if len(page) < deadPage {
			return nil
		}
		after = page[len(page)-1].EntryID
	}
}

func fromDeadEntry(e group.DeadEntry) delaystream.DeadLetterEntry {
	return delaystream.DeadLetterEntry(e.Letter())
}
