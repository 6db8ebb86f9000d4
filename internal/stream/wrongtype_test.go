package stream_test

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/internal/redistest"
	"github.com/delaystream/delaystream/internal/stream"
)

// A WRONGTYPE reply names no key; ExplainWrongType finds it, and leaves
// every other error (and nil) as it is.
func TestExplainWrongType(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	p := redistest.Prefix(t)
	good, bad := p+":good", p+":bad"
	require.NoError(t, rdb.ZAdd(ctx, good, redis.Z{Score: 1, Member: "m"}).Err())
	require.NoError(t, rdb.Set(ctx, bad, "foreign", 0).Err())
	keys := []stream.KeyType{{Key: p + ":absent", Want: "hash"}, {Key: good, Want: "zset"}, {Key: bad, Want: "zset"}}

	reply := rdb.ZCard(ctx, bad).Err()
	require.Error(t, reply)
	err := stream.ExplainWrongType(ctx, rdb, reply, keys...)
	var kte *stream.KeyTypeError
	require.ErrorAs(t, err, &kte)
	assert.Equal(t, stream.KeyTypeError{Key: bad, Want: "zset", Got: "string"}, *kte)
	assert.ErrorIs(t, err, stream.ErrWrongType)

	assert.NoError(t, stream.ExplainWrongType(ctx, rdb, nil, keys...))
	other := errors.New("something else")
	assert.Same(t, other, stream.ExplainWrongType(ctx, rdb, other, keys...))
	// No key of the list is wrong (the reply was about another key): the
	// reply is kept.
	assert.Equal(t, reply, stream.ExplainWrongType(ctx, rdb, reply, keys[:2]...))
}
