package admin

import (
	"context"
	"time"

	"github.com/delaystream/delaystream/internal/flow"
	"github.com/delaystream/delaystream/internal/stream"
)

// Pause pauses queue, or with a group name that group of it, in every
// process (see delaystream.Queue.Pause and delaystream.Group.Pause: a
// paused queue promotes nothing, a paused group's consumers take nothing)
// and returns since when it is paused, by the Redis clock: pausing what
// is paused keeps the first pause's time. A group must be known (on the
// queue's streams or in its record of groups), else the error wraps
// delaystream.ErrNotFound; a malformed name wraps
// delaystream.ErrInvalidOption. The pause is kept in Redis until
// [Inspector.Resume].
func (in *Inspector) Pause(ctx context.Context, queue, group string) (time.Time, error) {
	return in.setPause(ctx, queue, group, true)
}

// Resume ends a pause of queue, or with a group name of that group (see
// [Inspector.Pause]), and returns since when the pause it ended was, zero
// when there was none.
func (in *Inspector) Resume(ctx context.Context, queue, group string) (time.Time, error) {
	return in.setPause(ctx, queue, group, false)
}

func (in *Inspector) setPause(ctx context.Context, queue, group string, on bool) (time.Time, error) {
	if group != "" {
		if err := stream.ValidateName("group", group); err != nil {
			return time.Time{}, invalid(err)
		}
	}
	h, err := in.open(ctx, queue)
	if err != nil {
		return time.Time{}, err
	}
	if group == "" {
		return flow.SetQueue(ctx, in.rdb, h.layout, on)
	}
	if err := in.knownGroup(ctx, h, group); err != nil {
		return time.Time{}, err
	}
	return flow.SetGroup(ctx, in.rdb, h.layout, group, on)
}

// flowState fills in the pause and flow limits of group report g of h.
func (in *Inspector) flowState(ctx context.Context, h *handle, g *GroupReport) error {
	var err error
	if g.PausedSince, err = flow.GroupSince(ctx, in.rdb, h.layout, g.Group); err != nil {
		return err
	}
	st, err := flow.Read(ctx, in.rdb, h.layout, g.Group)
	if err != nil {
		return err
	}
	g.ConcurrencyLimit, g.RatePerSecond, g.RateBurst, g.SlotsHeld = st.Limits.Concurrency, st.Limits.PerSecond(), st.Limits.Burst, st.Held
	g.LimitWaitMs = st.Waited.Milliseconds()
	return nil
}
