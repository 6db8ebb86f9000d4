package flow

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream/internal/memory"
	"github.com/delaystream/delaystream/internal/scripts"
	"github.com/delaystream/delaystream/internal/shards"
	"github.com/delaystream/delaystream/internal/stream"
)

// Notice is the payload published on shard 0's arrivals channel when a
// group's pause changes: consumers read their group's pause state again.
// (The channel's other payloads are shard numbers.)
const Notice = "p"

// SetQueue pauses (on) or resumes the promotion of the queue of layout on
// every shard, after checking the queue's recorded shard count. A resume
// wakes the movers (a "0" on each shard's wake channel). It returns the
// time the pause began (the earliest of the shards'), or for a resume the
// time the pause it ended began (zero if the queue was not paused).
func SetQueue(ctx context.Context, rdb redis.UniversalClient, layout *stream.Layout, on bool) (time.Time, error) {
	if err := shards.NewGuard(layout, "pause").Check(ctx, rdb); err != nil {
		return time.Time{}, err
	}
	calls := make([]scripts.Call, layout.Shards())
	for i := range calls {
		k := layout.Shard(i)
		main := k.Main()
		ch := ""
		if !on {
			ch = scripts.Channel(main.Wake, main.Sharded)
		}
		calls[i] = scripts.Call{Keys: []string{k.Pause()}, Args: []any{stream.PauseQueueField, flag(on), ch, "0"}}
	}
	cmds, err := scripts.RunPipelined(ctx, rdb, scripts.Pause, calls)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s queue %s: %w", verb(on), layout.Queue(), err)
	}
	var since time.Time
	for i, cmd := range cmds {
		ms, err := cmd.Int64()
		if err != nil {
			err = stream.ExplainWrongType(ctx, rdb, memory.Explain(ctx, rdb, err), stream.KeyType{Key: layout.Shard(i).Pause(), Want: "hash"})
			return time.Time{}, fmt.Errorf("%s queue %s: shard %d: %w", verb(on), layout.Queue(), i, err)
		}
		if on || ms > 0 {
			since = earliest(since, ms)
		}
	}
	return since, nil
}

// SetGroup pauses (on) or resumes group's consumers on the queue of
// layout, and tells them with [Notice] on shard 0's arrivals channel. It
// returns what [SetQueue] returns, for the group.
func SetGroup(ctx context.Context, rdb redis.UniversalClient, layout *stream.Layout, group string, on bool) (time.Time, error) {
	if err := stream.ValidateName("group", group); err != nil {
		return time.Time{}, err
	}
	if err := shards.NewGuard(layout, "pause").Check(ctx, rdb); err != nil {
		return time.Time{}, err
	}
	k := layout.Shard(0)
	main := k.Main()
	ms, err := scripts.Pause.Run(ctx, rdb, []string{k.Pause()},
		stream.PauseGroupField(group), flag(on), scripts.Channel(main.Arrivals, main.Sharded), Notice).Int64()
	if err != nil {
		err = stream.ExplainWrongType(ctx, rdb, memory.Explain(ctx, rdb, scripts.Explain(err)), stream.KeyType{Key: k.Pause(), Want: "hash"})
		return time.Time{}, fmt.Errorf("%s group %s of %s: %w", verb(on), group, layout.Queue(), err)
	}
	if !on && ms == 0 {
		return time.Time{}, nil
	}
	return earliest(time.Time{}, ms), nil
}

// QueueSince returns since when the queue of layout is paused (the
// earliest of its paused shards'), zero when no shard is, and how many
// shards are paused (fewer than all only while a pause or resume is under
// way, or after one that failed part way).
func QueueSince(ctx context.Context, rdb redis.UniversalClient, layout *stream.Layout) (time.Time, int, error) {
	pipe := rdb.Pipeline()
	cmds := make([]*redis.StringCmd, layout.Shards())
	for i := range cmds {
		cmds[i] = pipe.HGet(ctx, layout.Shard(i).Pause(), stream.PauseQueueField)
	}
	_, _ = pipe.Exec(ctx) // errors are per command
	var since time.Time
	n := 0
	for i, cmd := range cmds {
		ms, ok, err := parse(cmd)
		if err != nil {
			err = stream.ExplainWrongType(ctx, rdb, err, stream.KeyType{Key: layout.Shard(i).Pause(), Want: "hash"})
			return time.Time{}, 0, fmt.Errorf("pause state of %s: %w", layout.Queue(), err)
		}
		if ok {
			since = earliest(since, ms)
			n++
		}
	}
	return since, n, nil
}

// GroupSince returns since when group's consumers on the queue of layout
// are paused, zero when they are not.
func GroupSince(ctx context.Context, rdb redis.UniversalClient, layout *stream.Layout, group string) (time.Time, error) {
	key := layout.Shard(0).Pause()
	ms, ok, err := parse(rdb.HGet(ctx, key, stream.PauseGroupField(group)))
	if err != nil {
		err = stream.ExplainWrongType(ctx, rdb, err, stream.KeyType{Key: key, Want: "hash"})
		return time.Time{}, fmt.Errorf("pause state of group %s of %s: %w", group, layout.Queue(), err)
	}
	if !ok {
		return time.Time{}, nil
	}
	return earliest(time.Time{}, ms), nil
}

// parse reads a pause field: its Unix ms and whether it is set. A value
// that is not a number (written by someone else) counts as a pause since
// the Unix epoch: the field's presence is what pauses.
func parse(cmd *redis.StringCmd) (int64, bool, error) {
	v, err := cmd.Result()
	switch {
	case errors.Is(err, redis.Nil):
		return 0, false, nil
	case err != nil:
		return 0, false, err
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ms < 0 {
		ms = 0
	}
	return ms, true, nil
}

// earliest returns the earlier of since and the Unix ms ms, where a zero
// since is none and ms <= 0 is none too unless since is zero (a pause of
// unknown start shows as the epoch).
func earliest(since time.Time, ms int64) time.Time {
	t := time.UnixMilli(max(ms, 0))
	if since.IsZero() || t.Before(since) {
		return t
	}
	return since
}

func flag(on bool) string {
	if on {
		return "1"
	}
	return "0"
}

func verb(on bool) string {
	if on {
		return "pause"
	}
	return "resume"
}
