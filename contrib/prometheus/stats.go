package dsprom

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/admin"
)

// watch is one watched queue and the Operator that reads it.
type watch struct {
	in     *admin.Operator
	prefix string // as the Operator has it: never ""
	queue  string
}

// statDescs describe the gauges read from Redis at each scrape.
type statDescs struct {
	waiting, overdue, overdueAge, streamLen, quarantined       *prometheus.Desc // queue
	evicting                                                   *prometheus.Desc // queue
	consumers, pending, oldest, lag, retryWaiting, deadLetters *prometheus.Desc // queue, group
	recurring, recPausedCount, recMaxLate                      *prometheus.Desc // queue
	recNext, recLast, recLate, recPaused                       *prometheus.Desc // queue, schedule
	memUsed, memMax, memEvicts, memEvicted                     *prometheus.Desc // server
	histPromoted, histQuarantined                              *prometheus.Desc // queue
	histHandled, histDropped, histRetried, histDead            *prometheus.Desc // queue, group
	figuresAge                                                 *prometheus.Desc // queue
	up                                                         *prometheus.Desc // none
	flowDescs                                                                   // flow.go
}

func newStatDescs(ns string) statDescs {
	q, g, sch, srv := []string{"queue"}, []string{"queue", "group"}, []string{"queue", "schedule"}, []string{"server"}
	d := func(name, help string, labels []string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(ns, "", name), help, labels, nil)
	}
	return statDescs{
		waiting:     d("queue_waiting_messages", "Messages scheduled and not yet promoted.", q),
		overdue:     d("queue_overdue_messages", "Waiting messages whose due time has passed (a mover is late or absent).", q),
		overdueAge:  d("queue_overdue_seconds", "How long the earliest waiting message has been due (Redis clock); 0 when none is overdue.", q),
		streamLen:   d("queue_stream_entries", "Entries in the queue stream, over every shard.", q),
		quarantined: d("queue_quarantined_entries", "Entries in the queue's quarantine: waiting messages promotion could not read.", q),
		evicting: d("queue_evicting_servers", "Redis servers holding the queue whose maxmemory-policy can evict its keys (messages can be lost): "+
			"set maxmemory-policy noeviction. 0 when none, or when their settings cannot be read.", q),
		consumers:      d("group_consumers", "Consumers known to the group on the queue stream.", g),
		pending:        d("group_pending_messages", "Entries delivered to the group and not yet acknowledged (queue stream and retry lane).", g),
		oldest:         d("group_oldest_pending_seconds", "Time since the group's oldest pending entry was appended to its stream (Redis clock): waiting to be read, then held; 0 when none.", g),
		lag:            d("group_lag_messages", "Queue stream entries not yet delivered to the group; absent when Redis cannot tell.", g),
		retryWaiting:   d("group_retry_waiting_messages", "Messages waiting in the group's retry lane for their backoff.", g),
		deadLetters:    d("group_dead_letters", "Entries in the group's dead-letter stream.", g),
		recurring:      d("queue_recurring_schedules", "Recurring schedules defined on the queue.", q),
		recPausedCount: d("recurring_paused_schedules", "Recurring schedules of the queue that are paused.", q),
		recMaxLate: d("recurring_max_lateness_seconds", "The most any of the queue's recurring schedules' latest occurrence "+
			"was appended to the stream late (Redis clock); absent when none is known.", q),
		recNext:         d("recurring_next_occurrence_timestamp_seconds", "Unix time of the schedule's next occurrence; absent when paused or none.", sch),
		recLast:         d("recurring_last_occurrence_timestamp_seconds", "Unix time of the schedule's latest occurrence due so far; absent when none.", sch),
		recLate:         d("recurring_last_lateness_seconds", "How late the latest occurrence was appended to the stream (Redis clock); absent when unknown.", sch),
		recPaused:       d("recurring_paused", "1 when the schedule is paused, else 0.", sch),
		memUsed:         d("redis_memory_used_bytes", "The Redis server's used_memory (INFO memory).", srv),
		memMax:          d("redis_memory_max_bytes", "The Redis server's maxmemory: 0 when it has no limit.", srv),
		memEvicted:      d("redis_evicted_keys_total", "Keys the Redis server evicted since it started (evicted_keys): above 0 under an evicting policy, messages may have been lost.", srv),
		memEvicts:       d("redis_memory_evicts", "1 when the server's maxmemory-policy can evict keys (messages can be lost), else 0.", srv),
		histPromoted:    d("history_promoted_total", "Messages promoted (appended to the queue stream), as counted in Redis by every process of the queue.", q),
		histQuarantined: d("history_quarantined_total", "Waiting-set members promotion set aside in the quarantine, as counted in Redis.", q),
		histHandled:     d("history_handled_total", "Entries the group acknowledged after their handler succeeded, as counted in Redis by every consumer.", g),
		histDropped:     d("history_dropped_total", "Entries the group acknowledged after their handler dropped them, as counted in Redis.", g),
		histRetried:     d("history_retried_total", "Failures the group scheduled for a retry, as counted in Redis.", g),
		histDead:        d("history_dead_lettered_total", "Entries appended to the group's dead letters (any reason), as counted in Redis; purging them does not lower it.", g),
		figuresAge: d("queue_figures_age_seconds", "Seconds since the queue's figures were read from Redis: 0 when this scrape read them. "+
			"While they cannot be read, every series of the queue repeats the last figures read and this grows.", q),
		up: d("up", "1 when the scrape read every watched queue's figures and every server's memory from Redis, "+
			"0 when any read failed or timed out: the series of what could not be read then repeat the last figures read "+
			"(see queue_figures_age_seconds).", nil),
		flowDescs: newFlowDescs(d),
	}
}

func (s statDescs) describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{s.waiting, s.overdue, s.overdueAge, s.streamLen, s.quarantined, s.evicting,
		s.consumers, s.pending, s.oldest, s.lag, s.retryWaiting, s.deadLetters,
		s.recurring, s.recPausedCount, s.recMaxLate, s.recNext, s.recLast, s.recLate, s.recPaused,
		s.memUsed, s.memMax, s.memEvicts, s.memEvicted, s.figuresAge, s.up,
		s.histPromoted, s.histQuarantined, s.histHandled, s.histDropped, s.histRetried, s.histDead} {
		ch <- d
	}
	s.flowDescs.describe(ch)
}

// emit takes one metric of a scrape.
type emit func(prometheus.Metric)

// send sends the gauges of report r.
func (s statDescs) send(ch emit, r admin.QueueReport) {
	gauge := func(desc *prometheus.Desc, v float64, labels ...string) {
		ch(prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, labels...))
	}
	q := r.Queue
	gauge(s.waiting, float64(r.Waiting), q)
	gauge(s.overdue, float64(r.Overdue), q)
	gauge(s.overdueAge, r.OverdueBy().Seconds(), q)
	gauge(s.streamLen, float64(r.StreamLength), q)
	gauge(s.quarantined, float64(r.Quarantined), q)
	gauge(s.recurring, float64(r.Recurring), q)
	gauge(s.evicting, float64(len(r.Evicting)), q)
	for _, g := range r.Groups {
		gauge(s.consumers, float64(g.Consumers), q, g.Group)
		gauge(s.pending, float64(g.Pending), q, g.Group)
		gauge(s.oldest, (time.Duration(g.OldestPendingEntryAgeMs) * time.Millisecond).Seconds(), q, g.Group)
		if g.Lag >= 0 {
			gauge(s.lag, float64(g.Lag), q, g.Group)
		}
		gauge(s.retryWaiting, float64(g.RetryWaiting), q, g.Group)
		gauge(s.deadLetters, float64(g.DeadLetters), q, g.Group)
	}
	s.flowDescs.send(gauge, r)
}

// sendHistory sends the counters Redis keeps of queue's work (h: the
// totals).
func (s statDescs) sendHistory(ch emit, queue string, h admin.HistoryCounts) {
	counter := func(desc *prometheus.Desc, v int64, labels ...string) {
		ch(prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(v), labels...))
	}
	counter(s.histPromoted, h.Promoted, queue)
	counter(s.histQuarantined, h.Quarantined, queue)
	for g, c := range h.Groups {
		counter(s.histHandled, c.Handled, queue, g)
		counter(s.histDropped, c.Dropped, queue, g)
		counter(s.histRetried, c.Retried, queue, g)
		counter(s.histDead, c.DeadLettered, queue, g)
	}
}

// sendRecurring sends the gauges of queue's recurring schedules: the
// per-queue aggregates, and each schedule's own when there are at most
// perSchedule of them (see WithMaxScheduleSeries).
func (s statDescs) sendRecurring(ch emit, queue string, list []delaystream.RecurringStatus, perSchedule int) {
	gauge := func(desc *prometheus.Desc, v float64, labels ...string) {
		ch(prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, labels...))
	}
	paused, maxLate, lateKnown := 0, time.Duration(0), false
	for _, r := range list {
		if r.Paused {
			paused++
		}
		if late, ok := r.Lateness(); ok && (!lateKnown || late > maxLate) {
			maxLate, lateKnown = late, true
		}
	}
	gauge(s.recPausedCount, float64(paused), queue)
	if lateKnown {
		gauge(s.recMaxLate, maxLate.Seconds(), queue)
	}
	if len(list) > perSchedule {
		return // a series per schedule would be unbounded: the aggregates only
	}
	unix := func(t time.Time) float64 { return float64(t.UnixMilli()) / 1000 }
	for _, r := range list {
		if !r.Next.IsZero() {
			gauge(s.recNext, unix(r.Next), queue, r.ID)
		}
		if !r.Last.IsZero() {
			gauge(s.recLast, unix(r.Last), queue, r.ID)
		}
		if late, ok := r.Lateness(); ok {
			gauge(s.recLate, late.Seconds(), queue, r.ID)
		}
		paused := 0.0
		if r.Paused {
			paused = 1
		}
		gauge(s.recPaused, paused, queue, r.ID)
	}
}

// Watch makes every scrape read, from Redis through rdb, the figures of
// the named queues under key prefix ("" for the default, as with
// delaystream.WithPrefix), with admin.Operator.Stats: waiting, overdue,
// stream length, quarantine and recurring schedules of each queue (with
// each schedule's next and last occurrence, lateness and pause: a few
// commands per schedule; series per schedule up to
// [WithMaxScheduleSeries], per-queue aggregates beyond), and pending entries and
// their oldest age, lag, retry lane, dead letters and consumers of every
// consumer group found on its streams, and the counters Redis keeps of the
// queue's work (history_…_total: promoted, quarantined, and each group's
// handled, dropped, retried and dead-lettered). The queues need not be built in
// this process: any queue under the prefix can be watched by name. A queue
// not yet used (no key of it in Redis) reports zeros and no group.
//
// Watching a queue again under the same prefix changes nothing. A queue
// name watched under another prefix, no queue, a nil client or an invalid
// prefix or queue name return an error wrapping [ErrInvalidOption] (and
// the error of package delaystream or admin that found it); nothing is
// watched then. Each watched queue's stats_errors_total series exists
// from this call on, at 0.
//
// A scrape reads the queues one after another, all within
// [WithStatsTimeout]: a queue costs a few commands per shard and group.
// A queue whose figures fail or time out is left out of the scrape and
// counted in stats_errors_total. Every process that watches a queue
// reports the same figures: aggregate them with max, not sum.
func (m *Metrics) Watch(rdb redis.UniversalClient, prefix string, queues ...string) error {
	if prefix == "" {
		prefix = delaystream.DefaultPrefix
	}
	in, err := admin.New(rdb, prefix)
	if err != nil {
		return fmt.Errorf("%w: watch: %w", ErrInvalidOption, err)
	}
	if len(queues) == 0 {
		return fmt.Errorf("%w: watch: no queue named", ErrInvalidOption)
	}
	for _, q := range queues {
		// New checks the name as every part of a queue does; it talks to
		// no server and starts nothing.
		if _, err := delaystream.New(rdb, q, delaystream.WithPrefix(prefix), delaystream.WithoutPromotion()); err != nil {
			return fmt.Errorf("%w: watch %s: %w", ErrInvalidOption, q, err)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, q := range queues {
		if w, ok := m.watchOf(q); ok && w.prefix != prefix {
			return fmt.Errorf("%w: watch %s under prefix %s: already watched under prefix %s, and the series would be the same",
				ErrInvalidOption, q, prefix, w.prefix)
		}
	}
	for _, q := range queues {
		if _, ok := m.watchOf(q); !ok {
			m.watched = append(m.watched, watch{in: in, prefix: prefix, queue: q})
			m.statsErrors.WithLabelValues(q)
		}
	}
	return nil
}

// watchOf returns the watch of queue, if watched. m.mu must be held.
func (m *Metrics) watchOf(queue string) (watch, bool) {
	i := slices.IndexFunc(m.watched, func(w watch) bool { return w.queue == queue })
	if i < 0 {
		return watch{}, false
	}
	return m.watched[i], true
}

// collectStats reads and sends the figures of every watched queue and the
// memory of every server they are on, within the stats timeout, and up.
func (m *Metrics) collectStats(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	ws, all := slices.Clone(m.watched), slices.Clone(m.all)
	m.mu.Unlock()
	if len(ws) == 0 && len(all) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.statsTimeout)
	defer cancel()
	found, ok := m.discovered(ctx, all, ws)
	ws = append(ws, found...)
	for _, w := range ws {
		if !m.collectQueue(ctx, ch, w) {
			m.statsErrors.WithLabelValues(w.queue).Inc()
			ok = false
		}
	}
	if !m.collectMemory(ctx, ch, append(ws, all...)) {
		ok = false
	}
	up := 0.0
	if ok {
		up = 1
	}
	ch <- prometheus.MustNewConstMetric(m.stats.up, prometheus.GaugeValue, up)
}

// collectQueue reads and sends the figures of w's queue and its recurring
// schedules, with their age, and reports whether it could read them. When
// it cannot, it sends the last figures read again (none if never read).
func (m *Metrics) collectQueue(ctx context.Context, ch chan<- prometheus.Metric, w watch) bool {
	var got []prometheus.Metric
	ok := m.readQueue(ctx, func(x prometheus.Metric) { got = append(got, x) }, w)
	var at time.Time
	if ok {
		at = time.Now()
		m.kept.queue(w.queue, got, at)
	} else if got, at = m.kept.lastQueue(w.queue); at.IsZero() {
		return false
	}
	for _, x := range got {
		ch <- x
	}
	ch <- prometheus.MustNewConstMetric(m.stats.figuresAge, prometheus.GaugeValue, time.Since(at).Seconds()*boolTo01(!ok), w.queue)
	return ok
}

// boolTo01 returns 1 for true, 0 for false.
func boolTo01(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// readQueue reads w's figures and sends them to ch, and reports whether
// it read them all.
func (m *Metrics) readQueue(ctx context.Context, ch emit, w watch) bool {
	r, err := w.read(ctx)
	if err != nil {
		return false
	}
	m.stats.send(ch, r)
	if r.Shards > 0 { // a queue Redis holds
		h, err := w.in.HistoryTotals(ctx, w.queue)
		if err != nil {
			return false
		}
		m.stats.sendHistory(ch, w.queue, h)
	}
	if r.Recurring == 0 {
		return true
	}
	q, err := w.in.Queue(ctx, w.queue)
	if err != nil {
		return false
	}
	list, err := q.ListRecurring(ctx)
	if err != nil {
		return false
	}
	m.stats.sendRecurring(ch, w.queue, list, m.cfg.scheduleSeries)
	return true
}

// collectMemory reads and sends the memory of every server the watches'
// clients write to, each server once, and reports whether every client's
// servers answered. For a client whose servers do not answer, it sends
// the last figures read of each (those no other client's answer sent).
func (m *Metrics) collectMemory(ctx context.Context, ch chan<- prometheus.Metric, ws []watch) bool {
	ok := true
	seen := map[*admin.Operator]bool{}
	sent := map[string]bool{}
	var stale []serverFigures
	for _, w := range ws {
		if seen[w.in] {
			continue
		}
		seen[w.in] = true
		list, err := w.in.Memory(ctx)
		if err != nil {
			ok = false
			stale = append(stale, m.kept.lastMemory(w.in)...)
			continue
		}
		var read []serverFigures
		for _, s := range list {
			if s.Known {
				read = append(read, m.stats.memory(s))
			}
		}
		m.kept.memory(w.in, read)
		for _, f := range read {
			f.send(ch, sent)
		}
	}
	for _, f := range stale {
		f.send(ch, sent)
	}
	return ok
}

// serverFigures is the memory series of one server.
type serverFigures struct {
	addr    string
	metrics []prometheus.Metric
}

// send sends f's series unless sent has its server, and records it.
func (f serverFigures) send(ch chan<- prometheus.Metric, sent map[string]bool) {
	if sent[f.addr] {
		return
	}
	sent[f.addr] = true
	for _, x := range f.metrics {
		ch <- x
	}
}

// memory returns the series of server s.
func (s statDescs) memory(srv delaystream.RedisMemory) serverFigures {
	f := serverFigures{addr: srv.Addr}
	gauge := func(desc *prometheus.Desc, v float64) {
		f.metrics = append(f.metrics, prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, srv.Addr))
	}
	gauge(s.memUsed, float64(srv.Used))
	gauge(s.memMax, float64(srv.Max))
	gauge(s.memEvicts, boolTo01(srv.Evicts()))
	if srv.Evicted >= 0 {
		f.metrics = append(f.metrics, prometheus.MustNewConstMetric(s.memEvicted, prometheus.CounterValue, float64(srv.Evicted), srv.Addr))
	}
	return f
}

// keptFigures holds the series of the last scrape that could read each
// queue and each client's servers, for the scrapes that cannot.
type keptFigures struct {
	mu       sync.Mutex
	queues   map[string]keptQueue
	servers  map[*admin.Operator][]serverFigures
	prefixes map[string][]watch // WatchAll's last discovery by prefix
}

type keptQueue struct {
	metrics []prometheus.Metric
	at      time.Time
}

func (k *keptFigures) queue(q string, ms []prometheus.Metric, at time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.queues == nil {
		k.queues = map[string]keptQueue{}
	}
	k.queues[q] = keptQueue{metrics: ms, at: at}
}

func (k *keptFigures) lastQueue(q string) ([]prometheus.Metric, time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	kq := k.queues[q]
	return kq.metrics, kq.at
}

func (k *keptFigures) memory(in *admin.Operator, fs []serverFigures) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.servers == nil {
		k.servers = map[*admin.Operator][]serverFigures{}
	}
	k.servers[in] = fs
}

func (k *keptFigures) lastMemory(in *admin.Operator) []serverFigures {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.servers[in]
}

func (k *keptFigures) discovered(prefix string, ws []watch) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.prefixes == nil {
		k.prefixes = map[string][]watch{}
	}
	k.prefixes[prefix] = ws
}

func (k *keptFigures) lastDiscovered(prefix string) []watch {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.prefixes[prefix]
}

// read returns the figures of w's queue: zeros for a queue not in Redis.
func (w watch) read(ctx context.Context) (admin.QueueReport, error) {
	rs, err := w.in.Stats(ctx, w.queue)
	if err == nil && len(rs) == 1 {
		return rs[0], nil
	}
	if err == nil {
		return admin.QueueReport{}, fmt.Errorf("stats %s: %d reports", w.queue, len(rs))
	}
	if !errors.Is(err, delaystream.ErrNotFound) {
		return admin.QueueReport{}, err
	}
	// Not found: the queue itself, or a part that went away while it was
	// read (a group destroyed meanwhile)? Only the first holds nothing.
	if _, qerr := w.in.Queues(ctx, w.queue); !errors.Is(qerr, delaystream.ErrNotFound) {
		return admin.QueueReport{}, err
	}
	return admin.QueueReport{Queue: w.queue}, nil
}
