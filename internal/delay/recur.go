package delay

import "context"

// Validate checks msg against the queue's limits (payload size, headers,
// id) as scheduling it would, without writing anything.
func (q *Queue) Validate(msg Message) error { return validate(&msg, q.cfg.maxPayload) }

// CheckShards makes the queue's shard-count check (see [Queue]) without
// scheduling anything.
func (q *Queue) CheckShards(ctx context.Context) error { return q.set.check(ctx) }
