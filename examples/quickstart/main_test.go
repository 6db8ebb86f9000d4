package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/internal/delay"
)

func TestRun(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })

	var out bytes.Buffer
	got, err := run(t.Context(), rdb, &out)
	require.NoError(t, err)
	t.Logf("output:\n%s", out.String())

	// Nothing is left waiting, and each of the three messages was handled
	// exactly once, none before it was due.
	q, err := delay.New(rdb, queueName)
	require.NoError(t, err)
	waiting, err := q.Len(t.Context())
	require.NoError(t, err)
	assert.Zero(t, waiting, "messages still waiting")
	require.Len(t, got, 3)
	ids := make(map[string]bool)
	for _, d := range got {
		assert.False(t, ids[d.ID], "%s handled twice", d.ID)
		ids[d.ID] = true
		assert.False(t, d.Appended.Before(d.Due), "%s early: appended %s, due %s", d.ID, d.Appended, d.Due)
		assert.Contains(t, out.String(), "delivered "+d.ID)
	}
	assert.True(t, ids["order:5001:cancel"], "deterministic id missing: %v", ids)
	assert.Equal(t, 3, strings.Count(out.String(), "delivered "))
	assert.Contains(t, out.String(), "again: kept")

	// The group acknowledged every entry.
	pending, err := rdb.XPending(t.Context(), q.Keys().Main().Stream, groupName).Result()
	require.NoError(t, err)
	assert.Zero(t, pending.Count, "entries left unacknowledged")
}
