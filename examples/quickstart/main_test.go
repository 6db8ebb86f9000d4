package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/examples/internal/examplecheck"
)

func TestRun(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })

	var out bytes.Buffer
	got, err := run(t.Context(), rdb, &out)
	require.NoError(t, err)
	t.Logf("output:\n%s", out.String())

	// Each of the three messages was handled exactly once, none before it
	// was due.
	require.Len(t, got, 3)
	ids := make(map[string]bool)
	for _, d := range got {
		assert.False(t, ids[d.ID], "%s handled twice", d.ID)
		ids[d.ID] = true
		assert.False(t, d.Handled.Before(d.Due), "%s early: handled %s, due %s", d.ID, d.Handled, d.Due)
		assert.Contains(t, out.String(), "delivered "+d.ID)
	}
	assert.True(t, ids["order:5001:cancel"], "deterministic id missing: %v", ids)
	assert.Equal(t, 3, strings.Count(out.String(), "delivered "))
	assert.Contains(t, out.String(), "again: kept")
	assert.Contains(t, out.String(), "done: printer acked 3, 0 pending")

	// Nothing is left waiting, and the group acknowledged every entry.
	examplecheck.Settled(t, rdb, queueName, groupName)
}
