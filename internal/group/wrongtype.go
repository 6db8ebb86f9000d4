package group

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream/internal/memory"
	"github.com/delaystream/delaystream/internal/reach"
	"github.com/delaystream/delaystream/internal/scripts"
	"github.com/delaystream/delaystream/internal/stream"
)

// keyTypes lists the keys of shard k that a group uses, with the types it
// keeps there: the queue's delayed set and stream, the group's retry lane
// (delayed set, envelopes, stream) and its dead letters. The retry lane's
// promotion explains its own keys (internal/engine).
func keyTypes(k stream.Keys, group string) []stream.KeyType {
	main, retry := k.Main(), k.Retry(group)
	return []stream.KeyType{
		{Key: main.Delayed, Want: "zset"}, {Key: main.Stream, Want: "stream"},
		{Key: retry.Delayed, Want: "zset"}, {Key: retry.Envelopes, Want: "hash"}, {Key: retry.Stream, Want: "stream"},
		{Key: k.DeadLetters(group), Want: "stream"},
	}
}

// explain turns the error of a call on the keys of shard sh into what logs
// and callers can act on: a script error is explained (scripts.Explain),
// and a WRONGTYPE reply, which names no key, becomes the
// *stream.KeyTypeError of the key that holds the wrong type. It makes a
// call to Redis only after a WRONGTYPE reply.
func (c *core) explain(ctx context.Context, err error, sh *shard) error {
	if err == nil {
		return nil
	}
	err = memory.Explain(ctx, c.rdb, scripts.Explain(err))
	if sh == nil { // not a stream of this group's: nothing to ask about
		return err
	}
	return explainShard(ctx, c.rdb, err, c.layout.Shard(sh.i), c.group)
}

// explainShard is core.explain for callers without a core.
func explainShard(ctx context.Context, rdb redis.UniversalClient, err error, k stream.Keys, group string) error {
	return stream.ExplainWrongType(ctx, rdb, err, keyTypes(k, group)...)
}

// explain is core.explain for the dead-letter handle: a WRONGTYPE reply
// becomes the *stream.KeyTypeError of whichever of its keys (every shard's
// dead letters and retry lane's delayed set and envelopes) holds the wrong
// type, and a call that ran out of time while Redis could not be reached
// says why (reach.Explain).
func (d *DeadLetters) explain(ctx context.Context, err error) error {
	err = reach.Explain(ctx, d.rdb, err, d.shards[0].key)
	types := make([]stream.KeyType, 0, 3*len(d.shards))
	for _, sh := range d.shards {
		types = append(types, stream.KeyType{Key: sh.key, Want: "stream"},
			stream.KeyType{Key: sh.retry.Delayed, Want: "zset"}, stream.KeyType{Key: sh.retry.Envelopes, Want: "hash"})
	}
	return stream.ExplainWrongType(ctx, d.rdb, err, types...)
}
