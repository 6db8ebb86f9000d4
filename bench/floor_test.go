package main

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/internal/redistest"
)

// floorServer starts a redis-server for a floor's test and returns its
// address and a client of it, both closed when the test ends.
func floorServer(t *testing.T) (string, *redis.Client) {
	t.Helper()
	srv, err := redistest.Spawn()
	require.NoError(t, err, "the floors' tests need a redis-server on PATH (apt-get install -y redis-server)")
	t.Cleanup(srv.Stop)
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { admin.Close() })
	return srv.Addr, admin
}

// floorTrickle starts s, schedules n messages on it one call at a time,
// due after 0 to 4 steps, waits until all are delivered and stops it; it
// asserts each was delivered once and none early, and returns the
// server's commands over the run.
func floorTrickle(t *testing.T, s system, admin *redis.Client, n int, step time.Duration) redisDelta {
	t.Helper()
	ctx := context.Background()
	tr := newTracker(n)
	require.NoError(t, s.Start(ctx, tr.handler))
	s0, err := takeSnap(ctx, admin)
	require.NoError(t, err)
	for i := range n {
		d := time.Duration(i%5) * step
		require.NoError(t, s.ScheduleOne(ctx, payloadFor(i, time.Now().Add(d), 64), when{in: d}))
	}
	require.True(t, tr.wait(5*time.Second), "every message delivered")
	s.Stop()
	s1, err := takeSnap(ctx, admin)
	require.NoError(t, err)
	sum := tr.summarize()
	assert.Equal(t, n, sum.delivered)
	assert.Zero(t, sum.dups)
	assert.Zero(t, sum.early, "never before the due time")
	return s0.delta(s1)
}

// rt-floor delivers every message once, not before its due time, with
// exactly two commands per message (its SET and its GETDEL), and leaves
// nothing behind.
func TestFloorTwoRoundTripsPerMessage(t *testing.T) {
	t.Parallel()
	addr, admin := floorServer(t)
	ctx := context.Background()

	s := newFloor(addr)
	t.Cleanup(s.Close)
	const n = 20
	d := floorTrickle(t, s, admin, n, 10*time.Millisecond)
	assert.Equal(t, int64(n), d.by["set"])
	assert.Equal(t, int64(n), d.by["getdel"])
	assert.Zero(t, admin.DBSize(ctx).Val(), "every key fetched and deleted")
}

// A message still waiting when the system stops is neither fetched nor
// waited for.
func TestFloorStopCancelsWaiting(t *testing.T) {
	t.Parallel()
	addr, _ := floorServer(t)
	s := newFloor(addr)
	tr := newTracker(1)
	require.NoError(t, s.Start(context.Background(), tr.handler))
	require.NoError(t, s.ScheduleOne(context.Background(), payloadFor(0, time.Now().Add(time.Hour), 64), when{in: time.Hour}))
	done := make(chan struct{})
	go func() { s.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("Close waited for a message due in an hour")
	}
	assert.Zero(t, tr.summarize().delivered)
	assert.Error(t, s.ScheduleOne(context.Background(), payloadFor(0, time.Now(), 64), when{}), "scheduling after Stop")
}
