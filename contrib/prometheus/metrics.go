package dsprom

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/delaystream/delaystream"
)

// Metrics is a prometheus.Collector of delaystream's metrics: the counters
// and histograms fed by the hooks that [Metrics.GroupHooks] and
// [Metrics.MoverHooks] return, and the gauges of the queues named to
// [Metrics.Watch] and of their consumer groups, read from Redis at each
// scrape. Register it
// once (prometheus.Registerer.Register) and wire its hooks into every
// mover and consumer group of the process. Its methods are safe for
// concurrent use; its hooks never block and allocate nothing per message.
type Metrics struct {
	cfg config

	promotionLag    *prometheus.HistogramVec // queue, group, lane
	deliveryLag     *prometheus.HistogramVec // queue, group, lane
	handlerDuration *prometheus.HistogramVec // queue, group, outcome
	deadLettered    *prometheus.CounterVec   // queue, group, reason
	reclaimed       *prometheus.CounterVec   // queue, group
	reclaimedGone   *prometheus.CounterVec   // queue, group
	groupDataLoss   *prometheus.CounterVec   // queue, group
	limitWait       *prometheus.CounterVec   // queue, group

	promoted        *prometheus.CounterVec   // queue
	quarantined     *prometheus.CounterVec   // queue
	batchSize       *prometheus.HistogramVec // queue
	promoteDuration *prometheus.HistogramVec // queue
	moverErrors     *prometheus.CounterVec   // queue, stuck
	ownedShards     *prometheus.GaugeVec     // queue
	moverDataLoss   *prometheus.CounterVec   // queue

	statsErrors *prometheus.CounterVec // queue
	stats       statDescs

	discoveryErrors prometheus.Counter // WatchAll's failed discoveries

	mu      sync.Mutex
	watched []watch // in the order of Watch
	all     []watch // the prefixes of WatchAll (queue "")

	kept keptFigures // for the scrapes that cannot read Redis
}

// New returns Metrics with the given options (errors wrap
// [ErrInvalidOption]). It registers nothing and starts nothing: register
// it with a prometheus.Registerer, pass its hooks to the movers and
// groups, and [Metrics.Watch] the queues whose figures it should report.
func New(opts ...Option) (*Metrics, error) {
	cfg := config{namespace: DefaultNamespace, lagBuckets: LagBuckets, durationBuckets: DurationBuckets,
		statsTimeout: DefaultStatsTimeout, scheduleSeries: DefaultMaxScheduleSeries}
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&cfg); err != nil {
			return nil, err
		}
	}
	ns := cfg.namespace
	hist := func(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: name, Help: help, Buckets: buckets}, labels)
	}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: name, Help: help}, labels)
	}
	m := &Metrics{
		cfg: cfg,
		promotionLag: hist("promotion_lag_seconds",
			"Time from a message's due time to its append to the stream (Redis clock), observed by each group at the entry's first delivery.",
			cfg.lagBuckets, "queue", "group", "lane"),
		deliveryLag: hist("delivery_lag_seconds",
			"Time from a message's due time (Redis clock) to the start of its handler (consumer clock), per delivery.",
			cfg.lagBuckets, "queue", "group", "lane"),
		handlerDuration: hist("handler_duration_seconds",
			"Run time of the handler, by how the run ended.",
			cfg.durationBuckets, "queue", "group", "outcome"),
		deadLettered:  counter("dead_lettered_total", "Entries appended to the group's dead letters, by reason.", "queue", "group", "reason"),
		reclaimed:     counter("reclaimed_total", "Pending entries this process's consumers took over from other consumers (XAUTOCLAIM).", "queue", "group"),
		reclaimedGone: counter("deleted_while_pending_total", "Pending entries XAUTOCLAIM found deleted from the stream (recorded as dead letters).", "queue", "group"),
		groupDataLoss: counter("group_data_loss_total", "Times a consumer found that Redis lost the queue's data.", "queue", "group"),
		limitWait:     counter("group_limit_wait_seconds_total", "Time this process's consumers waited, with workers free, for the group's flow limits.", "queue", "group"),

		promoted:    counter("mover_promoted_total", "Due messages the mover appended to the queue stream.", "queue"),
		quarantined: counter("mover_quarantined_total", "Waiting-set members the mover could not read and set aside in the quarantine.", "queue"),
		batchSize: hist("mover_batch_size",
			"Entries appended to the stream by one promote call, for calls that appended any.",
			BatchBuckets, "queue"),
		promoteDuration: hist("mover_promote_duration_seconds",
			"Duration of one promote script call (round trip included), for calls that moved or quarantined anything.",
			PromoteBuckets, "queue"),
		moverErrors: counter("mover_errors_total", "Failed promote calls and mover registry beats; stuck is true for errors that repeat until the data is fixed.", "queue", "stuck"),
		ownedShards: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "mover_owned_shards",
			Help: "Shards of the queue this process's mover promotes."}, []string{"queue"}),
		moverDataLoss: counter("mover_data_loss_total", "Times the mover found that Redis lost the queue's data.", "queue"),

		statsErrors: counter("stats_errors_total", "Scrapes whose read of a watched queue's figures failed or timed out.", "queue"),
		discoveryErrors: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "discovery_errors_total",
			Help: "Scrapes whose discovery of the queues under a prefix (WatchAll) failed or timed out."}),
		stats: newStatDescs(ns),
	}
	return m, nil
}

func (m *Metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{
		m.promotionLag, m.deliveryLag, m.handlerDuration, m.deadLettered, m.reclaimed, m.reclaimedGone, m.groupDataLoss, m.limitWait,
		m.promoted, m.quarantined, m.batchSize, m.promoteDuration, m.moverErrors, m.ownedShards, m.moverDataLoss,
		m.statsErrors, m.discoveryErrors,
	}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
	m.stats.describe(ch)
}

// Collect implements prometheus.Collector. It reads the figures of every
// watched queue and its groups from Redis (bounded by [WithStatsTimeout]), then
// sends them with the hooks' counters and histograms.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.collectStats(ch)
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
}

var _ prometheus.Collector = (*Metrics)(nil)

// reasonLabels are the reason label's values, from the one table of
// dead-letter reasons (delaystream.Reasons, delaystream.ReasonLabel). The
// package doc shows the same table; a test keeps the two equal.
var reasonLabels = func() map[string]string {
	m := map[string]string{}
	for _, r := range delaystream.Reasons() {
		m[r] = delaystream.ReasonLabel(r)
	}
	return m
}()

// reasonOther is the label value of dead-letter reasons this release does
// not know.
const reasonOther = delaystream.ReasonOther

// reasonLabel returns the label value of a dead-letter reason
// (delaystream.ReasonLabel).
func reasonLabel(reason string) string { return delaystream.ReasonLabel(reason) }

// The handler outcomes, in the order of delaystream.HandlerOutcome.
var outcomes = []delaystream.HandlerOutcome{
	delaystream.HandlerAcked, delaystream.HandlerRetried, delaystream.HandlerDeadLettered, delaystream.HandlerDropped,
	delaystream.HandlerReclaimed, delaystream.HandlerHandedBack, delaystream.HandlerUnsettled,
}
