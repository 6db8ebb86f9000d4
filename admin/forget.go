package admin

import (
	"context"
	"fmt"
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/internal/group"
	"github.com/delaystream/delaystream/internal/stream"
)

// ForgetGroup retires consumer group g of queue for good: it destroys the
// group on every shard's queue stream (its position and pending entries)
// and removes it from the queue's record of its groups, which trimming
// waits for. Its retry lane and dead letters stay. Use it for a group
// whose consumers will not run again, for example one deleted by hand,
// which would otherwise hold back trimming; a consumer of the group that
// runs recreates it. It returns an error wrapping delaystream.ErrNotFound
// when the group is neither on the queue's streams nor in its record, and
// delaystream.ErrInvalidOption for an invalid name.
func (in *Operator) ForgetGroup(ctx context.Context, queue, g string) error {
	if err := stream.ValidateName("group", g); err != nil {
		return invalid(err)
	}
	h, err := in.open(ctx, queue)
	if err != nil {
		return err
	}
	if err := in.knownGroup(ctx, h, g); err != nil {
		return err
	}
	return group.Forget(ctx, in.rdb, queue, g, in.groupOpts(h)...)
}

// knownGroup returns nil when group g of h is on the queue's streams or
// in its record of groups, else an error wrapping
// delaystream.ErrNotFound.
func (in *Operator) knownGroup(ctx context.Context, h *handle, g string) error {
	names, err := in.groupNames(ctx, h)
	if err != nil {
		return err
	}
	if slices.Contains(names, g) {
		return nil
	}
	pipe := in.rdb.Pipeline()
	cmds := make([]*redis.BoolCmd, h.layout.Shards())
	for i := range cmds {
		cmds[i] = pipe.SIsMember(ctx, h.layout.Shard(i).Groups(), g)
	}
	if _, err := pipe.Exec(ctx); err != nil && !isNil(err) {
		return fmt.Errorf("groups of %s: %w", h.info.Name, err)
	}
	for _, c := range cmds {
		if c.Val() {
			return nil
		}
	}
	return fmt.Errorf("group %s of %s: %w", g, h.info.Name, delaystream.ErrNotFound)
}
