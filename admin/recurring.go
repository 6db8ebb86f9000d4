package admin

import (
	"context"
	"fmt"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/internal/recur"
)

// Recurring returns the recurring schedules of queue, by id, with their
// next and last occurrences. opts register spec kinds
// (delaystream.WithSpecParser, contrib/cron's Option) so that each
// schedule's Spec is filled in; a schedule of another kind is reported
// with its SpecKind and SpecText only.
func (in *Inspector) Recurring(ctx context.Context, queue string, opts ...delaystream.Option) ([]delaystream.RecurringStatus, error) {
	q, err := in.queueOf(ctx, queue, opts)
	if err != nil {
		return nil, err
	}
	return q.ListRecurring(ctx)
}

// RecurringIDs returns the ids of the recurring schedules of queue,
// sorted, without reading their states: with [Inspector.GetRecurring],
// what a caller showing them page by page reads (Recurring reads every
// schedule's state, a few commands each). It reads the schedules'
// progress records (HSCAN of a few dozen bytes each), not their
// definitions, which carry the occurrences' payloads. A schedule deleted
// after the call makes GetRecurring fail with an error wrapping
// delaystream.ErrNotFound.
func (in *Inspector) RecurringIDs(ctx context.Context, queue string) ([]string, error) {
	h, err := in.open(ctx, queue)
	if err != nil {
		return nil, err
	}
	ids, err := recur.New(in.rdb, h.layout, recur.Config{}).ListedIDs(ctx)
	if err != nil {
		return nil, fmt.Errorf("recurring schedules of %s: %w", queue, err)
	}
	return ids, nil
}

// GetRecurring returns the recurring schedule id of queue (see
// [Inspector.Recurring]); an unknown one gives an error wrapping
// delaystream.ErrNotFound.
func (in *Inspector) GetRecurring(ctx context.Context, queue, id string, opts ...delaystream.Option) (delaystream.RecurringStatus, error) {
	q, err := in.queueOf(ctx, queue, opts)
	if err != nil {
		return delaystream.RecurringStatus{}, err
	}
	return q.GetRecurring(ctx, id)
}

// DefineRecurring creates or updates a recurring schedule of queue, as
// [delaystream.Queue.DefineRecurring] does; opts register the spec kinds
// it may use beyond "every".
func (in *Inspector) DefineRecurring(ctx context.Context, queue string, r delaystream.Recurring, opts ...delaystream.Option) (delaystream.Outcome, error) {
	q, err := in.queueOf(ctx, queue, opts)
	if err != nil {
		return delaystream.OutcomeUnknown, err
	}
	return q.DefineRecurring(ctx, r)
}

// PauseRecurring pauses the recurring schedule id of queue (see
// [delaystream.Queue.PauseRecurring]).
func (in *Inspector) PauseRecurring(ctx context.Context, queue, id string) error {
	q, err := in.queueOf(ctx, queue, nil)
	if err != nil {
		return err
	}
	return q.PauseRecurring(ctx, id)
}

// ResumeRecurring resumes the recurring schedule id of queue (see
// [delaystream.Queue.ResumeRecurring]).
func (in *Inspector) ResumeRecurring(ctx context.Context, queue, id string) error {
	q, err := in.queueOf(ctx, queue, nil)
	if err != nil {
		return err
	}
	return q.ResumeRecurring(ctx, id)
}

// DeleteRecurring deletes the recurring schedule id of queue (see
// [delaystream.Queue.DeleteRecurring]).
func (in *Inspector) DeleteRecurring(ctx context.Context, queue, id string) error {
	q, err := in.queueOf(ctx, queue, nil)
	if err != nil {
		return err
	}
	return q.DeleteRecurring(ctx, id)
}

// queueOf resolves queue and returns a Queue of it (never run: it only
// reads and changes its schedules).
func (in *Inspector) queueOf(ctx context.Context, queue string, opts []delaystream.Option) (*delaystream.Queue, error) {
	info, err := in.queue(ctx, queue)
	if err != nil {
		return nil, err
	}
	all := append([]delaystream.Option{delaystream.WithPrefix(in.prefix), delaystream.WithShards(info.Shards)}, opts...)
	q, err := delaystream.New(in.rdb, queue, all...)
	if err != nil {
		return nil, invalid(err)
	}
	return q, nil
}
