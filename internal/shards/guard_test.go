package shards

import (
	"context"
	"fmt"
	"net"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/internal/redistest"
	"github.com/delaystream/delaystream/internal/stream"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

func layout(t *testing.T, prefix string, shards int) *stream.Layout {
	t.Helper()
	l, err := stream.NewLayout(prefix, "q", shards)
	require.NoError(t, err)
	return l
}

// The error of a part built with another shard count points at a section
// of the docs that exists.
func TestShardCountErrorPointsToDocs(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	ctx := context.Background()
	require.NoError(t, NewGuard(layout(t, prefix, 2), "producer").Check(ctx, rdb))
	err := NewGuard(layout(t, prefix, 3), "consumer").Check(ctx, rdb)
	require.ErrorIs(t, err, stream.ErrShardCount)
	assert.Equal(t, 1, strings.Count(err.Error(), "delaystream:"), err.Error())

	m := regexp.MustCompile(`(docs/[a-z]+\.md) \("([^"]+)"\)`).FindStringSubmatch(err.Error())
	require.NotNil(t, m, "a docs file and section named: %s", err)
	doc, err := os.ReadFile("../../" + m[1])
	require.NoError(t, err, "the docs file exists")
	assert.Regexp(t, "(?m)^##+ "+regexp.QuoteMeta(m[2])+"$", string(doc), "the section exists in %s", m[1])
}

// A server that is down: the error says why, not only that ctx ended.
func TestCheckRedisDown(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err = NewGuard(layout(t, "ds", 1), "producer").Check(ctx, rdb)
	require.Error(t, err)
	assert.ErrorIs(t, err, syscall.ECONNREFUSED, err.Error())
	assert.Contains(t, err.Error(), "reading its shard count")
	assert.Contains(t, err.Error(), "connection refused")
}

// A loss of data on a server that evicts keys names eviction first; on
// one that does not, eviction is not named.
func TestLostErrorNamesEviction(t *testing.T) {
	t.Parallel()
	srv, err := redistest.Spawn("--maxmemory", "4mb", "--maxmemory-policy", "allkeys-lru")
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	evicting := redis.NewClient(redistest.Options(t, srv.Addr))
	t.Cleanup(func() { _ = evicting.Close() })
	ctx := context.Background()

	for _, tc := range []struct {
		name  string
		rdb   *redis.Client
		fill  bool
		evict bool
	}{
		{"evicting", evicting, true, true},
		{"not evicting", redistest.Client(t), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := layout(t, redistest.Prefix(t), 1)
			g := NewGuard(l, "consumer")
			lost, err := g.Verify(ctx, tc.rdb)
			require.NoError(t, err)
			require.False(t, lost, "first check")
			if tc.fill { // past maxmemory: the server evicts
				junk := strings.Repeat("x", 64<<10)
				for i := range 128 {
					require.NoError(t, tc.rdb.Set(ctx, fmt.Sprintf("junk:%s:%d", t.Name(), i), junk, 0).Err())
				}
			}
			require.NoError(t, tc.rdb.Del(ctx, l.Meta()).Err()) // the record is gone (evicted or not)
			lost, err = g.Verify(ctx, tc.rdb)
			require.NoError(t, err)
			require.True(t, lost)
			msg := g.LostError("just now").Error()
			assert.ErrorIs(t, g.LostError("just now"), stream.ErrDataLost)
			if !tc.evict {
				assert.NotContains(t, msg, "(eviction", msg)
				assert.Contains(t, msg, "may be lost (Redis restarted without persistence")
				return
			}
			assert.Regexp(t, `may be lost \(eviction: the server has evicted [1-9][0-9]* keys since its start \(maxmemory-policy allkeys-lru\); `+
				`set maxmemory-policy noeviction; or Redis restarted`, msg)
		})
	}
}

// When INFO cannot be read, a loss names eviction as possible, with why.
func TestLostErrorInfoUnreadable(t *testing.T) {
	t.Parallel()
	srv, err := redistest.Spawn()
	require.NoError(t, err)
	rdb := redis.NewClient(redistest.Options(t, srv.Addr))
	t.Cleanup(func() { _ = rdb.Close() })
	srv.Stop() // refused from now on
	got := evictions(context.Background(), rdb, "ds:1:{q}:q")
	assert.Contains(t, got, "eviction, if the server evicts keys (reading INFO failed: ")
	assert.Contains(t, got, "connection refused")
}
