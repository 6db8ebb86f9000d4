// Package engine promotes due messages: the lane loop behind mover.Mover
// (a queue's main lanes) and behind every group.Consumer's retry lanes. A
// lane is one delayed set and the stream it is promoted into; a queue of S
// shards has S main lanes and S retry lanes per group, and an engine runs
// one loop per shard. Each loop runs promote.lua on its lane in bounded
// batches, sleeps to the next due time on a Go timer and wakes early on the
// lane's pub/sub channel (one connection for an unsharded queue's lane; a
// sharded queue's wake channels are shard channels, subscribed with one
// connection per node through internal/shardsub); at most maxInFlight (4)
// of an engine's calls run at once on each node, so its connections do not
// grow with its lanes, and a lane whose last call failed calls outside
// that bound, so a failed node's hanging calls do not hold up the others.
// An idle lane (nothing due within the max idle) makes no promote calls;
// the engine's idle lanes share one budget of head probes (idle.go), one
// per max idle for the whole engine, each lane at least every 30 s, so the
// idle cost of an engine does not grow with its lanes up to 30 of them.
// Failures are reported at a bounded rate, telling a passing failure from
// a lane that stays stuck until its keys are fixed.
//
// Engines share lanes in one of two ways. A lane with a lease (the lane of
// an unsharded queue, every retry lane) is promoted by the engine holding
// its lease, taken only for work. The main lanes of a sharded queue are
// divided between its movers through a registry of live movers in Redis
// (shards.go, movers.lua): each mover beats every third of the lease TTL,
// the mover of rank k among N live tokens owns the shards i with
// i % N == k, and joins and leaves are announced on a pub/sub channel so
// that the others rebalance at once; owned lanes are promoted without a
// lease. A mover whose beats fail keeps its last share (all shards if it
// never had one) until a beat succeeds. Neither way is needed for correctness: promote.lua is atomic, so a
// lane promoted by two engines at once never appends a message twice.
//
// Before anything else, Run checks the queue's shard count recorded in
// Redis (internal/shards) and refuses to run with another.
//
// Package mover documents the behaviour users see (its doc.go); this
// package is its implementation, kept internal so that the retry lane can
// use it without user-facing options.
package engine
