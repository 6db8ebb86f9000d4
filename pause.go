package delaystream

import (
	"context"
	"log/slog"
	"time"

	"github.com/delaystream/delaystream/internal/flow"
)

// Pause stops the promotion of the queue's due messages in every process:
// each shard's promotion checks the queue's pause record in Redis, so no
// message becomes due into the stream until [Queue.Resume], and due ones
// wait (counted in [Stats].Overdue). What is already in the stream is
// still handled, and each group's retries still come back: to stop a
// group's handling, pause the group ([Group.Pause]). The pause survives
// restarts, and Run reports it when it starts. Pausing a paused queue
// changes nothing (PausedSince keeps the first pause's time). It works
// without Run and from any process using the queue; the admin package and
// the delaystream command do the same by name.
func (q *Queue) Pause(ctx context.Context) error {
	_, err := flow.SetQueue(ctx, q.rdb, q.layout, true)
	return err
}

// Resume ends a pause of the queue ([Queue.Pause]) and wakes its movers,
// which promote at once everything that fell due meanwhile, in due order
// (never early). Resuming a queue that is not paused changes nothing.
func (q *Queue) Resume(ctx context.Context) error {
	_, err := flow.SetQueue(ctx, q.rdb, q.layout, false)
	return err
}

// Pause stops the group's consumers in every process within about a
// network round trip (they are told on the queue's announcement channel,
// and read the state again whenever they resubscribe and every 5 min):
// they read and reclaim nothing, entries they had read and not started are
// handed back to the group (their delivery counts kept), and handlers
// already running finish and are acknowledged as usual, their entries
// extended meanwhile. Messages keep being promoted into the stream: the
// group's [GroupStats].Lag grows, and after [Group.Resume] it takes
// everything, nothing lost, nothing early. The pause is kept in Redis:
// it survives restarts, and a consumer starting reports it. Pausing a
// paused group changes nothing.
func (g *Group) Pause(ctx context.Context) error {
	_, err := g.c.SetPaused(ctx, true)
	return err
}

// Resume ends a pause of the group ([Group.Pause]): its consumers read
// again at once. Resuming a group that is not paused changes nothing.
func (g *Group) Resume(ctx context.Context) error {
	_, err := g.c.SetPaused(ctx, false)
	return err
}

// reportPause logs, at the start of Run, a pause of the queue's promotion
// found in Redis (each group's consumer reports its group's).
func (q *Queue) reportPause(ctx context.Context) {
	if q.mover == nil {
		return
	}
	since, n, err := flow.QueueSince(ctx, q.rdb, q.layout)
	if err != nil && ctx.Err() != nil {
		return // stopped meanwhile: nothing went wrong
	}
	if err != nil {
		q.cfg.logger.WarnContext(ctx, "reading the queue's pause state failed", slog.String("queue", q.name), slog.Any("err", err))
		return
	}
	if n > 0 {
		q.cfg.logger.WarnContext(ctx, "queue paused: promoting nothing until resumed", slog.String("queue", q.name),
			slog.Time("paused_since", since), slog.Int("paused_shards", n), slog.Duration("paused_for", time.Since(since).Round(time.Second)))
	}
}
