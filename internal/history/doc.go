// Package history keeps a queue's counters in Redis, so that every process
// and tool sees the same history of the queue, whoever did the work and
// whatever restarted since: messages promoted and quarantined (per queue),
// messages handled, dropped, retried and dead-lettered (per group).
//
// The scripts of the transitions write them (scripts/history.lua, in
// promote, ack, retry and dead), in the call that makes the transition: no
// round trip of their own, and a count is exact whatever crashes (a
// transition and its count are one script). Each shard keeps three HASHes of
// the same fields: totals ([stream.Keys.HistoryTotals], kept as long as the
// queue), the bucket of each minute (kept [MinuteLife]) and of each hour
// (kept [HourLife]) ([stream.Keys.HistoryBucket]). Buckets are named by the
// writer's clock; a clock off by a few seconds moves a count into a
// neighbouring bucket, never loses it. [Read] sums them over a queue's shards.
//
// Fields: "promoted" and "quarantined", and "<counter>:<group>" for each
// group counter ([Handled], [Dropped], [Retried], [Dead]). A counter's
// name holds no colon, so everything after the first colon is the group's
// name.
package history
