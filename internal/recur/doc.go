// Package recur keeps a queue's recurring schedules in Redis and adds
// their occurrences to the queue's shards, once per occurrence, from any
// number of processes with no leader.
//
// A schedule's definition and its progress live under the queue's own
// hash tag; each occurrence is the message "<schedule id>@<unix ms>#<revision>",
// written to the shard of that id by recur_add.lua, which also records,
// per schedule and shard, the latest occurrence added there and refuses
// anything at or before it. A top-up computes the occurrences after the
// recorded progress, adds them shard by shard in time order and then
// records the progress: racing processes and a crash between any two
// steps add nothing twice and never re-create a delivered occurrence.
// Every change of a definition (update, pause, resume, delete) starts a
// new revision and fences every shard: waiting occurrences of the older
// revision that are not yet due are removed and its later additions
// refused. Whoever finds a fence unfinished finishes it.
package recur
