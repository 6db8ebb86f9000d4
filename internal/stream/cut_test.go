package stream_test

import (
	"bytes"
	"context"
	"strings"
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

// ReadQuarantineCut reads the quarantine as ReadQuarantine does, but for
// the envelopes and members it holds: at most their headers and first
// maxPayload payload bytes, with their whole sizes.
func TestReadQuarantineCut(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	k, err := stream.NewKeys(redistest.Prefix(t), "q", 0, 1)
	require.NoError(t, err)
	key := k.Main().Quarantine

	got, err := stream.ReadQuarantineCut(ctx, rdb, key+"-none", "", 10, 5)
	require.NoError(t, err)
	assert.Empty(t, got, "a missing stream")

	env := string(wire.MarshalEnvelope(&codec.Envelope{Payload: []byte(strings.Repeat("p", 3000)),
		Headers: map[string]string{"h": strings.Repeat("v", 100)}, Attempt: 1, Created: time.UnixMilli(1_700_000_000_000)}))
	packed := "\x01" + "0123456789ABCDEF" + env
	add := func(values ...any) {
		require.NoError(t, rdb.XAdd(ctx, &redis.XAddArgs{Stream: key, Values: values}).Err())
	}
	add(wire.FieldID, "a", wire.FieldDue, "1700000000000", wire.FieldReason, "unknown envelope format", wire.FieldEnvelope, env)
	add(wire.FieldDue, "1700000000000", wire.FieldReason, "invalid due time", wire.FieldMember, packed)
	add(wire.FieldReason, "unknown member format", wire.FieldMember, "\x02"+strings.Repeat("j", 3000))
	add(wire.FieldID, "b", wire.FieldReason, "missing envelope")

	whole, err := stream.ReadQuarantine(ctx, rdb, key, "", 100)
	require.NoError(t, err)
	require.Len(t, whole, 4)
	for _, max := range []int{1, 50, 100000} {
		cut, err := stream.ReadQuarantineCut(ctx, rdb, key, "", 100, max)
		require.NoError(t, err)
		require.Len(t, cut, len(whole))
		for i, w := range whole {
			c := cut[i]
			assert.Equal(t, w.EntryID, c.EntryID, i)
			assert.Equal(t, w.MessageID, c.MessageID, i)
			assert.True(t, w.Due.Equal(c.Due), i)
			assert.Equal(t, w.Reason, c.Reason, i)
			assert.True(t, bytes.HasPrefix(w.Raw, c.Raw), "%d: Raw cut is a prefix", i)
			assert.True(t, bytes.HasPrefix(w.Member, c.Member), "%d: Member cut is a prefix", i)
			assert.Equal(t, len(w.Raw), c.RawSize, i)
			assert.Equal(t, len(w.Member), c.MemberSize, i)
			if len(w.Raw) > 0 {
				var we, ce codec.Envelope
				require.NoError(t, wire.UnmarshalEnvelope(w.Raw, &we), i)
				require.NoError(t, wire.UnmarshalEnvelope(c.Raw, &ce), "%d: a cut envelope decodes", i)
				assert.Equal(t, we.Headers, ce.Headers, i)
				assert.Equal(t, we.Payload[:min(max, len(we.Payload))], ce.Payload, i)
			}
		}
		assert.Equal(t, "0123456789ABCDEF", cut[1].MessageID[10:], "a packed member's id, from its cut")
		assert.LessOrEqual(t, len(cut[2].Member), max, "a member of no kind, cut")
	}

	page, err := stream.ReadQuarantineCut(ctx, rdb, key, whole[1].EntryID, 2, 10)
	require.NoError(t, err)
	require.Len(t, page, 2)
	assert.Equal(t, []string{whole[2].EntryID, whole[3].EntryID}, []string{page[0].EntryID, page[1].EntryID})

	other := key + "-string"
	require.NoError(t, rdb.Set(ctx, other, "x", 0).Err())
	_, err = stream.ReadQuarantineCut(ctx, rdb, other, "", 1, 10)
	require.ErrorIs(t, err, stream.ErrWrongType)
}

// ReadGroups reads a stream's groups as ReadInfo does, without the stream's
// entries; none for a stream that does not exist.
func TestReadGroups(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	k, err := stream.NewKeys(redistest.Prefix(t), "q", 0, 1)
	require.NoError(t, err)
	key := k.Main().Stream

	gs, err := stream.ReadGroups(ctx, rdb, key)
	require.NoError(t, err)
	assert.Empty(t, gs)
	require.NoError(t, rdb.XGroupCreateMkStream(ctx, key, "billing", "0").Err())
	require.NoError(t, rdb.XGroupCreate(ctx, key, "bad name", "0").Err())
	info, err := stream.ReadInfo(ctx, rdb, key)
	require.NoError(t, err)
	gs, err = stream.ReadGroups(ctx, rdb, key)
	require.NoError(t, err)
	assert.ElementsMatch(t, info.Groups, gs)
	assert.Len(t, gs, 2)
}
