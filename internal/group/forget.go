package group

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream/internal/heal"
	"github.com/delaystream/delaystream/internal/stream"
)

// Forget removes group from queue for good: it destroys the group on every
// shard's queue stream (its position and its pending entries) and removes
// it from the record of the queue's groups (stream.Keys.Groups), so that
// trimming no longer keeps entries for it. Every consumer records its group
// when it starts, and trimming keeps everything while a recorded group is
// missing from a stream (someone deleted the stream and the group's
// consumers have not recreated it yet), so a group retired without Forget
// holds back trimming once it is gone from a stream. The group's retry
// lane and dead letters stay: DeadLetters.PurgeAll removes the latter.
// Call it only when no consumer of the group runs: one that does creates
// the group again. opts: only WithPrefix and WithShards matter.
func Forget(ctx context.Context, rdb redis.UniversalClient, queue, group string, opts ...Option) error {
	layout, err := resolve(rdb, queue, group, opts)
	if err != nil {
		return err
	}
	pipe := rdb.Pipeline()
	type call struct {
		key, want string // the key and its type
		cmd       redis.Cmder
	}
	calls := make([]call, 0, 2*layout.Shards())
	for i := range layout.Shards() {
		k := layout.Shard(i)
		calls = append(calls,
			call{k.Main().Stream, "stream", pipe.XGroupDestroy(ctx, k.Main().Stream, group)},
			call{k.Groups(), "set", pipe.SRem(ctx, k.Groups(), group)})
	}
	_, _ = pipe.Exec(ctx) // errors are per command
	for _, c := range calls {
		err := c.cmd.Err()
		// A stream that does not exist has no group to destroy (Redis
		// answers "ERR The XGROUP subcommand requires the key to exist";
		// HasErrorPrefix compares without the "ERR ").
		if err == nil || redis.HasErrorPrefix(err, "The XGROUP subcommand requires the key to exist") {
			continue
		}
		heal.After(rdb, err)
		return fmt.Errorf("forget group %s of %s on %s: %w", group, queue, c.key,
			stream.ExplainWrongType(ctx, rdb, err, stream.KeyType{Key: c.key, Want: c.want}))
	}
	return nil
}
