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
// "<revision>|<latest added ms>|<latest due ms>|<waiting ms,...>", with,
// per schedule, the fields "<schedule id>\x1fw" -> "<first ms>:<last
// ms>:<written ms>,..." (when the occurrences from the latest due on were
// written) and "<schedule id>\x1fa" -> "<occurrence ms>|<appended ms>"
// (the latest occurrence recorded as appended to the shard's stream, by
// whoever appends it and records it).
func (k Keys) Occurrences() string { return k.base + ":e:o" }
