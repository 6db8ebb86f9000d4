package delay_test

import (
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/codec"
	"github.com/delaystream/delaystream/internal/delay"
	"github.com/delaystream/delaystream/internal/stream"
)

func TestNew(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	t.Cleanup(func() { _ = rdb.Close() })

	tests := []struct {
		name  string
		rdb   redis.UniversalClient
		queue string
		opts  []delay.Option
		msg   string // substring of the error; "" = valid
	}{
		{name: "defaults", rdb: rdb, queue: "orders"},
		{name: "every option", rdb: rdb, queue: "orders", opts: []delay.Option{
			delay.WithPrefix("app"), delay.WithCodec(codec.JSON), delay.WithMaxPayload(64 << 20),
			delay.WithDuplicatePolicy(delay.Reject), delay.WithBatchSize(delay.MaxBatchSize), delay.WithShards(stream.MaxShards)}},
		{name: "smallest limits", rdb: rdb, queue: "q", opts: []delay.Option{
			delay.WithMaxPayload(1), delay.WithBatchSize(1), delay.WithDuplicatePolicy(delay.Keep), delay.WithShards(1)}},
		{name: "nil client", rdb: nil, queue: "orders", msg: "nil redis client"},
		{name: "empty queue", rdb: rdb, queue: "", msg: "queue name is empty"},
		{name: "queue with braces", rdb: rdb, queue: "{orders}", msg: "queue name"},
		{name: "queue with space", rdb: rdb, queue: "my orders", msg: "queue name"},
		{name: "queue too long", rdb: rdb, queue: strings.Repeat("q", stream.MaxNameLen+1), msg: "queue name is 129 bytes"},
		{name: "queue not UTF-8", rdb: rdb, queue: "q\xff", msg: "not valid UTF-8"},
		{name: "nil option", rdb: rdb, queue: "q", opts: []delay.Option{nil}, msg: "nil option"},
		{name: "empty prefix", rdb: rdb, queue: "q", opts: []delay.Option{delay.WithPrefix("")}, msg: "prefix name is empty"},
		{name: "prefix with brace", rdb: rdb, queue: "q", opts: []delay.Option{delay.WithPrefix("a}")}, msg: "prefix name"},
		{name: "nil codec", rdb: rdb, queue: "q", opts: []delay.Option{delay.WithCodec(nil)}, msg: "nil codec"},
		{name: "zero max payload", rdb: rdb, queue: "q", opts: []delay.Option{delay.WithMaxPayload(0)}, msg: "max payload (bytes) must be 1..67108864, got 0"},
		{name: "max payload too large", rdb: rdb, queue: "q", opts: []delay.Option{delay.WithMaxPayload(64<<20 + 1)}, msg: "max payload"},
		{name: "queue-default policy", rdb: rdb, queue: "q", opts: []delay.Option{delay.WithDuplicatePolicy(delay.QueueDefault)}, msg: "unknown duplicate policy 0"},
		{name: "unknown policy", rdb: rdb, queue: "q", opts: []delay.Option{delay.WithDuplicatePolicy(delay.Policy(7))}, msg: "unknown duplicate policy 7"},
		{name: "negative policy", rdb: rdb, queue: "q", opts: []delay.Option{delay.WithDuplicatePolicy(delay.Policy(-1))}, msg: "unknown duplicate policy -1"},
		{name: "zero batch size", rdb: rdb, queue: "q", opts: []delay.Option{delay.WithBatchSize(0)}, msg: "batch size must be 1..5000, got 0"},
		{name: "batch size too large", rdb: rdb, queue: "q", opts: []delay.Option{delay.WithBatchSize(delay.MaxBatchSize + 1)}, msg: "batch size"},
		{name: "zero shards", rdb: rdb, queue: "q", opts: []delay.Option{delay.WithShards(0)}, msg: "shard count must be 1..1024, got 0"},
		{name: "negative shards", rdb: rdb, queue: "q", opts: []delay.Option{delay.WithShards(-3)}, msg: "shard count must be 1..1024, got -3"},
		{name: "too many shards", rdb: rdb, queue: "q", opts: []delay.Option{delay.WithShards(stream.MaxShards + 1)}, msg: "shard count must be 1..1024, got 1025"},
		{name: "first bad option wins", rdb: rdb, queue: "q", opts: []delay.Option{delay.WithBatchSize(-1), delay.WithCodec(nil)}, msg: "batch size"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			q, err := delay.New(tt.rdb, tt.queue, tt.opts...)
			if tt.msg == "" {
				require.NoError(t, err)
				require.NotNil(t, q)
				assert.Equal(t, tt.queue, q.Name())
				return
			}
			require.Error(t, err)
			assert.Nil(t, q)
			assert.ErrorIs(t, err, delay.ErrInvalidOption)
			assert.Contains(t, err.Error(), tt.msg)
			// One prefix: "delaystream: invalid option: ..." or, for a
			// name (an invalid option too), "delaystream: invalid name: ...".
			assert.True(t, strings.HasPrefix(err.Error(), "delaystream: invalid "), "error %q", err)
			assert.Equal(t, 1, strings.Count(err.Error(), "delaystream:"), "error %q", err)
		})
	}
}

func TestNewAccessors(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = rdb.Close() })

	q, err := delay.New(rdb, "orders")
	require.NoError(t, err)
	assert.Equal(t, codec.Msgpack, q.Codec())
	assert.Equal(t, "ds:1:{orders}:z", q.Keys().Main().Delayed)

	q, err = delay.New(rdb, "orders", delay.WithPrefix("app"), delay.WithCodec(codec.JSON))
	require.NoError(t, err)
	assert.Equal(t, codec.JSON, q.Codec())
	assert.Equal(t, "app:1:{orders}:s", q.Keys().Main().Stream)
	assert.Equal(t, "orders", q.Keys().Tag())
	assert.Equal(t, 1, q.Shards(), "one shard by default")
	assert.Equal(t, 1, q.Layout().Shards())
	assert.Equal(t, q.Layout().Shard(0), q.Keys(), "one shard: the unsharded layout")
	assert.Equal(t, "app:1:{orders}:q", q.Layout().Meta())

	q, err = delay.New(rdb, "orders", delay.WithShards(8))
	require.NoError(t, err)
	assert.Equal(t, 8, q.Shards())
	l := q.Layout()
	require.Equal(t, 8, l.Shards())
	assert.Equal(t, "orders", l.Queue())
	assert.Equal(t, l.Shard(0), q.Keys(), "Keys is shard 0's")
	assert.NotEqual(t, "orders", q.Keys().Tag(), "a sharded queue's shard 0 has a tag of its own")
	assert.Equal(t, "ds:1:{orders}:q", l.Meta(), "the record lives under the queue's own tag")
}

func TestStrings(t *testing.T) {
	t.Parallel()
	tests := []struct {
		got, want string
	}{
		{delay.QueueDefault.String(), "queue-default"},
		{delay.Keep.String(), "keep"},
		{delay.Replace.String(), "replace"},
		{delay.Reject.String(), "reject"},
		{delay.Policy(9).String(), "Policy(9)"},
		{delay.Unknown.String(), "unknown"},
		{delay.Created.String(), "created"},
		{delay.Replaced.String(), "replaced"},
		{delay.Kept.String(), "kept"},
		{delay.Rejected.String(), "rejected"},
		{delay.Outcome(-2).String(), "Outcome(-2)"},
		{delay.After(1500 * 1e6).String(), "after 1.5s"},
		{delay.At(mustTime(t, "2030-01-02T03:04:05.000000006Z")).String(), "at 2030-01-02T03:04:05.000000006Z"},
		{delay.When{}.String(), "invalid When"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, tt.got)
		})
	}
}
