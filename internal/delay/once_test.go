package delay_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/internal/delay"
	"github.com/delaystream/delaystream/internal/redistest"
)

// callTokens returns the call-token keys under prefix with their
// remaining time to live.
func callTokens(t *testing.T, rdb *redis.Client, prefix string) map[string]time.Duration {
	t.Helper()
	ctx := context.Background()
	keys, err := rdb.Keys(ctx, prefix+":*").Result()
	require.NoError(t, err)
	out := map[string]time.Duration{}
	for _, k := range keys {
		if strings.Contains(k, "}:k:") {
			ttl, err := rdb.PTTL(ctx, k).Result()
			require.NoError(t, err)
			out[k] = ttl
		}
	}
	return out
}

// Schedule, Cancel and Reschedule leave a call token each (the reply a
// second run of the call returns; see TestScheduleSentAgainAfterPromotion
// in integration), which expires by itself after the time go-redis may
// take to send the call again (53 s with go-redis v9's defaults). A client that
// never re-sends (MaxRetries -1) makes none.
func TestCallTokens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	q, err := delay.New(rdb, "q", delay.WithPrefix(prefix))
	require.NoError(t, err)
	_, err = q.Schedule(ctx, delay.Message{ID: "a"}, delay.After(time.Hour))
	require.NoError(t, err)
	_, err = q.Schedule(ctx, delay.Message{}, delay.After(time.Minute)) // a generated id: the fast script
	require.NoError(t, err)
	// Generated ids due After twice the token's time to live need none,
	// unless an item of the call is due At a time (a clock) or sooner.
	o := rdb.Options() // as the client normalised them
	want := time.Duration(o.MaxRetries)*(o.DialTimeout+o.WriteTimeout+o.ReadTimeout+o.MaxRetryBackoff) + 5*time.Second
	_, err = q.Schedule(ctx, delay.Message{}, delay.After(time.Hour))
	require.NoError(t, err)
	_, err = q.ScheduleBatch(ctx, []delay.Item{{When: delay.After(time.Hour)}, {When: delay.After(2 * want)}})
	require.NoError(t, err)
	_, err = q.ScheduleBatch(ctx, []delay.Item{{When: delay.After(time.Hour)}, {When: delay.At(time.Now().Add(2 * time.Hour))}})
	require.NoError(t, err)
	_, err = q.ScheduleBatch(ctx, []delay.Item{{When: delay.After(time.Hour)}, {When: delay.After(2*want - time.Millisecond)}})
	require.NoError(t, err)
	_, err = q.Reschedule(ctx, "a", delay.After(2*time.Hour))
	require.NoError(t, err)
	ok, err := q.Cancel(ctx, "a")
	require.NoError(t, err)
	require.True(t, ok)
	tokens := callTokens(t, rdb, prefix)
	assert.Len(t, tokens, 6, "one token per call but the two that need none")
	for k, ttl := range tokens {
		assert.Greater(t, ttl, want-10*time.Second, k)
		assert.LessOrEqual(t, ttl, want, k)
	}

	opt := redistest.Options(t, redistest.Addr(t))
	opt.MaxRetries = -1
	once := redis.NewClient(opt)
	t.Cleanup(func() { _ = once.Close() })
	prefix2 := prefix + "x"
	q2, err := delay.New(once, "q", delay.WithPrefix(prefix2))
	require.NoError(t, err)
	_, err = q2.Schedule(ctx, delay.Message{ID: "a"}, delay.After(time.Hour))
	require.NoError(t, err)
	_, err = q2.Cancel(ctx, "a")
	require.NoError(t, err)
	assert.Empty(t, callTokens(t, rdb, prefix2), "a client that never re-sends needs no tokens")
}
