package group_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/codec"
	"github.com/delaystream/delaystream/internal/group"
	"github.com/delaystream/delaystream/internal/wire"
)

// ListCut lists the dead letters as List does, on every shard and page
// by page, but for the stored bytes: at most the first maxPayload bytes of
// each payload (and of an undecodable entry's bytes), with the whole
// sizes. Plain and packed entries, long headers, empty payloads and
// undecodable entries included.
func TestDeadLettersListCut(t *testing.T) {
	t.Parallel()
	h := newShardedHarness(t, 2)
	ctx := context.Background()
	dl, err := group.NewDeadLetters(h.rdb, h.queue, "g", group.WithPrefix(h.prefix), group.WithShards(2))
	require.NoError(t, err)
	big := strings.Repeat("0123456789", 500) + "é"
	headers := map[string]string{"h": strings.Repeat("v", 200), "k": "v"}
	env := func(payload string) string {
		return string(wire.MarshalEnvelope(&codec.Envelope{Payload: []byte(payload), Headers: headers, Attempt: 3,
			Created: time.UnixMilli(1_700_000_000_000)}))
	}
	dead := func(fields ...any) []any {
		return append(fields, wire.FieldReason, "attempts exhausted", "x", "boom", "a", "3", "n", "4", "s", "src", "o", "1-0")
	}
	for i, key := range dl.Keys() {
		h.addEntry(key, dead(wire.FieldID, fmt.Sprintf("plain-%d", i), wire.FieldDue, "1700000000000", wire.FieldEnvelope, env(big))...)
		h.addEntry(key, dead(wire.FieldDue, "1700000000000", wire.FieldPacked, "\x01"+"0123456789ABCDEF"+env(big))...)
		h.addEntry(key, dead(wire.FieldID, fmt.Sprintf("junk-%d", i), wire.FieldDue, "1700000000000", wire.FieldEnvelope, strings.Repeat("junk ", 1000))...)
		h.addEntry(key, dead(wire.FieldID, fmt.Sprintf("empty-%d", i), wire.FieldDue, "1700000000000", wire.FieldEnvelope, env(""))...)
	}

	whole, err := dl.List(ctx, "", 100)
	require.NoError(t, err)
	require.Len(t, whole, 8)
	for _, max := range []int{1, 10, 100000} {
		cut, err := dl.ListCut(ctx, "", 100, max, false)
		require.NoError(t, err)
		require.Len(t, cut, len(whole), max)
		for i, w := range whole {
			c := cut[i]
			assert.Equal(t, w.EntryID, c.EntryID, i)
			assert.Equal(t, w.Shard, c.Shard, i)
			assert.Equal(t, w.Decoded, c.Decoded, i)
			assert.Equal(t, w.Reason, c.Reason, i)
			assert.Equal(t, w.LastError, c.LastError, i)
			assert.Equal(t, w.Attempt, c.Attempt, i)
			assert.Equal(t, w.Deliveries, c.Deliveries, i)
			assert.Equal(t, w.Source, c.Source, i)
			assert.Equal(t, w.Envelope.ID, c.Envelope.ID, i)
			assert.Equal(t, w.Envelope.Headers, c.Envelope.Headers, i)
			assert.Equal(t, w.Envelope.Attempt, c.Envelope.Attempt, i)
			assert.True(t, w.Envelope.Created.Equal(c.Envelope.Created), i)
			n := min(max, len(w.Envelope.Payload))
			assert.Equal(t, w.Envelope.Payload[:n], c.Envelope.Payload, i)
			assert.True(t, bytes.HasPrefix(w.Raw, c.Raw), "%d: Raw cut is a prefix of it", i)
			assert.Equal(t, len(w.Raw), c.RawSize, i)
			if w.Decoded {
				assert.Equal(t, len(w.Envelope.Payload), c.PayloadSize(), i)
			} else {
				assert.Equal(t, len(w.Raw), c.PayloadSize(), i)
				assert.LessOrEqual(t, len(c.Raw), max, "%d: undecodable bytes, cut", i)
			}
		}
	}
	decoded := 0
	for _, w := range whole {
		if w.Decoded {
			decoded++
			if len(w.Envelope.Payload) > 0 {
				assert.Equal(t, big, string(w.Envelope.Payload))
			}
		}
	}
	assert.Equal(t, 6, decoded, "plain, packed and empty on each shard")

	// Paged as List is.
	first, err := dl.ListCut(ctx, "", 3, 5, false)
	require.NoError(t, err)
	require.Len(t, first, 3)
	second, err := dl.ListCut(ctx, first[2].EntryID, 3, 5, false)
	require.NoError(t, err)
	require.Len(t, second, 3)
	for i, c := range append(first, second...) {
		assert.Equal(t, whole[i].EntryID, c.EntryID, i)
	}

	_, err = dl.ListCut(ctx, "", 1, 0, false)
	require.ErrorIs(t, err, group.ErrInvalidOption)
	_, err = dl.ListCut(ctx, "", 0, 10, false)
	require.ErrorIs(t, err, group.ErrInvalidOption)
}
