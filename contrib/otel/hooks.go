package dsotel

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/delaystream/delaystream"
)

// record and add are measurement options of one attribute set, built once.
type (
	record []metric.RecordOption
	add    []metric.AddOption
)

func recordOf(s attribute.Set) record { return record{metric.WithAttributeSet(s)} }
func addOf(s attribute.Set) add       { return add{metric.WithAttributeSet(s)} }

// groupHooks are the instruments and attribute sets of one group.
type groupHooks struct {
	t       *Telemetry
	lane    [2]record // main, retry
	outcome []record  // by delaystream.HandlerOutcome (index 0 unused)
	base    attribute.Set
	reason  map[string]add
	plain   add
}

// GroupHooks returns the hooks that feed the metrics of consumer group
// groupName of queue: promotion and delivery lag (OnDelivered), handler
// duration by outcome (OnHandled), dead letters by reason
// (OnDeadLettered), reclaims (OnReclaimed), data loss (OnDataLoss) and
// the time waited for flow limits (OnLimitWait). Pass them to the group
// with delaystream.WithHooks. The other hooks are
// left nil; to add your own to the same field, wrap the function this
// returns.
//
// Lags compare a message's due time, by the Redis clock, with the Redis
// clock (promotion lag: the time in the entry id, on the entry's first
// delivery to the group) or with this host's clock (delivery lag: when the
// handler starts); a negative delivery lag, which only clock skew can
// cause, is recorded as 0.
func (t *Telemetry) GroupHooks(queue, groupName string) delaystream.Hooks {
	base := queueAttrs(queue, groupName)
	g := &groupHooks{t: t, base: base, reason: map[string]add{}, plain: addOf(base)}
	g.lane[0] = recordOf(queueAttrs(queue, groupName, AttrLane.String(laneMain)))
	g.lane[1] = recordOf(queueAttrs(queue, groupName, AttrLane.String(laneRetry)))
	g.outcome = make([]record, len(outcomes)+1)
	for _, o := range outcomes {
		g.outcome[o] = recordOf(queueAttrs(queue, groupName, AttrOutcome.String(o.String())))
	}
	for _, r := range reasonLabels {
		g.reason[r] = addOf(queueAttrs(queue, groupName, AttrReason.String(r)))
	}
	g.reason[reasonOther] = addOf(queueAttrs(queue, groupName, AttrReason.String(reasonOther)))
	return delaystream.Hooks{
		OnDelivered:    g.delivered,
		OnHandled:      g.handled,
		OnDeadLettered: g.deadLettered,
		OnReclaimed:    g.reclaimedHook,
		OnDataLoss:     func(error) { t.groupDataLoss.Add(context.Background(), 1, g.plain...) },
		OnLimitWait:    func(d time.Duration) { t.limitWait.Add(context.Background(), d.Seconds(), g.plain...) },
	}
}

// Lane attribute values: where a delivery came from.
const (
	laneMain  = "main"
	laneRetry = "retry"
)

// laneOf returns the lane index of d: 0 for a first attempt (the queue
// stream), 1 for a retry (the group's retry lane; a redriven message starts
// again at attempt 1 on the queue stream).
func laneOf(d *delaystream.Delivery) int {
	if d.Attempt > 1 {
		return 1
	}
	return 0
}

func (g *groupHooks) delivered(d *delaystream.Delivery) {
	ctx, opts := context.Background(), g.lane[laneOf(d)]
	if d.Due.IsZero() {
		return
	}
	if d.Deliveries == 1 {
		if at := d.Appended(); !at.IsZero() {
			g.t.promotionLag.Record(ctx, max(at.Sub(d.Due), 0).Seconds(), opts...)
		}
	}
	g.t.deliveryLag.Record(ctx, max(time.Since(d.Due), 0).Seconds(), opts...)
}

func (g *groupHooks) handled(_ *delaystream.Delivery, o delaystream.HandlerOutcome, took time.Duration) {
	if int(o) > 0 && int(o) < len(g.outcome) {
		g.t.handlerDuration.Record(context.Background(), took.Seconds(), g.outcome[o]...)
		return
	}
	set := attribute.NewSet(append(g.base.ToSlice(), AttrOutcome.String(o.String()))...)
	g.t.handlerDuration.Record(context.Background(), took.Seconds(), metric.WithAttributeSet(set))
}

func (g *groupHooks) deadLettered(_ *delaystream.Delivery, reason string) {
	r, ok := reasonLabels[reason]
	if !ok {
		r = reasonOther
	}
	g.t.deadLettered.Add(context.Background(), 1, g.reason[r]...)
}

func (g *groupHooks) reclaimedHook(_ string, n, deleted int) {
	ctx := context.Background()
	if n > 0 {
		g.t.reclaimed.Add(ctx, int64(n), g.plain...)
	}
	if deleted > 0 {
		g.t.deletedPending.Add(ctx, int64(deleted), g.plain...)
	}
}

// MoverHooks returns the hooks that feed the mover metrics of queue:
// promoted and quarantined entries, batch size and promote call duration
// (OnPromote), errors (OnError), owned shards (OnOwnership) and data loss
// (OnDataLoss). Pass them to the queue with delaystream.WithMoverHooks.
// OnLease is left nil.
func (t *Telemetry) MoverHooks(queue string) delaystream.MoverHooks {
	base := queueAttrs(queue, "")
	plainAdd, plainRec := addOf(base), recordOf(base)
	stuck := [2]add{addOf(queueAttrs(queue, "", AttrStuck.Bool(false))), addOf(queueAttrs(queue, "", AttrStuck.Bool(true)))}
	ctx := context.Background()
	return delaystream.MoverHooks{
		OnPromote: func(_ string, moved, quarantined int, d time.Duration) {
			if moved > 0 {
				t.promoted.Add(ctx, int64(moved), plainAdd...)
				t.batchSize.Record(ctx, int64(moved), plainRec...)
			}
			if quarantined > 0 {
				t.quarantined.Add(ctx, int64(quarantined), plainAdd...)
			}
			t.promoteDuration.Record(ctx, d.Seconds(), plainRec...)
		},
		OnError: func(_ string, _ error, s bool) {
			i := 0
			if s {
				i = 1
			}
			t.moverErrors.Add(ctx, 1, stuck[i]...)
		},
		OnOwnership: func(shards []int) { t.ownedShards.Record(ctx, int64(len(shards)), plainRec...) },
		OnDataLoss:  func(error) { t.moverDataLoss.Add(ctx, 1, plainAdd...) },
	}
}
