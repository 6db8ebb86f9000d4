// Package integration holds delaystream's tests against real Redis servers:
// a single server, a local Redis Cluster, and injected faults. It is its own
// module, so users of the library never inherit testcontainers-go.
//
// Run it from this directory (or through the committed go.work):
//
//	go test -race -count=1 ./...
//
// # Where Redis comes from
//
// Package internal/harness gives each test package one shared server:
// REDIS_ADDR when set; else a redis:7.0 container through testcontainers-go
// when a Docker engine answers within 1.5 s; else a throwaway redis-server
// child process (about 0.1 s to start). With none of them the run fails with
// a message naming what to install; nothing is skipped. Tests run in
// parallel and keep apart by unique key prefixes, deleted when each test
// ends. The Cluster is REDIS_CLUSTER_ADDRS, else three local masters
// (needs redis-server and redis-cli); tests that kill nodes or measure the
// masters start a cluster of their own (three masters, three replicas). Tests that measure the server
// (INFO commandstats) or disturb it (SCRIPT FLUSH, CLIENT KILL) start a
// server of their own. Each test logs which source it used.
//
// # What the tests show
//
//   - TestNeverEarly: 3000 messages with random delays (After and At, single
//     and batched, six producers) are appended no earlier than due by the
//     Redis clock, each exactly once; the lateness distribution is logged.
//   - TestExactlyOnceConcurrentMovers: 100k messages, four movers, with and
//     without the lease: no duplicate, none lost, nothing left waiting.
//   - TestCancelRacesPromotion, TestRescheduleRacesPromotion: 2000 messages
//     due together, cancelled or rescheduled around their due time while a
//     mover runs: each is either cancelled/rescheduled or delivered, never
//     both, never neither.
//   - TestDuplicatePolicies: Keep, Replace, Reject, per-message override,
//     duplicates within a batch, id reuse after promotion, Get, Stats.
//   - TestBadInputWritesNothing: refused input leaves no key behind.
//   - TestQuarantine: orphans and foreign envelopes go to the quarantine
//     stream with a reason and are counted; the good messages are delivered.
//   - TestMoverFailover: a stopping owner hands over at once; a crashed
//     owner's lease is taken over within its TTL.
//   - TestIdleCost: an idle mover makes at most about one call per second.
//   - TestWakeUpPrecision: an idle mover is woken by pub/sub and delivers on
//     a Go timer, within milliseconds, not on the next poll.
//   - TestCluster: all of the producer and mover on a 3-master Cluster, for
//     queues on different masters.
//   - TestScriptCacheFlushed, TestConnectionsKilled: faults: NOSCRIPT
//     fallback, reconnects and resubscription.
//   - TestShardedClusterSuite: a queue of 16 shards on the Cluster, through
//     the front door: placement (slots, masters), schedule / cancel /
//     reschedule / get by id in each id's shard, fan-out to three groups
//     (none early by Redis TIME), per-group retry, per-shard dead letters
//     and redrive, a consumer process killed with SIGKILL (its entries
//     handled elsewhere within 3 s), trimming, Stats as the sum of
//     ShardStats.
//   - TestShardedMoversShareShards: mover processes of a 16-shard queue
//     split the shards evenly, and settle after a join, a clean leave
//     (SIGTERM) and a crash (SIGKILL) within 2 s, 2 s and the lease TTL
//     plus 1 s, while 5000 messages are promoted exactly once.
//   - TestShardedLoadSpread: the masters' shares of the commands (INFO
//     commandstats) for 20k messages on a 16-shard queue, on a cluster of
//     its own with replicas.
//   - TestShardedLayoutSpreadsEvenly: the shards of a queue spread over
//     the masters as evenly as the count allows, whatever the queue's name.
//
// Child processes (movers, consumers to kill) are the test binary itself,
// re-executed with DELAYSTREAM_INTEGRATION_CHILD set (see TestMain).
//
// Load tests (100k messages) and timing tests do not overlap: the former
// hold a package-level write lock, the latter a read lock, so the measured
// figures mean something on a 2-core machine.
package integration
