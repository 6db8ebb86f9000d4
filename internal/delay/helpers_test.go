package delay_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/internal/delay"
	"github.com/delaystream/delaystream/internal/redistest"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// backend is one Redis a behaviour is checked against.
type backend struct {
	rdb    redis.UniversalClient
	prefix string               // unique to the test
	mr     *miniredis.Miniredis // nil for a real redis-server
}

// keyCount returns how many keys exist under the backend's prefix.
func (b backend) keyCount(t *testing.T) int {
	t.Helper()
	return len(b.keys(t))
}

// keys returns the keys under the backend's prefix, sorted, leaving out
// call tokens (stream.Keys.CallPrefix): they expire by themselves, and
// TestCallTokens checks them.
func (b backend) keys(t *testing.T) []string {
	t.Helper()
	keys, err := b.rdb.Keys(context.Background(), b.prefix+":*").Result()
	require.NoError(t, err)
	keys = slices.DeleteFunc(keys, func(k string) bool { return strings.Contains(k, "}:k:") })
	slices.Sort(keys)
	return keys
}

// queue returns a queue named "q" under the backend's prefix.
func (b backend) queue(t *testing.T, opts ...delay.Option) *delay.Queue {
	t.Helper()
	q, err := delay.New(b.rdb, "q", append([]delay.Option{delay.WithPrefix(b.prefix)}, opts...)...)
	require.NoError(t, err)
	return q
}

// onEachBackend runs fn as parallel subtests "miniredis" (fast, in process)
// and "redis" (the shared real redis-server), each with its own keys.
func onEachBackend(t *testing.T, fn func(t *testing.T, b backend)) {
	t.Helper()
	t.Run("miniredis", func(t *testing.T) {
		t.Parallel()
		mr := miniredis.RunT(t)
		rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
		t.Cleanup(func() { _ = rdb.Close() })
		fn(t, backend{rdb: rdb, prefix: redistest.Prefix(t), mr: mr})
	})
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		fn(t, backend{rdb: redistest.Client(t), prefix: redistest.Prefix(t)})
	})
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	require.NoError(t, err)
	return v
}
