// Package dsotel instruments delaystream with OpenTelemetry (the Go API:
// go.opentelemetry.io/otel): metrics fed by the core's hooks, observable
// gauges read from Redis at each collection, and tracing across the delay.
// It lives in its own module
// (github.com/delaystream/delaystream/contrib/otel), so the core never
// depends on OpenTelemetry.
//
// # Wiring
//
// One [Telemetry] per process. [Telemetry.MoverHooks] goes into the queue
// (delaystream.WithMoverHooks), and into each group its
// [Telemetry.GroupHooks] (delaystream.WithHooks) and the tracing
// [Telemetry.Middleware] (delaystream.WithMiddleware);
// [Telemetry.Watch] names the queues and groups whose figures a
// collection reads, and [Telemetry.Schedule] (or [Telemetry.Inject])
// carries the producer's trace context in the message headers:
//
//	tel, err := dsotel.New() // the global meter and tracer providers; WithMeterProvider, WithTracerProvider
//	q, err := delaystream.New(rdb, "orders", delaystream.WithMoverHooks(tel.MoverHooks("orders")))
//	billing, err := q.Handle("billing", bill,
//		delaystream.WithHooks(tel.GroupHooks("orders", "billing")),
//		delaystream.WithMiddleware(tel.Middleware("orders")))
//	err = tel.Watch(q, billing)
//	res, err := tel.Schedule(ctx, q, delaystream.Message{ID: "order:5001:cancel"}, delaystream.After(30*time.Minute))
//
// # Metrics
//
// The metrics of the Prometheus adapter (contrib/prometheus), named after
// OpenTelemetry's conventions, but for the queue stream's length and
// quarantine, which package delaystream does not report. Attributes:
// messaging.destination.name (the queue, as given to the hooks and to
// Watch), messaging.consumer.group.name (the group), delaystream.lane
// ("main": a first attempt from the queue stream, "retry": a later one
// from the group's retry lane), delaystream.outcome
// (delaystream.HandlerOutcome's String), delaystream.reason (attempts,
// deliveries, handler, undecodable, deleted, expired, other),
// delaystream.stuck (bool).
//
//	instrument                            kind                    unit        attributes             from
//	delaystream.promotion.lag             Float64Histogram        s           queue, group, lane     due → appended to the stream (Redis clock), at each entry's first delivery to the group
//	delaystream.delivery.lag              Float64Histogram        s           queue, group, lane     due → handler start, per delivery
//	delaystream.handler.duration          Float64Histogram        s           queue, group, outcome  the handler's run time, by outcome
//	delaystream.dead_lettered             Int64Counter            {message}   queue, group, reason   entries dead-lettered (also those whose handler never ran)
//	delaystream.reclaimed                 Int64Counter            {message}   queue, group           pending entries taken over from other consumers
//	delaystream.deleted_while_pending     Int64Counter            {message}   queue, group           pending entries found deleted from the stream
//	delaystream.group.data_loss           Int64Counter            {event}     queue, group           Redis lost the queue's data (seen by a consumer)
//	delaystream.group.limit_wait          Float64Counter          s           queue, group           time waited, workers free, for the group's flow limits
//	delaystream.mover.promoted            Int64Counter            {message}   queue                  due messages appended to the queue stream
//	delaystream.mover.quarantined         Int64Counter            {message}   queue                  unreadable waiting members set aside
//	delaystream.mover.batch_size          Int64Histogram          {message}   queue                  entries appended per promote call
//	delaystream.mover.promote.duration    Float64Histogram        s           queue                  promote script call time, round trip included
//	delaystream.mover.errors              Int64Counter            {error}     queue, stuck           failed promote calls and registry beats
//	delaystream.mover.owned_shards        Int64Gauge              {shard}     queue                  shards this process's mover promotes
//	delaystream.mover.data_loss           Int64Counter            {event}     queue                  Redis lost the queue's data (seen by the mover)
//	delaystream.queue.waiting             Int64ObservableGauge    {message}   queue                  collection: scheduled, not yet promoted
//	delaystream.queue.overdue             Int64ObservableGauge    {message}   queue                  collection: waiting past their due time
//	delaystream.queue.overdue_age         Float64ObservableGauge  s           queue                  collection: how long the earliest waiting message has been due
//	delaystream.queue.evicting_servers    Int64ObservableGauge    {server}    queue                  collection: Redis servers whose maxmemory-policy can evict the queue's keys
//	delaystream.group.consumers           Int64ObservableGauge    {consumer}  queue, group           collection: consumers known to the group
//	delaystream.group.pending             Int64ObservableGauge    {message}   queue, group           collection: delivered, not acknowledged
//	delaystream.group.oldest_pending_age  Float64ObservableGauge  s           queue, group           collection: time since the oldest pending entry was appended
//	delaystream.group.lag                 Int64ObservableGauge    {message}   queue, group           collection: stream entries not yet delivered to the group
//	delaystream.group.retry_waiting       Int64ObservableGauge    {message}   queue, group           collection: messages waiting in the retry lane
//	delaystream.group.dead_letters        Int64ObservableGauge    {message}   queue, group           collection: entries in the dead-letter stream
//	delaystream.queue.paused              Float64ObservableGauge  s           queue                  collection: how long the queue's promotion has been paused; 0 when not
//	delaystream.group.paused              Float64ObservableGauge  s           queue, group           collection: how long the group has been paused; 0 when not
//	delaystream.stats.errors              Int64Counter            {error}     queue                  collection: figures that could not be read in time
//
// Histogram bucket boundaries are [LagBuckets] (1 ms to 5 min) for lags,
// [DurationBuckets] (1 ms to 1 min) for handlers, [PromoteBuckets] and
// [BatchBuckets] for the mover; they are advice to the SDK, which views
// may override.
//
// The promotion lag is computed by the consumers, not the mover: the
// entry id's time is when Redis appended the entry, and the message's due
// time is by the Redis clock too, so no host's clock skews it. Each group
// records it once per entry (on the first delivery), so with n groups a
// message is recorded n times. The delivery lag ends on this host's clock;
// skew shows in it, and a negative value (skew only) is recorded as 0. The
// observable gauges report the shared state of Redis: every process that
// watches a queue reports the same values, so aggregate them with max.
//
// # Tracing
//
// A delayed message is handled long after the request that scheduled it
// has ended, so the handler's span is not a child of the producer's: it
// starts a new trace (kind Consumer, "process <queue>") with a span link
// to the producer's span, found in the message's headers by the
// propagator. The default propagator is W3C Trace Context ("traceparent",
// "tracestate" headers, whatever the global propagator is); header keys
// under "ds." (reserved by delaystream) are never written. Retries keep the
// headers, so every attempt links to the same producer span; the span
// carries the attempt, the delivery count, the group, the queue and the
// message id. The span is a middleware: given first to
// delaystream.WithMiddleware, it covers the group's other middleware too.
package dsotel
