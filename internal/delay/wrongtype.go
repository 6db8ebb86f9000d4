package delay

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream/internal/memory"
	"github.com/delaystream/delaystream/internal/reach"
	"github.com/delaystream/delaystream/internal/scripts"
	"github.com/delaystream/delaystream/internal/stream"
)

// explain turns the error of a call on a lane's keys into what callers can
// act on: a script error is explained (scripts.Explain), a WRONGTYPE
// reply, which names no key, becomes the *stream.KeyTypeError of the key
// that holds the wrong type, and a call that ran out of time while Redis
// could not be reached says why (reach.Explain). keys are the call's
// KEYS, in the order every script of this package takes them: the
// delayed set (a ZSET), then, if given, the envelopes (a HASH).
func explain(ctx context.Context, rdb redis.UniversalClient, err error, keys []string) error {
	err = memory.Explain(ctx, rdb, scripts.Explain(err))
	if len(keys) > 0 {
		err = reach.Explain(ctx, rdb, err, keys[0])
	}
	types := make([]stream.KeyType, 0, 2)
	for i, k := range keys[:min(len(keys), 2)] {
		want := "zset"
		if i == 1 {
			want = "hash"
		}
		types = append(types, stream.KeyType{Key: k, Want: want})
	}
	return stream.ExplainWrongType(ctx, rdb, err, types...)
}
