// Package flow keeps a queue's flow-control state in Redis: the pause
// record of each shard (a paused queue's promotion, a paused group's
// consumers) and the limits a group's consumers record when they start.
// Every process reads the same state, so a pause or a limit holds in all
// of them. The consumer's side of it (reading the state, obeying it, the
// limiter on the read path) lives in package group; this package writes
// and reads the records for the root package, package admin and the
// consumers alike.
//
// The pause record of a shard is the HASH stream.Keys.Pause: its field
// "queue" (written on every shard) stops that shard's promotion, checked
// inside the promote script; its field "group:<name>" (on shard 0 only)
// stops the group's consumers, which learn of it from a notice on shard
// 0's arrivals channel, at every (re)subscription and by a slow poll.
// Values are the Unix ms (Redis clock) the pause began.
package flow
