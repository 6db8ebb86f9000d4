package scripts_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/internal/redistest"
	"github.com/delaystream/delaystream/internal/scripts"
)

// A handler's retry publishes its due time on the retry lane's wake channel
// when it becomes the lane's head within the wake horizon, and not when it
// is due beyond it, even as the head: a mover finds it by a look.
func TestRetryWakeHorizon(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rdb := redistest.Client(t)
	p := redistest.Prefix(t) + ":1:{q}"
	s, z, h, wake := p+":s", p+":r:g:z", p+":r:g:m", p+":r:g:w"
	require.NoError(t, rdb.XGroupCreateMkStream(ctx, s, "g", "0").Err())
	ps := rdb.Subscribe(ctx, wake)
	t.Cleanup(func() { _ = ps.Close() })
	_, err := ps.Receive(ctx) // subscription confirmed
	require.NoError(t, err)

	// retry fails entry n with backoff and returns its due ms.
	retry := func(n int, backoff time.Duration) int64 {
		id, err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: s, Values: []string{"p", "x"}}).Result()
		require.NoError(t, err)
		require.NoError(t, rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: "c", Streams: []string{s, ">"}, Count: 1}).Err())
		due, err := scripts.Retry.Run(ctx, rdb, []string{s, z, h}, "g", id, "m"+strconv.Itoa(n), "env", backoff.Milliseconds(), wake).Int64()
		require.NoError(t, err)
		return due
	}
	far := retry(1, scripts.WakeHorizon+time.Second)
	farther := retry(2, 2*scripts.WakeHorizon)
	near := retry(3, time.Minute)
	marker := retry(4, time.Second)
	for member, due := range map[string]int64{"m1": far, "m2": farther} {
		score, err := rdb.ZScore(ctx, z, member).Result()
		require.NoError(t, err, member)
		assert.Equal(t, float64(due), score, "%s waits in the retry lane", member)
	}
	var got []string
	for range 2 {
		msg, err := ps.ReceiveMessage(ctx)
		require.NoError(t, err)
		got = append(got, msg.Payload)
	}
	// Had a far retry published, its due time would come first.
	assert.Equal(t, []string{strconv.FormatInt(near, 10), strconv.FormatInt(marker, 10)}, got)
	n, err := rdb.XPending(ctx, s, "g").Result()
	require.NoError(t, err)
	assert.Zero(t, n.Count, "every entry acknowledged")
}
