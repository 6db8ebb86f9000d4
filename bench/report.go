package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// metricDef describes one figure of the table.
type metricDef struct {
	scenario, key string
	label         string
	unit          string  // shown after the value
	scale         float64 // value is multiplied by scale for display
	better        int     // +1 higher is better, -1 lower is better, 0 no ratio
	agg           string  // "median" (default) or "max" (worst run: counts that must be 0)
	op            string  // target operator for delaystream: ">=", "<=", "==" ("" = no target)
	target        float64 // in display units
}

// metrics in table order. Raw values: durations in seconds, rates in msg/s,
// CPU in seconds per message, bytes, counts.
var metrics = []metricDef{
	{scenario: "burst", key: "sched_rate", label: "schedule rate (ds: batch; asynq: parallel Enqueue)", unit: "msg/s", scale: 1, better: +1},
	{scenario: "burst", key: "first_after_due", label: "due -> first delivery", unit: "ms", scale: 1e3, better: -1},
	{scenario: "burst", key: "last_after_due", label: "due -> last delivery", unit: "ms", scale: 1e3, better: -1, op: "<=", target: 600},
	{scenario: "burst", key: "deliver_rate", label: "delivery rate (first -> last delivery)", unit: "msg/s", scale: 1, better: +1, op: ">=", target: 100000},
	{scenario: "burst", key: "e2e_rate", label: "delivery rate (due -> last delivery)", unit: "msg/s", scale: 1, better: +1},
	{scenario: "burst", key: "lat_p50", label: "lateness p50", unit: "ms", scale: 1e3, better: -1},
	{scenario: "burst", key: "lat_p99", label: "lateness p99", unit: "ms", scale: 1e3, better: -1},
	{scenario: "burst", key: "lat_max", label: "lateness max", unit: "ms", scale: 1e3, better: -1},
	{scenario: "burst", key: "promote_p99", label: "  split p99: due -> appended to stream (mover)", unit: "ms", scale: 1e3},
	{scenario: "burst", key: "consume_p99", label: "  split p99: appended -> handler (consumer)", unit: "ms", scale: 1e3},
	{scenario: "burst", key: "early", label: "early (local clock), worst run", unit: "", scale: 1, agg: "max", op: "==", target: 0},
	{scenario: "burst", key: "lost", label: "lost, worst run", unit: "", scale: 1, agg: "max", op: "==", target: 0},
	{scenario: "burst", key: "dups", label: "duplicates, worst run", unit: "", scale: 1, agg: "max", op: "==", target: 0},
	{scenario: "burst", key: "cmds_per_msg", label: "Redis commands / delivered msg (incl. in scripts)", unit: "", scale: 1, better: -1, op: "<=", target: 8},
	{scenario: "burst", key: "redis_cpu_per_msg", label: "Redis CPU / delivered msg", unit: "µs", scale: 1e6, better: -1, op: "<=", target: 7},
	{scenario: "burst", key: "client_cpu_per_msg", label: "client CPU / delivered msg (mover+consumer+bench)", unit: "µs", scale: 1e6, better: -1},
	{scenario: "burst", key: "sched_cmds_per_msg", label: "Redis commands / scheduled msg", unit: "", scale: 1, better: -1},
	{scenario: "burst", key: "sched_redis_cpu_per_msg", label: "Redis CPU / scheduled msg", unit: "µs", scale: 1e6, better: -1},
	{scenario: "burst", key: "sched_client_cpu_per_msg", label: "client CPU / scheduled msg", unit: "µs", scale: 1e6, better: -1},

	{scenario: "trickle", key: "lat_p50", label: "lateness p50", unit: "ms", scale: 1e3, better: -1},
	{scenario: "trickle", key: "lat_p99", label: "lateness p99", unit: "ms", scale: 1e3, better: -1, op: "<=", target: 5},
	{scenario: "trickle", key: "lat_max", label: "lateness max", unit: "ms", scale: 1e3, better: -1},
	{scenario: "trickle", key: "promote_p50", label: "  split p50: due -> appended to stream (mover)", unit: "ms", scale: 1e3},
	{scenario: "trickle", key: "promote_p99", label: "  split p99: due -> appended to stream (mover)", unit: "ms", scale: 1e3},
	{scenario: "trickle", key: "consume_p50", label: "  split p50: appended -> handler (consumer)", unit: "ms", scale: 1e3},
	{scenario: "trickle", key: "consume_p99", label: "  split p99: appended -> handler (consumer)", unit: "ms", scale: 1e3},
	{scenario: "trickle", key: "lat_min", label: "lateness min (< 0 = early)", unit: "ms", scale: 1e3},
	{scenario: "trickle", key: "early_pct", label: "% early (local clock), worst run", unit: "%", scale: 1, agg: "max", op: "==", target: 0},
	{scenario: "trickle", key: "early_redis", label: "appended before due (Redis clock), worst run", unit: "", scale: 1, agg: "max", op: "==", target: 0},
	{scenario: "trickle", key: "lost", label: "lost, worst run", unit: "", scale: 1, agg: "max", op: "==", target: 0},
	{scenario: "trickle", key: "dups", label: "duplicates, worst run", unit: "", scale: 1, agg: "max", op: "==", target: 0},
	{scenario: "trickle", key: "cmds_per_msg", label: "Redis commands / msg (schedule + delivery + idle)", unit: "", scale: 1, better: -1},
	{scenario: "trickle", key: "redis_cpu_per_msg", label: "Redis CPU / msg (schedule + delivery + idle)", unit: "µs", scale: 1e6, better: -1},
	{scenario: "trickle", key: "reads_per_msg", label: "  read events / msg (INFO total_reads_processed)", unit: "", scale: 1, better: -1},
	{scenario: "trickle", key: "writes_per_msg", label: "  write events / msg (INFO total_writes_processed)", unit: "", scale: 1, better: -1},
	{scenario: "trickle", key: "client_cpu_per_msg", label: "client CPU / msg (producer+mover+consumer)", unit: "µs", scale: 1e6, better: -1},

	{scenario: "clients", key: "one_rate", label: "one at a time, 1 caller", unit: "msg/s", scale: 1, better: +1},
	{scenario: "clients", key: "one_redis_cpu", label: "  one at a time: Redis CPU / msg", unit: "µs", scale: 1e6, better: -1},
	{scenario: "clients", key: "one_cmds", label: "  one at a time: Redis commands / msg", unit: "", scale: 1, better: -1},
	{scenario: "clients", key: "one_client_cpu", label: "  one at a time: client CPU / msg", unit: "µs", scale: 1e6, better: -1},
	{scenario: "clients", key: "batch_rate", label: "batches of 100, 1 caller", unit: "msg/s", scale: 1, better: +1},
	{scenario: "clients", key: "batch_redis_cpu", label: "  batches: Redis CPU / msg", unit: "µs", scale: 1e6, better: -1},
	{scenario: "clients", key: "batch_cmds", label: "  batches: Redis commands / msg", unit: "", scale: 1, better: -1},
	{scenario: "clients", key: "batch_client_cpu", label: "  batches: client CPU / msg", unit: "µs", scale: 1e6, better: -1},
	{scenario: "schedule", key: "one_rate", label: "one at a time, 1 goroutine", unit: "msg/s", scale: 1, better: +1},
	{scenario: "schedule", key: "one_par_rate", label: "one at a time, parallel goroutines", unit: "msg/s", scale: 1, better: +1},
	{scenario: "schedule", key: "one_par64_rate", label: "one at a time, 64 goroutines", unit: "msg/s", scale: 1, better: +1, op: ">=", target: 150000},
	{scenario: "schedule", key: "one_par64_redis_cpu", label: "  64 goroutines: Redis CPU / msg", unit: "µs", scale: 1e6, better: -1, op: "<=", target: 6},
	{scenario: "schedule", key: "one_par64_p50", label: "  64 goroutines: call latency p50", unit: "ms", scale: 1e3, better: -1},
	{scenario: "schedule", key: "one_par64_p99", label: "  64 goroutines: call latency p99", unit: "ms", scale: 1e3, better: -1},
	{scenario: "schedule", key: "one_par64_client_cpu", label: "  64 goroutines: client CPU / msg", unit: "µs", scale: 1e6, better: -1},
	{scenario: "schedule", key: "one_par64_cmds", label: "  64 goroutines: Redis commands / msg", unit: "", scale: 1, better: -1},
	{scenario: "schedule", key: "batch_rate", label: "batch, 1 goroutine (asynq: no batch API, parallel Enqueue)", unit: "msg/s", scale: 1, better: +1, op: ">=", target: 150000},
	{scenario: "schedule", key: "one_redis_cpu", label: "  one at a time: Redis CPU / msg", unit: "µs", scale: 1e6, better: -1},
	{scenario: "schedule", key: "one_client_cpu", label: "  one at a time: client CPU / msg", unit: "µs", scale: 1e6, better: -1},
	{scenario: "schedule", key: "one_cmds", label: "  one at a time: Redis commands / msg", unit: "", scale: 1, better: -1},
	{scenario: "schedule", key: "batch_redis_cpu", label: "  batch: Redis CPU / msg", unit: "µs", scale: 1e6, better: -1},
	{scenario: "schedule", key: "batch_client_cpu", label: "  batch: client CPU / msg", unit: "µs", scale: 1e6, better: -1},
	{scenario: "schedule", key: "batch_par_rate", label: "batch, 4 goroutines (asynq: n/a)", unit: "msg/s", scale: 1, better: +1},

	{scenario: "memory", key: "bytes_per_msg", label: "Redis bytes / waiting msg (used_memory delta / N)", unit: "B", scale: 1, better: -1, op: "<=", target: 320},
	{scenario: "memory", key: "zset_bytes_per_msg", label: "  of which delayed set (MEMORY USAGE)", unit: "B", scale: 1},
	{scenario: "memory", key: "hash_bytes_per_msg", label: "  of which envelopes hash (MEMORY USAGE)", unit: "B", scale: 1},
	{scenario: "memory", key: "given_bytes_per_msg", label: "  with caller-chosen ids (26 chars): plain members + hash", unit: "B", scale: 1},

	{scenario: "layouts", key: "layout_current", label: "memory / waiting msg, plain members: zset + envelopes hash", unit: "B", scale: 1},
	{scenario: "layouts", key: "layout_packed", label: "  packed members (generated ids): 0x01 + random part + envelope", unit: "B", scale: 1},
	{scenario: "layouts", key: "layout_merged", label: "  study: zset member = id + envelope, no index", unit: "B", scale: 1},
	{scenario: "layouts", key: "layout_merged_index", label: "  study: merged + id -> due index (4096 listpacks)", unit: "B", scale: 1},
	{scenario: "layouts", key: "layout_merged_index_bin", label: "  study: merged + index, ULIDs as 16 bytes", unit: "B", scale: 1},
	{scenario: "layouts", key: "layout_current_promote_cpu", label: "promotion: Redis CPU / msg, plain members (the library's promote script)", unit: "µs", scale: 1e6},
	{scenario: "layouts", key: "layout_packed_promote_cpu", label: "  packed members (the library's promote script)", unit: "µs", scale: 1e6},
	{scenario: "layouts", key: "layout_merged_promote_cpu", label: "  study: merged, no index", unit: "µs", scale: 1e6},
	{scenario: "layouts", key: "layout_merged_index_promote_cpu", label: "  study: merged + index, two-phase (read ids, then promote)", unit: "µs", scale: 1e6},

	{scenario: "crash", key: "held", label: "messages held by the killed consumer (handlers + read-ahead)", unit: "", scale: 1},
	{scenario: "crash", key: "redeliver", label: "kill -9 -> every held msg's handler started elsewhere (max)", unit: "s", scale: 1, better: -1, op: "<=", target: 3},
	{scenario: "crash", key: "redeliver_p50", label: "kill -9 -> held msg's handler started elsewhere, p50", unit: "s", scale: 1, better: -1},
	{scenario: "crash", key: "redeliver_first", label: "kill -9 -> first held msg's handler started elsewhere", unit: "s", scale: 1, better: -1},
	{scenario: "crash", key: "redeliver_worst", label: "kill -9 -> every held msg handled, worst run (max)", unit: "s", scale: 1, agg: "max", better: -1, op: "<=", target: 3},

	// The per-queue target is judged on the queue's own machinery, the mover
	// (DESIGN invariant 8); each consumer adds its blocking read and reclaim
	// scans, shown below it without a target.
	{scenario: "limit", key: "limit_rate", label: "rate-limited group (-limit-rate, -limit-consumers processes): handled rate", unit: "msg/s", scale: 1},
	{scenario: "limit", key: "limit_off", label: "  off the limit", unit: "%", scale: 1},
	{scenario: "limit", key: "limit_excess_100ms", label: "  most starts above rate·w in any 100 ms (burst allows -limit-burst)", unit: "", scale: 1, agg: "max"},
	{scenario: "limit", key: "limit_excess_1s", label: "  most starts above rate·w in any 1 s", unit: "", scale: 1, agg: "max"},
	{scenario: "limit", key: "limit_excess_10s", label: "  most starts above rate·w in any 10 s", unit: "", scale: 1, agg: "max"},
	{scenario: "limit", key: "limit_beyond_burst", label: "  most starts above rate·w + burst in any of those windows (GCRA allows 0)", unit: "", scale: 1, agg: "max", op: "<=", target: 0},
	{scenario: "limit", key: "limit_cmds_per_s", label: "  Redis commands/s while limited (incl. in scripts)", unit: "/s", scale: 1, better: -1},
	{scenario: "limit", key: "limit_cmds_msg", label: "  Redis commands per message", unit: "", scale: 1, better: -1},
	{scenario: "limit", key: "limit_redis_cpu", label: "  Redis CPU while limited", unit: "ms/s", scale: 1e3, better: -1},
	{scenario: "limit", key: "limit_wait_share", label: "  share of the time each consumer waited for permits", unit: "", scale: 1},
	{scenario: "limitcap", key: "limitcap_running_max", label: "concurrency-capped group (-limit-consumers processes): most handlers running at once", unit: "", scale: 1, agg: "max"},
	{scenario: "limitcap", key: "limitcap_cap", label: "  the cap (-limit-concurrency)", unit: "", scale: 1},
	{scenario: "limitcap", key: "limitcap_over_cap", label: "  most running above the cap, worst run", unit: "", scale: 1, agg: "max", op: "<=", target: 0},
	{scenario: "limitcap", key: "limitcap_rate", label: "  handled rate", unit: "msg/s", scale: 1},
	{scenario: "limitcap", key: "limitcap_ceiling", label: "  ceiling: cap / handler time (-limit-hold)", unit: "msg/s", scale: 1},
	{scenario: "limitcap", key: "limitcap_cmds_per_s", label: "  Redis commands/s while capped (incl. in scripts)", unit: "/s", scale: 1, better: -1},
	{scenario: "limitcap", key: "limitcap_cmds_msg", label: "  Redis commands per message", unit: "", scale: 1, better: -1},
	{scenario: "limitcap", key: "limitcap_redis_cpu", label: "  Redis CPU while capped", unit: "ms/s", scale: 1e3, better: -1},
	{scenario: "limitcap", key: "limitcap_wait_share", label: "  share of the time each consumer waited for slots", unit: "", scale: 1},
	{scenario: "idle", key: "mover_cmds_per_s", label: "Redis commands/s, 1 queue (its mover), nothing due (incl. in scripts)", unit: "/s", scale: 1, op: "<=", target: 1},
	{scenario: "idle", key: "mover_client_cmds_per_s", label: "  of which sent by the mover (MONITOR)", unit: "/s", scale: 1},
	{scenario: "idle", key: "cmds_per_s", label: "mover + 1 consumer: commands/s (incl. in scripts; asynq: server)", unit: "/s", scale: 1, better: -1},
	{scenario: "idle", key: "client_cmds_per_s", label: "  of which sent by clients (MONITOR)", unit: "/s", scale: 1, better: -1},
	{scenario: "idle", key: "redis_cpu_per_s", label: "  Redis CPU while idle", unit: "ms/s", scale: 1e3, better: -1},
	{scenario: "idle", key: "client_cpu_per_s", label: "  client CPU while idle (mover+consumer)", unit: "ms/s", scale: 1e3, better: -1},
	{scenario: "idle", key: "fleet_cmds_per_s", label: "idle, 3 groups × 3 consumers (each its own client, promoting; no mover): commands/s incl. in scripts", unit: "/s", scale: 1, op: "<=", target: 3},
	{scenario: "idle", key: "fleet_client_cmds_per_s", label: "  of which sent by clients (MONITOR)", unit: "/s", scale: 1, better: -1},
	{scenario: "idle", key: "fleet_redis_cpu_per_s", label: "  Redis CPU while idle (3 × 3 consumers)", unit: "ms/s", scale: 1e3, better: -1},

	// recurring: 1,000 schedules every minute, 2 processes (recurring.go).
	{scenario: "recurring", key: "define_per_s", label: "1,000 schedules every minute, 2 processes: DefineRecurring calls/s (one caller)", unit: "/s", scale: 1, better: +1},
	{scenario: "recurring", key: "minute_cmds_per_s", label: "  Redis commands/s over a minute (incl. in scripts)", unit: "/s", scale: 1, better: -1},
	{scenario: "recurring", key: "minute_redis_cpu_per_s", label: "  Redis CPU over a minute", unit: "ms/s", scale: 1e3, better: -1},
	{scenario: "recurring", key: "idle_cmds_per_s", label: "  Redis commands/s between occurrences (10 s to 50 s past the minute)", unit: "/s", scale: 1, better: -1},
	{scenario: "recurring", key: "idle_redis_cpu_per_s", label: "  Redis CPU between occurrences", unit: "ms/s", scale: 1e3, better: -1},
	{scenario: "recurring", key: "fired_per_min", label: "  occurrences handled in the minute", unit: "", scale: 1},
	{scenario: "recurring", key: "late_p50", label: "  occurrence -> handler p50", unit: "ms", scale: 1e3, better: -1},
	{scenario: "recurring", key: "late_p99", label: "  occurrence -> handler p99", unit: "ms", scale: 1e3, better: -1},

	{scenario: "queues", key: "cmds_per_s", label: "many queues idle (one client, a consumer each): Redis commands/s", unit: "/s", scale: 1},
	{scenario: "queues", key: "cmds_per_s_per_queue", label: "  per queue", unit: "/s", scale: 1, better: -1},
	{scenario: "queues", key: "redis_cpu_per_s", label: "  Redis CPU while idle", unit: "ms/s", scale: 1e3},
	{scenario: "queues", key: "conns", label: "  connections to Redis (the process's)", unit: "", scale: 1},
	{scenario: "queues", key: "pool_conns", label: "  of which in the client's pool (at the end)", unit: "", scale: 1},
	{scenario: "queues", key: "pool_timeouts", label: "  pool timeouts (waits for a connection that gave up), worst run", unit: "", scale: 1, agg: "max", op: "==", target: 0},
	{scenario: "queues", key: "sched_failed", label: "  Schedule calls (one per queue, concurrent) failed within 5 s, worst run", unit: "", scale: 1, agg: "max", op: "==", target: 0},
	{scenario: "queues", key: "lat_p50", label: "  one message due on every queue: lateness p50", unit: "ms", scale: 1e3},
	{scenario: "queues", key: "lat_max", label: "  lateness max", unit: "ms", scale: 1e3},
	{scenario: "queues", key: "lost", label: "  not delivered within 10 s, worst run", unit: "", scale: 1, agg: "max", op: "==", target: 0},
	// backlog: the trickle over -backlog-n messages waiting (due in 1 h);
	// delaystream only. Targets from the cost issue.
	{scenario: "backlog", key: "waiting", label: "messages waiting (due in 1 h) under the trickle", unit: "", scale: 1},
	{scenario: "backlog", key: "fill_rate", label: "fill rate (ScheduleBatch)", unit: "msg/s", scale: 1, better: +1},
	{scenario: "backlog", key: "lat_p50", label: "lateness p50", unit: "ms", scale: 1e3, better: -1},
	{scenario: "backlog", key: "lat_p99", label: "lateness p99", unit: "ms", scale: 1e3, better: -1, op: "<=", target: 5},
	{scenario: "backlog", key: "lat_max", label: "lateness max", unit: "ms", scale: 1e3, better: -1, op: "<=", target: 15},
	{scenario: "backlog", key: "promote_p50", label: "  split p50: due -> appended to stream (mover)", unit: "ms", scale: 1e3},
	{scenario: "backlog", key: "promote_p99", label: "  split p99: due -> appended to stream (mover)", unit: "ms", scale: 1e3},
	{scenario: "backlog", key: "promote_max", label: "  split max: due -> appended to stream (mover)", unit: "ms", scale: 1e3},
	{scenario: "backlog", key: "consume_p50", label: "  split p50: appended -> handler (consumer)", unit: "ms", scale: 1e3},
	{scenario: "backlog", key: "consume_p99", label: "  split p99: appended -> handler (consumer)", unit: "ms", scale: 1e3},
	{scenario: "backlog", key: "promote_call_p50", label: "  promote call round trip p50 (client side)", unit: "ms", scale: 1e3},
	{scenario: "backlog", key: "promote_call_p99", label: "  promote call round trip p99 (client side)", unit: "ms", scale: 1e3},
	{scenario: "backlog", key: "promote_call_max", label: "  promote call round trip max (client side)", unit: "ms", scale: 1e3},
	{scenario: "backlog", key: "canary_p99", label: "  bench process: a 1 ms sleep's overshoot p99 (host scheduling)", unit: "ms", scale: 1e3},
	{scenario: "backlog", key: "canary_max", label: "  bench process: a 1 ms sleep's overshoot max", unit: "ms", scale: 1e3},
	{scenario: "backlog", key: "slow_promote", label: "  promote calls over 1 ms in Redis (SLOWLOG), worst run", unit: "", scale: 1, agg: "max"},
	{scenario: "backlog", key: "early_pct", label: "% early (local clock), worst run", unit: "%", scale: 1, agg: "max", op: "==", target: 0},
	{scenario: "backlog", key: "early_redis", label: "appended before due (Redis clock), worst run", unit: "", scale: 1, agg: "max", op: "==", target: 0},
	{scenario: "backlog", key: "lost", label: "lost, worst run", unit: "", scale: 1, agg: "max", op: "==", target: 0},
	{scenario: "backlog", key: "dups", label: "duplicates, worst run", unit: "", scale: 1, agg: "max", op: "==", target: 0},
	{scenario: "backlog", key: "cmds_per_msg", label: "Redis commands / msg (schedule + delivery + idle)", unit: "", scale: 1, better: -1},
	{scenario: "backlog", key: "redis_cpu_per_msg", label: "Redis CPU / msg (schedule + delivery + idle)", unit: "µs", scale: 1e6, better: -1},
	{scenario: "backlog", key: "client_cpu_per_msg", label: "client CPU / msg (producer+mover+consumer)", unit: "µs", scale: 1e6, better: -1},
	{scenario: "backlog", key: "zrangebyscore_usec", label: "  promote's ZRANGEBYSCORE: Redis µs / call", unit: "µs", scale: 1e6},
	{scenario: "backlog", key: "zremrangebyrank_usec", label: "  promote's ZREMRANGEBYRANK: Redis µs / call", unit: "µs", scale: 1e6},
	{scenario: "backlog", key: "zrange_usec", label: "  ZRANGE (heads: promote, schedule, idle probe): Redis µs / call", unit: "µs", scale: 1e6},
	{scenario: "backlog", key: "zadd_usec", label: "  ZADD (schedule): Redis µs / call", unit: "µs", scale: 1e6},
	{scenario: "backlog", key: "base_lat_p50", label: "same run, nothing waiting (-backlog-ab): lateness p50", unit: "ms", scale: 1e3},
	{scenario: "backlog", key: "base_lat_p99", label: "  nothing waiting: lateness p99", unit: "ms", scale: 1e3},
	{scenario: "backlog", key: "base_lat_max", label: "  nothing waiting: lateness max", unit: "ms", scale: 1e3},
	{scenario: "backlog", key: "base_promote_p99", label: "  nothing waiting: split p99, due -> appended (mover)", unit: "ms", scale: 1e3},
	{scenario: "backlog", key: "base_promote_max", label: "  nothing waiting: split max, due -> appended (mover)", unit: "ms", scale: 1e3},
	{scenario: "backlog", key: "base_consume_p99", label: "  nothing waiting: split p99, appended -> handler (consumer)", unit: "ms", scale: 1e3},
	{scenario: "backlog", key: "base_promote_call_p99", label: "  nothing waiting: promote call round trip p99", unit: "ms", scale: 1e3},
	{scenario: "backlog", key: "base_promote_call_max", label: "  nothing waiting: promote call round trip max", unit: "ms", scale: 1e3},
	{scenario: "backlog", key: "base_canary_p99", label: "  nothing waiting: a 1 ms sleep's overshoot p99", unit: "ms", scale: 1e3},
	{scenario: "backlog", key: "base_canary_max", label: "  nothing waiting: a 1 ms sleep's overshoot max", unit: "ms", scale: 1e3},
	{scenario: "backlog", key: "base_slow_promote", label: "  nothing waiting: promote calls over 1 ms in Redis, worst run", unit: "", scale: 1, agg: "max"},
	{scenario: "backlog", key: "base_early_pct", label: "  nothing waiting: % early, worst run", unit: "%", scale: 1, agg: "max"},
	{scenario: "backlog", key: "base_redis_cpu_per_msg", label: "  nothing waiting: Redis CPU / msg", unit: "µs", scale: 1e6},
	{scenario: "backlog", key: "base_zrangebyscore_usec", label: "  nothing waiting: ZRANGEBYSCORE Redis µs / call", unit: "µs", scale: 1e6},
	{scenario: "backlog", key: "base_zremrangebyrank_usec", label: "  nothing waiting: ZREMRANGEBYRANK Redis µs / call", unit: "µs", scale: 1e6},
	{scenario: "backlog", key: "base_zrange_usec", label: "  nothing waiting: ZRANGE Redis µs / call", unit: "µs", scale: 1e6},
	{scenario: "backlog", key: "base_zadd_usec", label: "  nothing waiting: ZADD Redis µs / call", unit: "µs", scale: 1e6},

	// burst1m: -burst1m-n messages due at one instant; delaystream only.
	{scenario: "burst1m", key: "sched_rate", label: "schedule rate (ScheduleBatch)", unit: "msg/s", scale: 1, better: +1},
	{scenario: "burst1m", key: "first_after_due", label: "due -> first delivery", unit: "ms", scale: 1e3, better: -1},
	{scenario: "burst1m", key: "last_after_due", label: "due -> last delivery", unit: "ms", scale: 1e3, better: -1},
	{scenario: "burst1m", key: "deliver_rate", label: "delivery rate (first -> last delivery)", unit: "msg/s", scale: 1, better: +1},
	{scenario: "burst1m", key: "e2e_rate", label: "delivery rate (due -> last delivery)", unit: "msg/s", scale: 1, better: +1},
	{scenario: "burst1m", key: "lat_p50", label: "lateness p50", unit: "ms", scale: 1e3, better: -1},
	{scenario: "burst1m", key: "lat_p99", label: "lateness p99", unit: "ms", scale: 1e3, better: -1},
	{scenario: "burst1m", key: "promote_p99", label: "  split p99: due -> appended to stream (mover)", unit: "ms", scale: 1e3},
	{scenario: "burst1m", key: "consume_p99", label: "  split p99: appended -> handler (consumer)", unit: "ms", scale: 1e3},
	{scenario: "burst1m", key: "early", label: "early (local clock), worst run", unit: "", scale: 1, agg: "max", op: "==", target: 0},
	{scenario: "burst1m", key: "lost", label: "lost, worst run", unit: "", scale: 1, agg: "max", op: "==", target: 0},
	{scenario: "burst1m", key: "dups", label: "duplicates, worst run", unit: "", scale: 1, agg: "max", op: "==", target: 0},
	{scenario: "burst1m", key: "mem_before", label: "Redis used_memory before filling", unit: "MB", scale: 1.0 / (1 << 20)},
	{scenario: "burst1m", key: "mem_waiting", label: "Redis used_memory after filling (all waiting)", unit: "MB", scale: 1.0 / (1 << 20)},
	{scenario: "burst1m", key: "mem_peak", label: "Redis used_memory peak while draining (sampled every 50 ms)", unit: "MB", scale: 1.0 / (1 << 20), better: -1},
	{scenario: "burst1m", key: "mem_delivered", label: "Redis used_memory when all delivered", unit: "MB", scale: 1.0 / (1 << 20)},
	{scenario: "burst1m", key: "mem_end", label: "Redis used_memory when trimmed (or -trim-wait later)", unit: "MB", scale: 1.0 / (1 << 20)},
	{scenario: "burst1m", key: "xlen_peak", label: "stream length peak (sampled, until trimmed)", unit: "", scale: 1, better: -1},
	{scenario: "burst1m", key: "xlen_peak_ratio", label: "  stream length peak / n", unit: "%", scale: 100, better: -1},
	{scenario: "burst1m", key: "xlen_delivered", label: "  stream length when all delivered", unit: "", scale: 1, better: -1},
	{scenario: "burst1m", key: "trimmed_after", label: "  all delivered -> stream below 1 % of n", unit: "s", scale: 1, better: -1},
	{scenario: "burst1m", key: "entry_bytes", label: "one stream entry (scratch stream, used_memory delta)", unit: "B", scale: 1},
	{scenario: "burst1m", key: "entries_worth", label: "n entries' worth (n x one entry)", unit: "MB", scale: 1.0 / (1 << 20)},
	{scenario: "burst1m", key: "beyond_peak", label: "peak beyond the waiting set (used - before - waiting x B/waiting msg)", unit: "MB", scale: 1.0 / (1 << 20), better: -1},
	{scenario: "burst1m", key: "beyond_ratio", label: "  peak beyond the waiting set / n entries' worth", unit: "%", scale: 100, better: -1},
	{scenario: "burst1m", key: "peak_over_waiting", label: "  peak / all-waiting (both above the before-fill baseline)", unit: "", scale: 1, better: -1},
	{scenario: "burst1m", key: "cmds_per_msg", label: "Redis commands / delivered msg (incl. in scripts)", unit: "", scale: 1, better: -1},
	{scenario: "burst1m", key: "redis_cpu_per_msg", label: "Redis CPU / delivered msg", unit: "µs", scale: 1e6, better: -1},
	{scenario: "burst1m", key: "client_cpu_per_msg", label: "client CPU / delivered msg", unit: "µs", scale: 1e6, better: -1},

	// cluster: systems are the deployments of clusterSpecs ("S=1 1+1",
	// "S=16 1+1", "S=1 2+2", "S=16 2+2"), delaystream only; printed by
	// printClusterTable. Costs are summed over the masters.
	{scenario: "cluster", key: "burst_sched_rate", label: "burst: schedule rate (ScheduleBatch)", unit: "msg/s", scale: 1, better: +1},
	{scenario: "cluster", key: "burst_e2e_rate", label: "burst: delivered msg/s (due -> last handled)", unit: "msg/s", scale: 1, better: +1},
	{scenario: "cluster", key: "burst_deliver_rate", label: "  delivered msg/s (first -> last handled)", unit: "msg/s", scale: 1, better: +1},
	{scenario: "cluster", key: "burst_last_after_due", label: "  due -> last handled", unit: "ms", scale: 1e3, better: -1},
	{scenario: "cluster", key: "burst_lat_p50", label: "burst: lateness p50", unit: "ms", scale: 1e3, better: -1},
	{scenario: "cluster", key: "burst_lat_p99", label: "burst: lateness p99", unit: "ms", scale: 1e3, better: -1},
	{scenario: "cluster", key: "burst_promote_p99", label: "  split p99: due -> appended to stream (movers)", unit: "ms", scale: 1e3, better: -1},
	{scenario: "cluster", key: "burst_consume_p99", label: "  split p99: appended -> handler (consumers)", unit: "ms", scale: 1e3, better: -1},
	{scenario: "cluster", key: "burst_early", label: "burst: early, worst run", unit: "", scale: 1, agg: "max", op: "==", target: 0},
	{scenario: "cluster", key: "burst_lost", label: "burst: lost, worst run", unit: "", scale: 1, agg: "max", op: "==", target: 0},
	{scenario: "cluster", key: "burst_dups", label: "burst: duplicates, worst run", unit: "", scale: 1, agg: "max", op: "==", target: 0},
	{scenario: "cluster", key: "burst_redis_cpu_per_msg", label: "burst: Redis CPU / delivered msg (sum over masters)", unit: "µs", scale: 1e6, better: -1},
	{scenario: "cluster", key: "burst_cmds_per_msg", label: "burst: Redis commands / delivered msg (incl. in scripts)", unit: "", scale: 1, better: -1},
	{scenario: "cluster", key: "burst_client_cpu_per_msg", label: "burst: client CPU / delivered msg", unit: "µs", scale: 1e6, better: -1},
	{scenario: "cluster", key: "burst_share_min", label: "burst: least-loaded master's share of commands, % of even", unit: "%", scale: 1},
	{scenario: "cluster", key: "burst_share_max", label: "burst: most-loaded master's share of commands, % of even", unit: "%", scale: 1},
	{scenario: "cluster", key: "burst_conns_node_max", label: "burst: bench client's connections, busiest master (peak)", unit: "", scale: 1},
	{scenario: "cluster", key: "burst_conns_total", label: "burst: bench client's connections, all masters (sum of peaks)", unit: "", scale: 1},
	{scenario: "cluster", key: "trickle_lat_p50", label: "trickle: lateness p50", unit: "ms", scale: 1e3, better: -1},
	{scenario: "cluster", key: "trickle_lat_p99", label: "trickle: lateness p99", unit: "ms", scale: 1e3, better: -1, op: "<=", target: 5},
	{scenario: "cluster", key: "trickle_lat_max", label: "trickle: lateness max", unit: "ms", scale: 1e3, better: -1},
	{scenario: "cluster", key: "trickle_promote_p50", label: "  split p50: due -> appended to stream (movers)", unit: "ms", scale: 1e3, better: -1},
	{scenario: "cluster", key: "trickle_promote_p99", label: "  split p99: due -> appended to stream (movers)", unit: "ms", scale: 1e3, better: -1},
	{scenario: "cluster", key: "trickle_consume_p50", label: "  split p50: appended -> handler (consumers)", unit: "ms", scale: 1e3, better: -1},
	{scenario: "cluster", key: "trickle_consume_p99", label: "  split p99: appended -> handler (consumers)", unit: "ms", scale: 1e3, better: -1},
	{scenario: "cluster", key: "trickle_early", label: "trickle: early (local clock), worst run", unit: "", scale: 1, agg: "max", op: "==", target: 0},
	{scenario: "cluster", key: "trickle_early_redis", label: "trickle: appended before due (Redis clock), worst run", unit: "", scale: 1, agg: "max", op: "==", target: 0},
	{scenario: "cluster", key: "trickle_lost", label: "trickle: lost, worst run", unit: "", scale: 1, agg: "max", op: "==", target: 0},
	{scenario: "cluster", key: "trickle_dups", label: "trickle: duplicates, worst run", unit: "", scale: 1, agg: "max", op: "==", target: 0},
	{scenario: "cluster", key: "trickle_redis_cpu_per_msg", label: "trickle: Redis CPU / msg (sum over masters)", unit: "µs", scale: 1e6, better: -1},
	{scenario: "cluster", key: "trickle_cmds_per_msg", label: "trickle: Redis commands / msg (incl. in scripts)", unit: "", scale: 1, better: -1},
	{scenario: "cluster", key: "trickle_reads_per_msg", label: "  read events / msg (INFO total_reads_processed)", unit: "", scale: 1, better: -1},
	{scenario: "cluster", key: "trickle_writes_per_msg", label: "  write events / msg (INFO total_writes_processed)", unit: "", scale: 1, better: -1},
	{scenario: "cluster", key: "trickle_client_cpu_per_msg", label: "trickle: client CPU / msg", unit: "µs", scale: 1e6, better: -1},
	{scenario: "cluster", key: "trickle_share_min", label: "trickle: least-loaded master's share of commands, % of even", unit: "%", scale: 1},
	{scenario: "cluster", key: "trickle_share_max", label: "trickle: most-loaded master's share of commands, % of even", unit: "%", scale: 1},
	{scenario: "cluster", key: "trickle_conns_node_max", label: "trickle: bench client's connections, busiest master (peak)", unit: "", scale: 1},
	{scenario: "cluster", key: "trickle_conns_total", label: "trickle: bench client's connections, all masters (sum of peaks)", unit: "", scale: 1},
}

// clusterCostKeys are the per-message costs whose sharded / unsharded
// ratios (clusterPairs) are judged against "within 20 %".
var clusterCostKeys = map[string]bool{
	"burst_redis_cpu_per_msg": true, "burst_cmds_per_msg": true,
	"trickle_redis_cpu_per_msg": true, "trickle_cmds_per_msg": true,
}

// results collects run values and notes.
type results struct {
	vals  map[string]map[string]map[string][]float64 // scenario -> system -> key -> runs
	notes []noteLine
	runs  []map[string]any
}

type noteLine struct{ scenario, system, text string }

func newResults() *results {
	return &results{vals: map[string]map[string]map[string][]float64{}}
}

func (r *results) add(scenario, system string, run int, vals map[string]float64) {
	if r.vals[scenario] == nil {
		r.vals[scenario] = map[string]map[string][]float64{}
	}
	if r.vals[scenario][system] == nil {
		r.vals[scenario][system] = map[string][]float64{}
	}
	for k, v := range vals {
		r.vals[scenario][system][k] = append(r.vals[scenario][system][k], v)
	}
	r.runs = append(r.runs, map[string]any{"type": "run", "scenario": scenario, "system": system, "run": run, "metrics": jsonVals(vals)})
}

func jsonVals(m map[string]float64) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			out[k] = nil
		} else {
			out[k] = v
		}
	}
	return out
}

func (r *results) note(scenario, system, text string) {
	r.notes = append(r.notes, noteLine{scenario, system, text})
}

// value returns the aggregate of a metric, NaN when absent.
func (r *results) value(m metricDef, system string) (float64, []float64) {
	xs := r.vals[m.scenario][system][m.key]
	if len(xs) == 0 {
		return math.NaN(), nil
	}
	if m.agg == "max" {
		v := math.NaN()
		for _, x := range xs {
			if !math.IsNaN(x) && (math.IsNaN(v) || x > v) {
				v = x
			}
		}
		return v, xs
	}
	return median(xs), xs
}

func fmtVal(v float64, m metricDef) string {
	if math.IsNaN(v) {
		return "-"
	}
	v *= m.scale
	switch {
	case m.unit == "msg/s" && v >= 10000:
		return fmt.Sprintf("%.0fk %s", v/1000, m.unit)
	case m.unit == "msg/s":
		return fmt.Sprintf("%.0f %s", v, m.unit)
	case m.unit == "":
		if v == math.Trunc(v) {
			return fmt.Sprintf("%.0f", v)
		}
		return fmt.Sprintf("%.2f", v)
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f %s", v, m.unit)
	case math.Abs(v) >= 10:
		return fmt.Sprintf("%.1f %s", v, m.unit)
	default:
		return fmt.Sprintf("%.2f %s", v, m.unit)
	}
}

func (m metricDef) targetString() string {
	if m.op == "" {
		return ""
	}
	t := fmtVal(m.target/m.scale, m)
	switch m.op {
	case "==":
		return "= " + t
	case ">=":
		return "≥ " + t
	default:
		return "≤ " + t
	}
}

// met reports whether v (raw) meets m's target; "" when there is none or no value.
func (m metricDef) met(v float64) string {
	if m.op == "" || math.IsNaN(v) {
		return ""
	}
	d := v * m.scale
	ok := false
	switch m.op {
	case ">=":
		ok = d >= m.target
	case "<=":
		ok = d <= m.target
	case "==":
		ok = d == m.target
	}
	if ok {
		return "yes"
	}
	return "NO"
}

// ratio is "how many times better delaystream is than asynq" (> 1 = better).
func (m metricDef) ratio(ds, as float64) string {
	if m.better == 0 || math.IsNaN(ds) || math.IsNaN(as) || ds == 0 || as == 0 {
		return ""
	}
	x := ds / as
	if m.better < 0 {
		x = as / ds
	}
	if x <= 0 {
		return ""
	}
	if x >= 100 {
		return fmt.Sprintf("%.0fx", x)
	}
	return fmt.Sprintf("%.1fx", x)
}

func printTable(w io.Writer, r *results, cfg config) {
	other := false
	for sc := range r.vals {
		other = other || !ownTable[sc]
	}
	if !other {
		return
	}
	systems := []string{sysDS}
	if cfg.asynq {
		systems = append(systems, sysAsynq)
	}
	if cfg.raw && (cfg.only["burst"] || cfg.only["trickle"] || cfg.only["crash"]) {
		systems = append(systems, sysRaw)
	}
	if cfg.floor && cfg.only["trickle"] {
		systems = append(systems, sysFloor)
	}
	fmt.Fprintf(w, "Medians of %d runs (crash: %d runs); \"worst run\" rows show the maximum. Ratio = how many times better delaystream is than asynq (> 1: delaystream better).\n\n", cfg.runs, cfg.crashRuns)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	hdr := []string{"scenario", "metric"}
	hdr = append(hdr, systems...)
	if cfg.asynq {
		hdr = append(hdr, "ds vs asynq")
	}
	hdr = append(hdr, "target", "met")
	fmt.Fprintln(tw, strings.Join(hdr, "\t"))
	last := ""
	for _, m := range metrics {
		if r.vals[m.scenario] == nil {
			continue
		}
		any := false
		for _, s := range systems {
			if v, _ := r.value(m, s); !math.IsNaN(v) {
				any = true
			}
		}
		if !any {
			continue
		}
		sc := m.scenario
		if sc == last {
			sc = ""
		}
		last = m.scenario
		row := []string{sc, m.label}
		dsv, _ := r.value(m, sysDS)
		for _, s := range systems {
			v, _ := r.value(m, s)
			row = append(row, fmtVal(v, m))
		}
		if cfg.asynq {
			as, _ := r.value(m, sysAsynq)
			row = append(row, m.ratio(dsv, as))
		}
		row = append(row, m.targetString(), m.met(dsv))
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	tw.Flush()
	printNotes(w, r, func(sc string) bool { return !ownTable[sc] })
}

// ownTable are the scenarios printed by a table of their own.
var ownTable = map[string]bool{"cluster": true, "curve": true, "crashdup": true}

func printNotes(w io.Writer, r *results, keep func(scenario string) bool) {
	head := false
	for _, n := range r.notes {
		if !keep(n.scenario) {
			continue
		}
		if !head {
			fmt.Fprintln(w, "\nNotes:")
			head = true
		}
		fmt.Fprintf(w, "  [%s/%s] %s\n", n.scenario, n.system, n.text)
	}
}

// printClusterTable prints the cluster scenario: one column per system of
// clusterSpecs, then for each team (movers + consumers) the ratio of the
// sharded to the unsharded system (for costs: > 1 = the sharded queue
// costs more per message) with, for Redis CPU and commands per message,
// whether it stays within 20 %, then the target and whether each sharded
// system meets it.
func printClusterTable(w io.Writer, r *results, cfg config) {
	if r.vals["cluster"] == nil && !slices.ContainsFunc(r.notes, func(n noteLine) bool { return n.scenario == "cluster" }) {
		return
	}
	systems := clusterSystems()
	pairs := clusterPairs()
	var sharded []string
	for _, s := range clusterSpecs {
		if s.shards > 1 {
			sharded = append(sharded, s.name())
		}
	}
	fmt.Fprintf(w, "\nCluster (delaystream only; Redis Cluster of %d masters, no replicas): medians of %d runs; \"worst run\" rows show the maximum.\n", clusterMasters, cfg.runs)
	for _, s := range clusterSpecs {
		fmt.Fprintf(w, "  %s\n", s.describe())
	}
	fmt.Fprintf(w, "%d workers per consumer. Costs are summed over the masters; a master's share of commands is in %% of an even share (100 %% = 1/%d of all commands).\n", cfg.workers, clusterMasters)
	var ratios []string
	for _, p := range pairs {
		ratios = append(ratios, fmt.Sprintf("%s = %s / %s", p.label, p.num.name(), p.den.name()))
	}
	fmt.Fprintf(w, "Ratios: %s (costs: > 1 = the sharded queue costs more per message; same movers and consumers on both sides).\n\n", strings.Join(ratios, "; "))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	hdr := append([]string{"metric"}, systems...)
	for _, p := range pairs {
		hdr = append(hdr, p.label, "within 20 %")
	}
	hdr = append(hdr, "target")
	for _, s := range sharded {
		hdr = append(hdr, "met ("+s+")")
	}
	fmt.Fprintln(tw, strings.Join(hdr, "\t"))
	for _, m := range metrics {
		if m.scenario != "cluster" {
			continue
		}
		row := []string{m.label}
		for _, s := range systems {
			v, _ := r.value(m, s)
			row = append(row, fmtVal(v, m))
		}
		for _, p := range pairs {
			a, _ := r.value(m, p.den.name())
			z, _ := r.value(m, p.num.name())
			ratio, within := clusterRatio(m, a, z)
			row = append(row, ratio, within)
		}
		row = append(row, m.targetString())
		for _, s := range sharded {
			v, _ := r.value(m, s)
			row = append(row, m.met(v))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	tw.Flush()
	printNotes(w, r, func(sc string) bool { return sc == "cluster" })
}

// clusterRatio returns z / a (sharded over unsharded) for a metric with a
// direction, and for the costs of clusterCostKeys whether it is within 20 %.
func clusterRatio(m metricDef, a, z float64) (ratio, within string) {
	if m.better == 0 || math.IsNaN(a) || math.IsNaN(z) || a == 0 {
		return "", ""
	}
	ratio = fmt.Sprintf("%.2f", z/a)
	if clusterCostKeys[m.key] {
		within = "yes"
		if z/a > 1.2 {
			within = "NO"
		}
	}
	return ratio, within
}

func (r *results) printJSON(w io.Writer) {
	enc := json.NewEncoder(w)
	for _, run := range r.runs {
		_ = enc.Encode(run)
	}
	for _, m := range metrics {
		for sys := range r.vals[m.scenario] {
			v, runs := r.value(m, sys)
			if runs == nil {
				continue
			}
			line := map[string]any{"type": "metric", "scenario": m.scenario, "system": sys, "metric": m.key,
				"label": strings.TrimSpace(m.label), "unit": m.unit, "scale": m.scale, "agg": aggName(m)}
			line["value"] = jsonNum(v)
			rs := make([]any, len(runs))
			for i, x := range runs {
				rs[i] = jsonNum(x)
			}
			line["runs"] = rs
			if (sys == sysDS || m.scenario == "cluster") && m.op != "" {
				line["target"] = m.targetString()
				line["met"] = m.met(v) == "yes"
			}
			_ = enc.Encode(line)
		}
	}
	for _, n := range r.notes {
		_ = enc.Encode(map[string]any{"type": "note", "scenario": n.scenario, "system": n.system, "text": n.text})
	}
}

func aggName(m metricDef) string {
	if m.agg == "" {
		return "median"
	}
	return m.agg
}

func jsonNum(v float64) any {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return v
}

func printHeader(w io.Writer, m machine, cfg config) {
	fmt.Fprintf(w, "delaystream benchmark — %s\n", m.Date)
	fmt.Fprintf(w, "machine: %d CPUs (%s), kernel %s, load avg %s\n", m.CPUs, m.CPUModel, m.Kernel, m.LoadAvg)
	srv := "own redis-server, persistence off"
	if !m.OwnServer {
		srv = "REDIS_ADDR"
	}
	fmt.Fprintf(w, "software: %s (GOMAXPROCS %d), Redis %s at %s (%s), go-redis %s, asynq %s\n",
		m.GoVersion, m.GOMAXPROCS, m.Redis, m.RedisAddr, srv, m.GoRedis, m.Asynq)
	fmt.Fprintf(w, "library: %s\n", m.Library)
	fmt.Fprintf(w, "settings: burst n=%d, trickle %d msg/s for %s (delays uniform in [0, 3 s]), payload %d B, %d workers, runs %d, memory n=%d, idle window %s\n",
		cfg.n, cfg.rate, cfg.duration, cfg.payload, cfg.workers, cfg.runs, cfg.memN, cfg.idle)
	if cfg.dsMaxRetries != 0 {
		fmt.Fprintf(w, "delaystream's client: go-redis MaxRetries %d (-1: no command is resent, so Schedule carries no call token)\n", cfg.dsMaxRetries)
	}
	if cfg.only["backlog"] {
		where := "in the trickle's queue"
		if cfg.backlogElsewhere {
			where = "in another queue of the same Redis (-backlog-elsewhere)"
		}
		fmt.Fprintf(w, "backlog: %d messages waiting (due in 1 h) %s, under the trickle (%d msg/s for %s)\n", cfg.backlogN, where, cfg.rate, cfg.duration)
	}
	if cfg.only["burst1m"] {
		fmt.Fprintf(w, "burst1m: n=%d due at one instant\n", cfg.bigN)
	}
	if cfg.only["curve"] {
		fmt.Fprintf(w, "curve: trickle at %v msg/s per rate and system for %s\n", cfg.curveRates, cfg.curveWindows())
		if cfg.curveQueues > 1 {
			fmt.Fprintf(w, "curve: each rate spread over %d queues, one message to each in turn; delaystream there: a Queue per queue with 1 group that promotes it (WithWorkers(%d); no mover.Mover: not the delaystream line's setup); asynq: one Server serving them all (weight 1 each); the floors as on one queue\n", cfg.curveQueues, cfg.workers)
		}
		if cfg.curveLead > 0 {
			fmt.Fprintf(w, "curve: every message due %s plus [0, 3 s] after its call; each window measured in steady state, from %s after the first call\n", cfg.curveLead, cfg.curveLead+3*time.Second)
		}
	}
	mb := "default"
	if cfg.moverBatch > 0 {
		mb = fmt.Sprint(cfg.moverBatch)
	}
	sh := ""
	if cfg.shards > 1 {
		sh = fmt.Sprintf(", queue of %d shards on this one server (WithShards on queue, mover and consumer)", cfg.shards)
	}
	if cfg.consumerPromotes {
		fmt.Fprintf(w, "delaystream: 1 group.Consumer that promotes its queue (WithWorkers(%d), other options default; no mover.Mover), ScheduleBatch of %d items%s\n", cfg.workers, cfg.batch, sh)
	} else {
		fmt.Fprintf(w, "delaystream: 1 mover.Mover (batch %s) + 1 group.Consumer (WithWorkers(%d), other options default), ScheduleBatch of %d items%s\n", mb, cfg.workers, cfg.batch, sh)
	}
	if cfg.asynq {
		fmt.Fprintf(w, "asynq: Config{Concurrency: %d, TaskCheckInterval: 100ms, DelayedTaskCheckInterval: 100ms, RetryDelayFunc: 0 for ErrLeaseExpired}, ProcessAt/ProcessIn, Enqueue on %d goroutines for bulk\n",
			cfg.workers, cfg.parallel)
	}
	if cfg.floor && (cfg.only["trickle"] || cfg.only["curve"]) {
		fmt.Fprintln(w, "rt-floor (trickle, curve; not a queue): the producer SETs each message, a client-side timer GETDELs it at its due time on a second client: two round trips per message, no promotion, no stream, no ack; the least Redis CPU per message of any design whose producer makes one call per message and whose consumer one read per message")
	}
	fmt.Fprintln(w, "lateness = handler receive time (local clock) - due; delaystream due = group.Message.Due (stored due, ms, Redis clock on this same host); asynq due = the time passed to ProcessAt / now+ProcessIn, carried in the payload")
}
