package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/delay"
	"github.com/delaystream/delaystream/stream"
)

func TestRun(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })

	var out bytes.Buffer
	require.NoError(t, run(t.Context(), rdb, &out))
	t.Logf("output:\n%s", out.String())

	q, err := delay.New(rdb, queueName)
	require.NoError(t, err)
	key := q.Keys().Main().Stream

	// Nothing is left waiting, and the stream holds the three messages.
	waiting, err := q.Len(t.Context())
	require.NoError(t, err)
	assert.Zero(t, waiting, "messages still waiting")
	entries, err := rdb.XRange(t.Context(), key, "-", "+").Result()
	require.NoError(t, err)
	require.Len(t, entries, 3)

	ids := make(map[string]bool)
	for _, x := range entries {
		e, err := stream.Decode(key, x.ID, x.Values)
		require.NoError(t, err)
		ids[e.Envelope.ID] = true
		assert.False(t, e.Appended().Before(e.Envelope.Due),
			"%s early: appended %s, due %s", e.Envelope.ID, e.Appended(), e.Envelope.Due)
		assert.Contains(t, out.String(), "delivered "+e.Envelope.ID)
	}
	assert.True(t, ids["order:5001:cancel"], "deterministic id missing: %v", ids)
	assert.Equal(t, 3, strings.Count(out.String(), "delivered "))
	assert.Contains(t, out.String(), "again: kept")

	// The group read and acknowledged every entry.
	pending, err := rdb.XPending(t.Context(), key, groupName).Result()
	require.NoError(t, err)
	assert.Zero(t, pending.Count, "entries left unacknowledged")
}
