package stream

// Recurring returns the key of the queue's recurring schedules: a HASH of
// schedule id -> definition, under the queue's own hash tag (with
// [Layout.Meta]).
func (l *Layout) Recurring() string { return l.home.base + ":e" }

// RecurringProgress returns the key of the schedules' progress: a HASH of
// schedule id -> "<revision>|<through ms>|<fenced 0/1>|<state a/p/x>|<next top-up ms>",
// under the queue's own hash tag. It outlives a deleted schedule, whose
// revision a later definition continues.
func (l *Layout) RecurringProgress() string { return l.home.base + ":e:p" }

// Occurrences returns the key of the shard's record of the recurring
// occurrences added to it: a HASH of schedule id ->
// "<revision>|<latest added ms>|<latest due ms>|<waiting ms,...>".
func (k Keys) Occurrences() string { return k.base + ":e:o" }
