package admin

import (
	"context"
	"fmt"

	"github.com/delaystream/delaystream/internal/recur"
)

// RecurringIDs returns the ids of the recurring schedules of queue,
// sorted, without reading their states: with the GetRecurring of
// [Operator.Queue], what a caller showing them page by page reads
// (ListRecurring reads every schedule's state, a few commands each). It reads the schedules'
// progress records (HSCAN of a few dozen bytes each), not their
// definitions, which carry the occurrences' payloads. A schedule deleted
// after the call makes GetRecurring fail with an error wrapping
// delaystream.ErrNotFound.
func (in *Operator) RecurringIDs(ctx context.Context, queue string) ([]string, error) {
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
