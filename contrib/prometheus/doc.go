// Package dsprom exports delaystream's metrics to Prometheus
// (prometheus/client_golang): a [Metrics] collector fed by the hooks of
// package delaystream, plus gauges read from Redis at each scrape through
// package admin. It lives in its own module
// (github.com/delaystream/delaystream/contrib/prometheus), so the core
// never depends on client_golang.
//
// # Wiring
//
// One Metrics per process, registered once; its mover hooks go into each
// queue, its group hooks into each consumer group, and [Metrics.Watch]
// names the queues whose figures a scrape reads:
//
//	m, err := dsprom.New()
//	prometheus.MustRegister(m)
//	q, err := delaystream.New(rdb, "orders", delaystream.WithMoverHooks(m.MoverHooks("orders")))
//	_, err = q.Handle("billing", bill, delaystream.WithHooks(m.GroupHooks("orders", "billing")))
//	err = m.Watch(rdb, "", "orders") // "": the default prefix, as without delaystream.WithPrefix
//
// The hooks only add to counters and histograms resolved when the hooks
// are made: no lock, no allocation, no Redis call per message. A hook
// field the adapter sets can be chained with your own by wrapping it.
// Watch takes queue names, not queues: an exporter process that runs no
// queue of its own can watch any queue under a prefix.
//
// # Metrics
//
// Names start with the namespace ([WithNamespace], default "delaystream").
// Labels: queue (as given to the hooks and to Watch), group, lane ("main":
// a first attempt from the queue stream, "retry": a later attempt from the
// group's retry lane), outcome (delaystream.HandlerOutcome's String:
// acked, retried, dead_lettered, dropped, reclaimed, handed_back,
// unsettled), reason (the dead-letter reason, see below) and stuck (true,
// false).
//
//	name                            type       labels                 from
//	promotion_lag_seconds           histogram  queue, group, lane     due → appended to the stream (Redis clock), at each entry's first delivery to the group
//	delivery_lag_seconds            histogram  queue, group, lane     due → handler start, per delivery
//	handler_duration_seconds        histogram  queue, group, outcome  the handler's run time, by outcome
//	dead_lettered_total             counter    queue, group, reason   entries dead-lettered (also those whose handler never ran)
//	reclaimed_total                 counter    queue, group           pending entries taken over from other consumers
//	deleted_while_pending_total     counter    queue, group           pending entries found deleted from the stream
//	group_data_loss_total           counter    queue, group           Redis lost the queue's data (seen by a consumer)
//	group_limit_wait_seconds_total  counter    queue, group           time waited, workers free, for the group's flow limits
//	mover_promoted_total            counter    queue                  due messages appended to the queue stream
//	mover_quarantined_total         counter    queue                  unreadable waiting members set aside
//	mover_batch_size                histogram  queue                  entries appended per promote call
//	mover_promote_duration_seconds  histogram  queue                  promote script call time, round trip included
//	mover_errors_total              counter    queue, stuck           failed promote calls and registry beats
//	mover_owned_shards              gauge      queue                  shards this process's mover promotes
//	mover_data_loss_total           counter    queue                  Redis lost the queue's data (seen by the mover)
//	queue_waiting_messages          gauge      queue                  scrape: scheduled, not yet promoted
//	queue_overdue_messages          gauge      queue                  scrape: waiting past their due time
//	queue_overdue_seconds           gauge      queue                  scrape: how long the earliest waiting message has been due
//	queue_stream_entries            gauge      queue                  scrape: queue stream length, over every shard
//	queue_quarantined_entries       gauge      queue                  scrape: entries in the queue's quarantine
//	group_consumers                 gauge      queue, group           scrape: consumers known to the group
//	group_pending_messages          gauge      queue, group           scrape: delivered, not acknowledged
//	group_oldest_pending_seconds    gauge      queue, group           scrape: time since the oldest pending entry was appended
//	group_lag_messages              gauge      queue, group           scrape: stream entries not yet delivered to the group
//	group_retry_waiting_messages    gauge      queue, group           scrape: messages waiting in the retry lane
//	group_dead_letters              gauge      queue, group           scrape: entries in the dead-letter stream
//	queue_recurring_schedules       gauge      queue                  scrape: recurring schedules defined
//	recurring_next_occurrence_timestamp_seconds  gauge  queue, schedule  scrape: Unix time of the next occurrence (absent when paused)
//	recurring_last_occurrence_timestamp_seconds  gauge  queue, schedule  scrape: Unix time of the latest occurrence due so far
//	recurring_last_lateness_seconds              gauge  queue, schedule  scrape: how late the latest occurrence was appended to the stream
//	recurring_paused                             gauge  queue, schedule  scrape: 1 when paused
//	recurring_paused_schedules      gauge      queue                  scrape: recurring schedules paused
//	recurring_max_lateness_seconds  gauge      queue                  scrape: the most any schedule's latest occurrence was late
//	queue_paused_seconds            gauge      queue                  scrape: how long the queue's promotion has been paused; 0 when not
//	group_paused_seconds            gauge      queue, group           scrape: how long the group has been paused; 0 when not
//	group_concurrency_limit         gauge      queue, group           scrape: the group's concurrency cap (absent: none)
//	group_concurrency_slots_held    gauge      queue, group           scrape: slots its live consumers hold (absent: no cap)
//	group_rate_limit_per_second     gauge      queue, group           scrape: the group's rate limit (absent: none)
//	group_rate_limit_burst          gauge      queue, group           scrape: the rate limit's burst (absent: none)
//	queue_evicting_servers          gauge      queue                  scrape: servers holding the queue that can evict its keys
//	stats_errors_total              counter    queue                  scrape: reads of a queue's figures that failed or timed out
//	discovery_errors_total          counter    -                      scrape: discoveries of the queues under a prefix that failed
//	redis_memory_used_bytes         gauge      server                 scrape: the server's used_memory
//	redis_memory_max_bytes          gauge      server                 scrape: the server's maxmemory (0: no limit)
//	redis_memory_evicts             gauge      server                 scrape: 1 when its maxmemory-policy can evict keys
//	queue_figures_age_seconds       gauge      queue                  scrape: since the queue's figures were read (0: this scrape)
//	up                              gauge      -                      scrape: 1 when every read from Redis succeeded, else 0
//
// The four recurring_* series labelled by schedule exist for a queue with
// at most [DefaultMaxScheduleSeries] schedules ([WithMaxScheduleSeries]):
// a queue with more reports only the per-queue aggregates, so that
// thousands of schedules cannot make thousands of series.
//
// The mover_* series of a queue exist, at 0, from its MoverHooks call, the
// group series from GroupHooks (every outcome and reason label value
// included), and stats_errors_total from Watch: an alert on their rate
// needs no first event. The scrape gauges cover every consumer group
// found on a watched queue's streams, whether or not this process handles
// it.
//
// Lag histograms use [LagBuckets] (1 ms to 5 min) by default, handler
// durations [DurationBuckets] (1 ms to 1 min); the mover's use
// [PromoteBuckets] and [BatchBuckets].
//
// The promotion lag is computed by the consumers, not the mover: the
// entry id's time is when Redis appended the entry, and the message's due
// time is by the Redis clock too, so no host's clock skews it. Each group
// observes it once per entry (on the first delivery; a retry's promotion
// from the group's retry lane counts as lane "retry"), so with n groups a
// message is observed n times. The delivery lag ends on this host's clock;
// skew shows in it, and a negative value (skew only) is observed as 0.
//
// A scrape that cannot read Redis (a server down, a timeout) still
// answers with every series: up is 0, the series it could not read repeat
// the last figures read (queue_figures_age_seconds says how old they are,
// per queue), and the counters and histograms are there as ever. An alert
// on a queue's gauge (overdue, say) neither goes quiet nor fires anew
// while Redis is down; alert on up == 0 for that. A queue or server never
// read has no series until it is. The server label is the address the
// client reaches the server at (each master of a Cluster).
//
// The scrape gauges report the shared state of Redis: every process that
// watches a queue reports the same values, so aggregate them with max, not
// sum. Counters and histograms are this process's: sum them.
//
// # Dead-letter reasons
//
// The reason label is a short name for each dead-letter reason that
// package delaystream stores with a dead letter (DeadLetterEntry.Reason) and
// that package admin and the delaystream command list and filter by:
//
//	label        constant                      stored reason
//	attempts     delaystream.ReasonAttempts    "attempts exhausted"
//	deliveries   delaystream.ReasonDeliveries  "max deliveries exceeded"
//	handler      delaystream.ReasonHandler     "handler asked to dead-letter"
//	undecodable  delaystream.ReasonUndecodable "undecodable entry"
//	deleted      delaystream.ReasonDeleted     "entry deleted while pending"
//	expired      delaystream.ReasonExpired     "expired"
//	other        -                             any reason this release does not know
//
// Short names keep the label values Prometheus-style (no spaces, stable
// in PromQL and dashboards) and equal to the delaystream.reason attribute
// of contrib/otel; "other" keeps the label's values a fixed, bounded set.
// To list the dead letters behind a series, filter by the stored reason:
// admin.ListOptions{Reason: delaystream.ReasonAttempts}.
package dsprom
