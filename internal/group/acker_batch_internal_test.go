package group

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/internal/redistest"
	"github.com/delaystream/delaystream/internal/stream"
)

// Sixteen queued acknowledgements are sent at once, without waiting for
// the ack delay or a read to ride with, so that what a crash leaves handled
// but unacknowledged stays within about sixteen entries. The delay is an
// hour here: acknowledgements that waited for it would never be sent
// within the test.
func TestAckerSendsABatchWithoutWaiting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const n = 16
	rdb, layout, ids := readEntries(t, n)
	main := layout.Shard(0).Main().Stream
	c, _, a := newAckerRun(rdb, layout)
	a.delay = time.Hour
	done := make(chan struct{})
	go func() { defer close(done); a.run() }()
	for _, id := range ids {
		a.add(ackReq{stream: main, id: id, success: true})
	}
	require.Eventually(t, func() bool { return c.ctr.acked.Load() == n }, 5*time.Second, 5*time.Millisecond,
		"a full batch is acknowledged without waiting for the delay")
	p, err := rdb.XPending(ctx, main, "g").Result()
	require.NoError(t, err)
	assert.Zero(t, p.Count, "nothing left pending")
	a.close()
	<-done
}

// readEntries adds n entries to the main stream of queue "q" (a test
// prefix) and reads them as consumer "c" of group "g": they are pending.
// It returns the client, the queue's layout and the entries' ids.
func readEntries(t *testing.T, n int) (*redis.Client, *stream.Layout, []string) {
	t.Helper()
	ctx := context.Background()
	rdb := redistest.Client(t)
	layout, err := stream.NewLayout(redistest.Prefix(t), "q", 1)
	require.NoError(t, err)
	main := layout.Shard(0).Main().Stream
	require.NoError(t, rdb.XGroupCreateMkStream(ctx, main, "g", "0").Err())
	ids := make([]string, n)
	for i := range ids {
		ids[i], err = rdb.XAdd(ctx, &redis.XAddArgs{Stream: main, Values: []string{"n", fmt.Sprint(i)}}).Result()
		require.NoError(t, err)
	}
	_, err = rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: "c", Streams: []string{main, ">"}, Count: int64(n)}).Result()
	require.NoError(t, err)
	return rdb, layout, ids
}

// newAckerRun returns the core of group "g" of the queue of layout, a
// run state of it and its acker (not running).
func newAckerRun(rdb *redis.Client, layout *stream.Layout) (*core, *runState, *acker) {
	c := &core{}
	c.init(rdb, layout, "g", nil, defaultConfig())
	r := &runState{c: c, log: slog.New(slog.NewTextHandler(io.Discard, nil)), opCtx: context.Background()}
	return c, r, newAcker(r, newTrimmer(r))
}
