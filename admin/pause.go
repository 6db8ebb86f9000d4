package admin

import (
	"context"
	"fmt"
	"time"

	"github.com/delaystream/delaystream/internal/flow"
	"github.com/delaystream/delaystream/internal/stream"
)

// PauseQueue pauses the promotion of queue in every process (see
// delaystream.Queue.Pause: a paused queue promotes nothing; what is in
// its stream is still handled) and returns since when it is paused, by
// the Redis clock: pausing what is paused keeps the first pause's time.
// The pause is kept in Redis until [Operator.ResumeQueue].
func (in *Operator) PauseQueue(ctx context.Context, queue string) (time.Time, error) {
	return in.setQueuePause(ctx, queue, true)
}

// ResumeQueue ends a pause of queue's promotion (see
// [Operator.PauseQueue]) and returns since when the pause it ended was,
// zero when there was none.
func (in *Operator) ResumeQueue(ctx context.Context, queue string) (time.Time, error) {
	return in.setQueuePause(ctx, queue, false)
}

// Pause pauses group of queue in every process (see
// delaystream.Group.Pause: a paused group's consumers take nothing) and
// returns since when it is paused, by the Redis clock: pausing what is
// paused keeps the first pause's time. The group must be known (on the
// queue's streams or in its record of groups), else the error wraps
// delaystream.ErrNotFound; an empty or malformed name wraps
// delaystream.ErrInvalidOption, and nothing is written: pausing the
// whole queue is [Operator.PauseQueue], never an empty group name (a
// variable left empty must not stop all delivery). The pause is kept in
// Redis until [Operator.Resume].
func (in *Operator) Pause(ctx context.Context, queue, group string) (time.Time, error) {
	return in.setGroupPause(ctx, queue, group, true)
}

// Resume ends a pause of group of queue (see [Operator.Pause]) and
// returns since when the pause it ended was, zero when there was none.
// An empty group name is refused as by Pause: resuming the queue is
// [Operator.ResumeQueue].
func (in *Operator) Resume(ctx context.Context, queue, group string) (time.Time, error) {
	return in.setGroupPause(ctx, queue, group, false)
}

func (in *Operator) setQueuePause(ctx context.Context, queue string, on bool) (time.Time, error) {
	h, err := in.open(ctx, queue)
	if err != nil {
		return time.Time{}, err
	}
	return flow.SetQueue(ctx, in.rdb, h.layout, on)
}

func (in *Operator) setGroupPause(ctx context.Context, queue, group string, on bool) (time.Time, error) {
	if err := stream.ValidateName("group", group); err != nil {
		if group == "" {
			err = fmt.Errorf("%w (the whole queue is paused and resumed by PauseQueue and ResumeQueue)", err)
		}
		return time.Time{}, invalid(err)
	}
	h, err := in.open(ctx, queue)
	if err != nil {
		return time.Time{}, err
	}
	if err := in.knownGroup(ctx, h, group); err != nil {
		return time.Time{}, err
	}
	return flow.SetGroup(ctx, in.rdb, h.layout, group, on)
}

// flowState fills in the pause and flow limits of group report g of h.
func (in *Operator) flowState(ctx context.Context, h *handle, g *GroupReport) error {
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
