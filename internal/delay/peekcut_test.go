package delay_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/internal/delay"
	"github.com/delaystream/delaystream/internal/stream"
)

// PeekCut reports every waiting member as Peek does (ids, due times,
// problems, headers, attempts), but for the payloads: at most the first
// maxPayload bytes of each, with the whole size. Plain and packed members,
// long headers, empty payloads and what someone else wrote included; it
// writes nothing.
func TestPeekCut(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		q := b.queue(t)
		big := []byte(strings.Repeat("0123456789", 1000) + "é")
		headers := map[string]string{"trace": strings.Repeat("h", 300), "k": "v"}
		past := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
		for _, m := range []struct {
			msg  delay.Message
			when delay.When
		}{
			{delay.Message{ID: "late", Payload: big, Headers: headers}, delay.At(past)},
			{delay.Message{ID: "small", Payload: []byte("tiny")}, delay.After(time.Hour)},
			{delay.Message{Payload: big, Headers: headers}, delay.After(2 * time.Hour)}, // packed
			{delay.Message{}, delay.After(3 * time.Hour)},                               // packed, empty payload
			{delay.Message{ID: "empty"}, delay.After(4 * time.Hour)},
		} {
			_, err := q.Schedule(ctx, m.msg, m.when)
			require.NoError(t, err)
		}
		// What someone else wrote: a plain member without an envelope,
		// one whose envelope is no envelope, and a long member of no kind.
		keys := q.Keys().Main()
		at := func(h int) float64 { return float64(time.Now().Add(time.Duration(h) * time.Hour).UnixMilli()) }
		require.NoError(t, b.rdb.ZAdd(ctx, keys.Delayed, redis.Z{Member: "orphan", Score: at(5)}).Err())
		require.NoError(t, b.rdb.ZAdd(ctx, keys.Delayed, redis.Z{Member: "garbage", Score: at(6)}).Err())
		require.NoError(t, b.rdb.HSet(ctx, keys.Envelopes, "garbage", strings.Repeat("not an envelope ", 100)).Err())
		junk := "\x02" + strings.Repeat("j", 5000)
		require.NoError(t, b.rdb.ZAdd(ctx, keys.Delayed, redis.Z{Member: junk, Score: at(7)}).Err())
		before := b.keys(t)

		whole, err := q.Peek(ctx, 20)
		require.NoError(t, err)
		require.Len(t, whole, 8)
		for _, max := range []int{1, 7, 100, 20000} {
			t.Run(fmt.Sprint(max), func(t *testing.T) {
				cut, err := q.PeekCut(ctx, 20, max)
				require.NoError(t, err)
				require.Len(t, cut, len(whole))
				for i, w := range whole {
					c := cut[i]
					assert.Equal(t, w.ID, c.ID, i)
					assert.True(t, w.Due.Equal(c.Due), i)
					assert.Equal(t, w.Overdue, c.Overdue, i)
					assert.Equal(t, w.Problem, c.Problem, i)
					assert.Equal(t, len(w.Envelope.Payload), w.Size, i)
					assert.Equal(t, w.Size, c.Size, "%d: the whole payload's size", i)
					n := min(max, len(w.Envelope.Payload))
					assert.Equal(t, w.Envelope.Payload[:n], c.Envelope.Payload, i)
					assert.Len(t, c.Envelope.Payload, n, i)
					assert.Equal(t, w.Envelope.Headers, c.Envelope.Headers, i)
					assert.Equal(t, w.Envelope.Attempt, c.Envelope.Attempt, i)
					assert.True(t, w.Envelope.Created.Equal(c.Envelope.Created), i)
					assert.Equal(t, w.Envelope.ID, c.Envelope.ID, i)
					assert.True(t, bytes.HasPrefix(w.Member, c.Member), "%d: the member cut is a prefix of it", i)
				}
				assert.Equal(t, "late", cut[0].ID)
				assert.True(t, cut[0].Overdue)
				assert.Equal(t, stream.ReasonMissingEnvelope, cut[5].Problem)
				assert.Equal(t, stream.ReasonUnknownEnvelope, cut[6].Problem)
				assert.Equal(t, stream.ReasonUnknownMember, cut[7].Problem)
				assert.Len(t, cut[7].Member, delay.MaxIDLen, "a member of no kind, cut")
				assert.Equal(t, len(big), cut[2].Size, "a packed member's payload size")
				assert.Less(t, len(cut[2].Member), len(whole[2].Member)-len(big)+max+1, "a packed member, cut")
			})
		}
		assert.Equal(t, before, b.keys(t), "PeekCut wrote something")

		_, err = q.PeekCut(ctx, 1, 0)
		require.ErrorIs(t, err, delay.ErrInvalidOption)
		_, err = q.PeekCut(ctx, 0, 10)
		require.ErrorIs(t, err, delay.ErrInvalidOption)
	})
}

// PeekCut merges the shards in due order as Peek does.
func TestPeekCutShards(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		q := b.queue(t, delay.WithShards(4))
		base := time.Now().Add(time.Hour).Truncate(time.Millisecond)
		for i := range 20 {
			payload := []byte(fmt.Sprintf("%02d:%s", i, strings.Repeat("x", 1000)))
			_, err := q.Schedule(ctx, delay.Message{ID: string(rune('a' + i)), Payload: payload}, delay.At(base.Add(time.Duration(i)*time.Second)))
			require.NoError(t, err)
		}
		ws, err := q.PeekCut(ctx, 7, 3)
		require.NoError(t, err)
		require.Len(t, ws, 7)
		shards := map[int]bool{}
		for i, w := range ws {
			assert.Equal(t, string(rune('a'+i)), w.ID)
			assert.Equal(t, fmt.Sprintf("%02d:", i), string(w.Envelope.Payload))
			assert.Equal(t, 1003, w.Size)
			assert.Equal(t, q.Layout().ShardOf(w.ID), w.Shard)
			shards[w.Shard] = true
		}
		assert.Greater(t, len(shards), 1)
	})
}
