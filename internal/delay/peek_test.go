package delay_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/internal/delay"
	"github.com/delaystream/delaystream/internal/stream"
)

func TestPeek(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		q := b.queue(t)
		past := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
		_, err := q.Schedule(ctx, delay.Message{ID: "late", Payload: []byte("p-late"), Headers: map[string]string{"k": "v"}}, delay.At(past))
		require.NoError(t, err)
		_, err = q.Schedule(ctx, delay.Message{ID: "hour", Payload: []byte("p-hour")}, delay.After(time.Hour))
		require.NoError(t, err)
		gen, err := q.Schedule(ctx, delay.Message{Payload: []byte("p-gen")}, delay.After(2*time.Hour))
		require.NoError(t, err)
		// What someone else wrote: a plain member without an envelope,
		// and a member of no known kind.
		keys := q.Keys().Main()
		require.NoError(t, b.rdb.ZAdd(ctx, keys.Delayed, redis.Z{Member: "orphan", Score: float64(time.Now().Add(3 * time.Hour).UnixMilli())}).Err())
		require.NoError(t, b.rdb.ZAdd(ctx, keys.Delayed, redis.Z{Member: "\x02junk", Score: float64(time.Now().Add(4 * time.Hour).UnixMilli())}).Err())
		before := b.keys(t)

		ws, err := q.Peek(ctx, 10)
		require.NoError(t, err)
		require.Len(t, ws, 5)
		assert.Equal(t, "late", ws[0].ID)
		assert.True(t, ws[0].Overdue)
		assert.True(t, past.Equal(ws[0].Due))
		assert.Equal(t, "p-late", string(ws[0].Envelope.Payload))
		assert.Equal(t, map[string]string{"k": "v"}, ws[0].Envelope.Headers)
		assert.Equal(t, "late", ws[0].Envelope.ID)
		assert.Equal(t, 1, ws[0].Envelope.Attempt)
		assert.Equal(t, "hour", ws[1].ID)
		assert.False(t, ws[1].Overdue)
		assert.Equal(t, gen.ID, ws[2].ID, "a generated id, read from its packed member")
		assert.Equal(t, "p-gen", string(ws[2].Envelope.Payload))
		assert.True(t, gen.Due.Equal(ws[2].Due))
		assert.Equal(t, "orphan", ws[3].ID)
		assert.Equal(t, stream.ReasonMissingEnvelope, ws[3].Problem)
		assert.Equal(t, stream.ReasonUnknownMember, ws[4].Problem)
		assert.Equal(t, []byte("\x02junk"), ws[4].Member)
		for i, w := range ws {
			assert.Zero(t, w.Shard)
			if i < 3 {
				assert.Empty(t, w.Problem, w.ID)
				if w.ID != gen.ID {
					assert.Nil(t, w.Member, "a plain member is its id")
				}
			}
		}

		ws, err = q.Peek(ctx, 2)
		require.NoError(t, err)
		assert.Len(t, ws, 2)
		assert.Equal(t, before, b.keys(t), "Peek wrote something")

		_, err = q.Peek(ctx, 0)
		require.ErrorIs(t, err, delay.ErrInvalidOption)
		_, err = q.Peek(ctx, delay.MaxPeek+1)
		require.ErrorIs(t, err, delay.ErrInvalidOption)
	})
}

// TestPeekShards merges every shard in due order, and refuses a producer
// whose shard count is not the queue's, without writing.
func TestPeekShards(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		q := b.queue(t, delay.WithShards(4))
		fresh, err := q.Peek(ctx, 5)
		require.NoError(t, err)
		assert.Empty(t, fresh)
		assert.Zero(t, b.keyCount(t), "Peek of a new queue recorded it")
		base := time.Now().Add(time.Hour).Truncate(time.Millisecond)
		for i := range 20 {
			_, err := q.Schedule(ctx, delay.Message{ID: string(rune('a' + i))}, delay.At(base.Add(time.Duration(i)*time.Second)))
			require.NoError(t, err)
		}
		ws, err := q.Peek(ctx, 7)
		require.NoError(t, err)
		require.Len(t, ws, 7)
		shards := map[int]bool{}
		for i, w := range ws {
			assert.Equal(t, string(rune('a'+i)), w.ID)
			assert.Equal(t, q.Layout().ShardOf(w.ID), w.Shard)
			shards[w.Shard] = true
		}
		assert.Greater(t, len(shards), 1)

		other := b.queue(t, delay.WithShards(2))
		_, err = other.Peek(ctx, 1)
		require.ErrorIs(t, err, stream.ErrShardCount)
	})
}
