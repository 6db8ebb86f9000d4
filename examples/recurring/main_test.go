package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRun(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })

	var out bytes.Buffer
	got, err := run(t.Context(), rdb, &out)
	require.NoError(t, err)
	t.Logf("output:\n%s", out.String())

	// Both replicas defined the schedules: one created them, one kept them.
	assert.Contains(t, out.String(), "replica-1: defined heartbeat: created")
	assert.Contains(t, out.String(), "replica-2: defined heartbeat: kept")
	// Every heartbeat once, one second apart, across the stop.
	require.GreaterOrEqual(t, len(got), beatCount)
	var at []time.Time
	for _, s := range got {
		ts, err := time.Parse(time.RFC3339Nano, s)
		require.NoError(t, err)
		at = append(at, ts)
	}
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	for i := 1; i < len(at); i++ {
		assert.Equal(t, time.Second, at[i].Sub(at[i-1]), "heartbeats %s and %s", at[i-1], at[i])
	}
	assert.Contains(t, out.String(), "replica-1 stopped")
	assert.Contains(t, out.String(), "weekly-digest (cron CRON_TZ=Europe/Berlin 0 9 * * MON): next ")
	assert.Equal(t, 1, strings.Count(out.String(), "heartbeat deleted"))
}
