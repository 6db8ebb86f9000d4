package dsprom

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/delaystream/delaystream"
)

// Lane label values: where a delivery came from.
const (
	laneMain  = "main"  // the queue stream: attempt 1
	laneRetry = "retry" // the group's retry lane: attempt 2 and later
)

// groupObservers are the series of one group, resolved once so that the
// hooks only index and add.
type groupObservers struct {
	promotion [2]prometheus.Observer // by lane: main, retry
	delivery  [2]prometheus.Observer
	handler   []prometheus.Observer // by delaystream.HandlerOutcome (index 0 unused)
	handlerBy prometheus.ObserverVec
	dead      map[string]prometheus.Counter // by reason label
	reclaimed prometheus.Counter
	gone      prometheus.Counter
	dataLoss  prometheus.Counter
	limitWait prometheus.Counter
}

// GroupHooks returns the hooks that feed the metrics of consumer group
// groupName of queue: promotion and delivery lag (OnDelivered), handler
// duration by outcome (OnHandled), dead letters by reason
// (OnDeadLettered), reclaims (OnReclaimed), data loss (OnDataLoss) and
// the time waited for flow limits (OnLimitWait).
// Pass them to the group with delaystream.WithHooks. The other hooks are
// left nil; to add your own to the same field, wrap the function this
// returns. Every consumer of the group in this process may share them.
// The label values are created at once, at zero.
//
// Lags compare a message's due time, by the Redis clock, with the Redis
// clock (promotion lag: the time in the entry id, observed on the entry's
// first delivery to the group) or with this host's clock (delivery lag:
// when the handler starts); a negative delivery lag, which only clock skew
// can cause, is observed as 0.
func (m *Metrics) GroupHooks(queue, groupName string) delaystream.Hooks {
	l := prometheus.Labels{"queue": queue, "group": groupName}
	promo, deliv := m.promotionLag.MustCurryWith(l), m.deliveryLag.MustCurryWith(l)
	o := &groupObservers{
		promotion: [2]prometheus.Observer{promo.WithLabelValues(laneMain), promo.WithLabelValues(laneRetry)},
		delivery:  [2]prometheus.Observer{deliv.WithLabelValues(laneMain), deliv.WithLabelValues(laneRetry)},
		handlerBy: m.handlerDuration.MustCurryWith(l),
		dead:      map[string]prometheus.Counter{},
		reclaimed: m.reclaimed.With(l),
		gone:      m.reclaimedGone.With(l),
		dataLoss:  m.groupDataLoss.With(l),
		limitWait: m.limitWait.With(l),
	}
	o.handler = make([]prometheus.Observer, len(outcomes)+1)
	for _, oc := range outcomes {
		o.handler[oc] = o.handlerBy.WithLabelValues(oc.String())
	}
	deadBy := m.deadLettered.MustCurryWith(l)
	for _, r := range reasonLabels {
		o.dead[r] = deadBy.WithLabelValues(r)
	}
	o.dead[reasonOther] = deadBy.WithLabelValues(reasonOther)
	return delaystream.Hooks{
		OnDelivered:    o.delivered,
		OnHandled:      o.handled,
		OnDeadLettered: o.deadLettered,
		OnReclaimed:    o.reclaimedHook,
		OnDataLoss:     func(error) { o.dataLoss.Inc() },
		OnLimitWait:    func(d time.Duration) { o.limitWait.Add(d.Seconds()) },
	}
}

// lane returns the lane index of d: 0 for a first attempt (the queue
// stream), 1 for a retry (the group's retry lane; a redriven message starts
// again at attempt 1 on the queue stream).
func lane(d *delaystream.Delivery) int {
	if d.Attempt > 1 {
		return 1
	}
	return 0
}

func (o *groupObservers) delivered(d *delaystream.Delivery) {
	i := lane(d)
	if d.Due.IsZero() {
		return
	}
	if d.Deliveries == 1 {
		if t := d.Appended(); !t.IsZero() {
			o.promotion[i].Observe(max(t.Sub(d.Due), 0).Seconds())
		}
	}
	o.delivery[i].Observe(max(time.Since(d.Due), 0).Seconds())
}

func (o *groupObservers) handled(_ *delaystream.Delivery, oc delaystream.HandlerOutcome, took time.Duration) {
	if int(oc) > 0 && int(oc) < len(o.handler) {
		o.handler[oc].Observe(took.Seconds())
		return
	}
	o.handlerBy.WithLabelValues(oc.String()).Observe(took.Seconds())
}

func (o *groupObservers) deadLettered(_ *delaystream.Delivery, reason string) {
	o.dead[reasonLabel(reason)].Inc()
}

func (o *groupObservers) reclaimedHook(_ string, n, deleted int) {
	o.reclaimed.Add(float64(n))
	o.gone.Add(float64(deleted))
}

// MoverHooks returns the hooks that feed the mover metrics of queue:
// promoted and quarantined entries, batch size and promote call duration
// (OnPromote), errors (OnError), owned shards (OnOwnership) and data loss
// (OnDataLoss). Pass them to the queue with delaystream.WithMoverHooks.
// OnLease is left nil. The label values are created at once, at zero.
func (m *Metrics) MoverHooks(queue string) delaystream.MoverHooks {
	promoted, quarantined := m.promoted.WithLabelValues(queue), m.quarantined.WithLabelValues(queue)
	batch, took := m.batchSize.WithLabelValues(queue), m.promoteDuration.WithLabelValues(queue)
	errs := [2]prometheus.Counter{m.moverErrors.WithLabelValues(queue, "false"), m.moverErrors.WithLabelValues(queue, "true")}
	owned, loss := m.ownedShards.WithLabelValues(queue), m.moverDataLoss.WithLabelValues(queue)
	return delaystream.MoverHooks{
		OnPromote: func(_ string, moved, quarantinedN int, d time.Duration) {
			promoted.Add(float64(moved))
			quarantined.Add(float64(quarantinedN))
			if moved > 0 {
				batch.Observe(float64(moved))
			}
			took.Observe(d.Seconds())
		},
		OnError: func(_ string, _ error, stuck bool) {
			if stuck {
				errs[1].Inc()
			} else {
				errs[0].Inc()
			}
		},
		OnOwnership: func(shards []int) { owned.Set(float64(len(shards))) },
		OnDataLoss:  func(error) { loss.Inc() },
	}
}
