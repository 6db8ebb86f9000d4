package stream_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/codec"
	"github.com/delaystream/delaystream/internal/redistest"
	"github.com/delaystream/delaystream/internal/stream"
	"github.com/delaystream/delaystream/internal/wire"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

func TestReadInfo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	k, err := stream.NewKeys(redistest.Prefix(t), "q", 0, 1)
	require.NoError(t, err)
	key := k.Main().Stream

	t.Run("missing stream", func(t *testing.T) {
		info, err := stream.ReadInfo(ctx, rdb, key+"-none")
		require.NoError(t, err)
		assert.Equal(t, stream.Info{}, info)
	})
	t.Run("wrong type", func(t *testing.T) {
		other := key + "-string"
		require.NoError(t, rdb.Set(ctx, other, "x", 0).Err())
		_, err := stream.ReadInfo(ctx, rdb, other)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "xinfo stream "+other)
		assert.True(t, redis.HasErrorPrefix(err, "WRONGTYPE"), "the Redis error is wrapped: %v", err)
	})
	t.Run("stream with groups", func(t *testing.T) {
		var ids []string
		for i := range 3 {
			env := codec.Envelope{ID: "m" + string(rune('a'+i)), Due: time.UnixMilli(int64(i)), Attempt: 1}
			id, err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: key, Values: wire.Encode(&env)}).Result()
			require.NoError(t, err)
			ids = append(ids, id)
		}
		require.NoError(t, rdb.XGroupCreate(ctx, key, "billing", "0").Err())
		require.NoError(t, rdb.XGroupCreate(ctx, key, "audit", "$").Err())
		res, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "billing", Consumer: "c1",
			Streams: []string{key, ">"}, Count: 2, Block: -1}).Result()
		require.NoError(t, err)
		require.Len(t, res[0].Messages, 2)

		info, err := stream.ReadInfo(ctx, rdb, key)
		require.NoError(t, err)
		assert.Equal(t, int64(3), info.Length)
		assert.Equal(t, int64(3), info.EntriesAdded)
		assert.Equal(t, ids[0], info.FirstID)
		assert.Equal(t, ids[2], info.LastID)
		require.Len(t, info.Groups, 2)
		byName := map[string]stream.GroupInfo{}
		for _, g := range info.Groups {
			byName[g.Name] = g
		}
		assert.Equal(t, stream.GroupInfo{Name: "billing", Consumers: 1, Pending: 2,
			LastDeliveredID: ids[1], EntriesRead: 2, Lag: 1}, byName["billing"])
		audit := byName["audit"]
		assert.Equal(t, ids[2], audit.LastDeliveredID)
		assert.Equal(t, int64(0), audit.Pending)
		assert.Equal(t, int64(0), audit.Lag) // created at "$": nothing to deliver
	})
}

func TestReadQuarantine(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	k, err := stream.NewKeys(redistest.Prefix(t), "q", 0, 1)
	require.NoError(t, err)
	key := k.Main().Quarantine

	t.Run("missing stream", func(t *testing.T) {
		got, err := stream.ReadQuarantine(ctx, rdb, key+"-none", "", 10)
		require.NoError(t, err)
		assert.Empty(t, got)
	})

	add := func(values ...any) string {
		id, err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: key, Values: values}).Result()
		require.NoError(t, err)
		return id
	}
	id1 := add(wire.FieldID, "a", wire.FieldDue, "1700000000000", wire.FieldReason, "missing envelope")
	id2 := add(wire.FieldID, "b", wire.FieldDue, "1700000000001", wire.FieldReason, "unknown envelope format", wire.FieldEnvelope, "\x00garbage")
	id3 := add(wire.FieldID, "c", wire.FieldDue, "not-a-number")
	id4 := add("other", "field")

	t.Run("all", func(t *testing.T) {
		got, err := stream.ReadQuarantine(ctx, rdb, key, "", 100)
		require.NoError(t, err)
		require.Len(t, got, 4)
		assert.Equal(t, stream.Quarantined{EntryID: id1, MessageID: "a", Due: time.UnixMilli(1_700_000_000_000), Reason: "missing envelope"}, got[0])
		assert.Equal(t, stream.Quarantined{EntryID: id2, MessageID: "b", Due: time.UnixMilli(1_700_000_000_001),
			Reason: "unknown envelope format", Raw: []byte("\x00garbage")}, got[1])
		assert.Equal(t, stream.Quarantined{EntryID: id3, MessageID: "c"}, got[2], "a bad due reads as the zero time")
		assert.Equal(t, stream.Quarantined{EntryID: id4}, got[3], "missing fields read as zero values")
	})
	t.Run("paged", func(t *testing.T) {
		page, err := stream.ReadQuarantine(ctx, rdb, key, "0", 2)
		require.NoError(t, err)
		require.Len(t, page, 2)
		assert.Equal(t, []string{id1, id2}, []string{page[0].EntryID, page[1].EntryID})
		page, err = stream.ReadQuarantine(ctx, rdb, key, page[1].EntryID, 2)
		require.NoError(t, err)
		require.Len(t, page, 2)
		assert.Equal(t, []string{id3, id4}, []string{page[0].EntryID, page[1].EntryID})
		page, err = stream.ReadQuarantine(ctx, rdb, key, id4, 2)
		require.NoError(t, err)
		assert.Empty(t, page)
	})
	t.Run("wrong type", func(t *testing.T) {
		other := key + "-string"
		require.NoError(t, rdb.Set(ctx, other, "x", 0).Err())
		_, err := stream.ReadQuarantine(ctx, rdb, other, "", 1)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "read quarantine "+other)
	})
}
