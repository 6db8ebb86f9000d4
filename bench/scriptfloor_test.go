package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// script-floor delivers every message once and never before the due time
// its script stored, with one script call per message and one per take,
// and leaves nothing behind.
func TestScriptFloorOneScriptPerMessage(t *testing.T) {
	t.Parallel()
	addr, admin := floorServer(t)
	ctx := context.Background()

	s := newScriptFloor(addr, 20*time.Millisecond)
	t.Cleanup(s.Close)
	const n = 30
	// Loaded first, so that no EVALSHA answered NOSCRIPT is counted.
	require.NoError(t, scriptFloorSchedule.Load(ctx, admin).Err())
	require.NoError(t, scriptFloorTake.Load(ctx, admin).Err())
	d := floorTrickle(t, s, admin, n, 15*time.Millisecond)
	assert.Equal(t, int64(n), d.by["zadd"], "one ZADD per message")
	assert.Equal(t, d.by["evalsha"], int64(n)+d.by["zrangebyscore"], "one script per message plus one per take")
	assert.Zero(t, admin.Exists(ctx, scriptFloorKey).Val(), "every message taken")
}

// An absolute due time is refused: the floor stands for the trickle's
// relative ones, resolved by the Redis clock.
func TestScriptFloorRefusesAbsoluteTimes(t *testing.T) {
	t.Parallel()
	addr, _ := floorServer(t)
	s := newScriptFloor(addr, time.Second)
	t.Cleanup(s.Close)
	err := s.ScheduleOne(context.Background(), payloadFor(0, time.Now(), 64), when{abs: true, at: time.Now()})
	require.ErrorContains(t, err, "only relative due times")
}
