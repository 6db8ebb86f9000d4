// Package engine promotes due messages: the lane loop behind mover.Mover
// (a queue's main lane) and behind every group.Consumer's retry lane. A lane
// is one delayed set and the stream it is promoted into; the engine runs
// promote.lua on it in bounded batches, sleeps to the next due time on a Go
// timer, wakes early on the lane's pub/sub channel, probes an idle lane once
// per max idle, shares the lane with other engines through a lease, and
// reports failures at a bounded rate, telling a passing failure from a lane
// that stays stuck until its keys are fixed.
//
// Package mover documents the behaviour users see (its doc.go); this
// package is its implementation, kept internal so that the retry lane can
// use it without user-facing options.
package engine
