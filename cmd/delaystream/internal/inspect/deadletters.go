package inspect

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/delaystream/delaystream/internal/group"
)

// DeadLetter is one entry of a group's dead letters.
type DeadLetter struct {
	// EntryID identifies the dead letter: "<ms>-<seq>", whose time is when
	// it was dead-lettered, followed by "@<shard>" on a sharded queue.
	EntryID    string            `json:"entry_id"`
	Shard      int               `json:"shard"`
	At         time.Time         `json:"at"` // when it was dead-lettered (Redis clock)
	ID         string            `json:"id"` // the message id; "" when undecodable
	Reason     string            `json:"reason"`
	LastError  string            `json:"last_error"`
	Attempt    int               `json:"attempt"`
	Deliveries int64             `json:"deliveries"`
	Source     string            `json:"source"`    // the stream it was read from
	SourceID   string            `json:"source_id"` // its entry id there
	Decoded    bool              `json:"decoded"`   // whether its envelope could be decoded (undecodable ones cannot be redriven)
	Due        time.Time         `json:"due,omitzero"`
	Created    time.Time         `json:"created,omitzero"`
	Deadline   time.Time         `json:"deadline,omitzero"`
	Headers    map[string]string `json:"headers,omitempty"`
	Size       int               `json:"size"`
	Payload    []byte            `json:"payload"` // base64 in JSON; the raw stored bytes when undecodable
	Preview    string            `json:"preview"`
}

// ListOptions pages and filters a listing.
type ListOptions struct {
	After string // start after this entry id, as returned ("" for the oldest)
	Limit int    // most entries returned; 0 means 100
	Filter
}

// Filter narrows dead letters down; the zero Filter takes every one.
type Filter struct {
	From   time.Time // dead-lettered at or after (zero: no bound)
	To     time.Time // dead-lettered before (zero: no bound)
	Reason string    // exactly this reason (group.Reason*); "" for any
}

func (f Filter) match(d DeadLetter) bool {
	return (f.From.IsZero() || !d.At.Before(f.From)) && (f.To.IsZero() || d.At.Before(f.To)) &&
		(f.Reason == "" || d.Reason == f.Reason)
}

func (f Filter) empty() bool { return f.From.IsZero() && f.To.IsZero() && f.Reason == "" }

// Selection says which dead letters an action takes: the listed IDs, or
// every one the Filter matches when All is set (an empty Filter: all).
// Exactly one of IDs and All must be given.
type Selection struct {
	IDs []string // entry ids, as listed
	All bool     // every dead letter present when the action starts that Filter matches
	Filter
}

// ActionOptions tune [Inspector.Redrive] and [Inspector.Purge].
type ActionOptions struct {
	DryRun bool          // resolve the selection, report it, write nothing
	Delay  time.Duration // Redrive: deliver again after this delay (Redis clock); default 0, at once
}

// MaxReportedIDs bounds ActionResult.IDs.
const MaxReportedIDs = 1000

// ActionResult reports what a Redrive or Purge did (or, dry, would do).
type ActionResult struct {
	Queue   string `json:"queue"`
	Group   string `json:"group"`
	Action  string `json:"action"` // "redrive" or "purge"
	DryRun  bool   `json:"dry_run"`
	Matched int    `json:"matched"` // dead letters the selection found
	Done    int    `json:"done"`    // redriven or purged (0 on a dry run)
	// IDs are the entry ids matched (at most MaxReportedIDs; see
	// IDsTruncated).
	IDs          []string `json:"ids"`
	IDsTruncated bool     `json:"ids_truncated,omitempty"`
	// NotFound are requested ids that are no dead letters (any more).
	NotFound []string `json:"not_found,omitempty"`
	// Unrecoverable are dead letters Redrive left in place: no valid
	// envelope to deliver again (purge them instead).
	Unrecoverable []string `json:"unrecoverable,omitempty"`
}

// deadLetters returns the dead-letter handle of group on queue, and fails
// with ErrNotFound when the queue has no such group and the group has no
// dead letters.
func (in *Inspector) deadLetters(ctx context.Context, queue, g string) (*group.DeadLetters, error) {
	h, err := in.open(ctx, queue)
	if err != nil {
		return nil, err
	}
	dl, err := group.NewDeadLetters(in.rdb, queue, g, in.groupOpts(h)...)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
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
			return nil, fmt.Errorf("group %s of queue %s: %w", g, queue, ErrNotFound)
		}
	}
	return dl, nil
}

// DeadLetters lists the dead letters of group on queue, oldest first,
// that opts' Filter matches, up to opts.Limit after opts.After. It returns
// an error wrapping [ErrNotFound] when the queue has no such group.
func (in *Inspector) DeadLetters(ctx context.Context, queue, g string, opts ListOptions) ([]DeadLetter, error) {
	dl, err := in.deadLetters(ctx, queue, g)
	if err != nil {
		return nil, err
	}
	limit := opts.Limit
	if limit == 0 {
		limit = 100
	}
	if limit < 0 {
		return nil, fmt.Errorf("%w: negative limit %d", ErrInvalid, limit)
	}
	out := []DeadLetter{}
	err = eachDeadLetter(ctx, dl, opts.After, func(d DeadLetter) bool {
		if opts.Filter.match(d) {
			out = append(out, d)
		}
		return len(out) < limit
	})
	return out, err
}

// DeadLetter returns one dead letter of group on queue, or an error
// wrapping [ErrNotFound].
func (in *Inspector) DeadLetter(ctx context.Context, queue, g, entryID string) (DeadLetter, error) {
	dl, err := in.deadLetters(ctx, queue, g)
	if err != nil {
		return DeadLetter{}, err
	}
	e, err := dl.Get(ctx, entryID)
	if err != nil {
		return DeadLetter{}, mapGroupErr(err)
	}
	return fromDeadEntry(e), nil
}

// DeadLetterCount returns how many dead letters group of queue has.
func (in *Inspector) DeadLetterCount(ctx context.Context, queue, g string) (int64, error) {
	dl, err := in.deadLetters(ctx, queue, g)
	if err != nil {
		return 0, err
	}
	return dl.Len(ctx)
}

// Redrive moves the selected dead letters of group on queue back to that
// group only (group.DeadLetters.Redrive: delivered again after
// opts.Delay, attempt count reset, atomically per entry). With
// opts.DryRun it writes nothing and reports what it would move. Requested
// ids that are no dead letters are reported in NotFound, and entries
// without a valid envelope in Unrecoverable; neither is an error.
func (in *Inspector) Redrive(ctx context.Context, queue, g string, sel Selection, opts ActionOptions) (ActionResult, error) {
	if opts.Delay < 0 {
		return ActionResult{}, fmt.Errorf("%w: negative delay %s", ErrInvalid, opts.Delay)
	}
	return in.act(ctx, queue, g, "redrive", sel, opts, func(dl *group.DeadLetters, ids []string, res *ActionResult) error {
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

// Purge deletes the selected dead letters of group on queue for good.
// With opts.DryRun it writes nothing and reports what it would delete.
func (in *Inspector) Purge(ctx context.Context, queue, g string, sel Selection, opts ActionOptions) (ActionResult, error) {
	return in.act(ctx, queue, g, "purge", sel, opts, func(dl *group.DeadLetters, ids []string, res *ActionResult) error {
		n, err := dl.Purge(ctx, ids...)
		res.Done += int(n)
		return err
	})
}

// actChunk is how many dead letters one Redrive or Purge call of the core
// takes.
const actChunk = 200

func (in *Inspector) act(ctx context.Context, queue, g, action string, sel Selection, opts ActionOptions,
	do func(dl *group.DeadLetters, ids []string, res *ActionResult) error) (ActionResult, error) {
	if sel.All == (len(sel.IDs) > 0) {
		return ActionResult{}, fmt.Errorf("%w: select dead letters by id or all of them (with a filter), not both or neither", ErrInvalid)
	}
	if !sel.All && !sel.Filter.empty() {
		return ActionResult{}, fmt.Errorf("%w: a filter (time range, reason) selects with All only", ErrInvalid)
	}
	dl, err := in.deadLetters(ctx, queue, g)
	if err != nil {
		return ActionResult{}, err
	}
	res := ActionResult{Queue: queue, Group: g, Action: action, DryRun: opts.DryRun, IDs: []string{}}
	var ids []string
	if sel.All {
		err = eachDeadLetter(ctx, dl, "", func(d DeadLetter) bool {
			if sel.Filter.match(d) {
				ids = append(ids, d.EntryID)
			}
			return true
		})
		if err != nil {
			return ActionResult{}, err
		}
	} else {
		for _, id := range sel.IDs {
			_, err := dl.Get(ctx, id)
			switch {
			case errors.Is(err, group.ErrNotFound):
				res.NotFound = append(res.NotFound, id)
			case err != nil:
				return ActionResult{}, mapGroupErr(err)
			default:
				ids = append(ids, id)
			}
		}
	}
	res.Matched = len(ids)
	res.IDs = append(res.IDs, ids[:min(len(ids), MaxReportedIDs)]...)
	res.IDsTruncated = len(ids) > MaxReportedIDs
	if opts.DryRun {
		return res, nil
	}
	for chunk := range slices.Chunk(ids, actChunk) {
		if err := do(dl, chunk, &res); err != nil {
			return res, fmt.Errorf("%s %s/%s: %w", action, queue, g, mapGroupErr(err))
		}
	}
	return res, nil
}

// eachDeadLetter calls fn with the dead letters after entry id after,
// oldest first, until fn returns false or none is left.
func eachDeadLetter(ctx context.Context, dl *group.DeadLetters, after string, fn func(DeadLetter) bool) error {
	for {
		page, err := dl.List(ctx, after, 500)
		if err != nil {
			return mapGroupErr(err)
		}
		for _, e := range page {
			if !fn(fromDeadEntry(e)) {
				return nil
			}
		}
		if len(page) < 500 {
			return nil
		}
		after = page[len(page)-1].EntryID
	}
}

func mapGroupErr(err error) error {
	switch {
	case errors.Is(err, group.ErrNotFound):
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	case errors.Is(err, group.ErrInvalidOption):
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return err
}

func fromDeadEntry(e group.DeadEntry) DeadLetter {
	d := DeadLetter{EntryID: e.EntryID, Shard: e.Shard, At: e.At(), ID: e.Envelope.ID, Reason: e.Reason,
		LastError: e.LastError, Attempt: e.Attempt, Deliveries: e.Deliveries, Source: e.Source,
		SourceID: e.SourceID, Decoded: e.Decoded}
	payload := e.Envelope.Payload
	if e.Decoded {
		d.Due, d.Created, d.Deadline, d.Headers = e.Envelope.Due, e.Envelope.Created, e.Envelope.Deadline, e.Envelope.Headers
	} else {
		payload = e.Raw
	}
	d.Size, d.Payload, d.Preview = len(payload), payload, Preview(payload, PreviewLen)
	return d
}
