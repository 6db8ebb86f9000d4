package memory_test

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/internal/errs"
	"github.com/delaystream/delaystream/internal/memory"
	"github.com/delaystream/delaystream/internal/redistest"
)

func TestParse(t *testing.T) {
	t.Parallel()
	s := memory.Parse("# Memory\r\nused_memory:8493465\r\nused_memory_human:8.10M\r\nmaxmemory:8388608\r\nmaxmemory_policy:allkeys-lru\r\n")
	assert.Equal(t, memory.Server{Used: 8493465, Max: 8388608, Policy: "allkeys-lru", Evicted: -1, Known: true}, s,
		"no stats section: evicted keys not known")
	assert.True(t, s.Evicts())
	evicted := memory.Parse("# Memory\r\nused_memory:10\r\nmaxmemory:0\r\nmaxmemory_policy:noeviction\r\n# Stats\r\nevicted_keys:63851\r\n")
	assert.Equal(t, int64(63851), evicted.Evicted)
	assert.False(t, memory.Parse("# Memory\r\n").Known, "no memory section")
	for _, c := range []struct {
		s    memory.Server
		want bool
	}{
		{memory.Server{Max: 1, Policy: "noeviction", Known: true}, false},
		{memory.Server{Max: 0, Policy: "allkeys-lru", Known: true}, false}, // no limit: nothing to evict for
		{memory.Server{Max: 1, Policy: "volatile-ttl", Known: true}, true},
		{memory.Server{Max: 1, Policy: "allkeys-lfu"}, false}, // unknown
	} {
		assert.Equal(t, c.want, c.s.Evicts(), c.s)
	}
	assert.Equal(t, "512 B", memory.Bytes(512))
	assert.Equal(t, "8.0 MiB", memory.Bytes(8<<20))
	assert.Equal(t, "1.5 GiB", memory.Bytes(3<<29))
}

// Read on a real server returns its settings; on miniredis (no memory
// section) it reports them unknown, without an error.
func TestRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := redistest.Spawn("--maxmemory", "8mb", "--maxmemory-policy", "volatile-lru")
	require.NoError(t, err)
	defer s.Stop()
	rdb := redis.NewClient(redistest.Options(t, s.Addr))
	defer rdb.Close()
	list, err := memory.Read(ctx, rdb)
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, s.Addr, list[0].Addr)
	assert.Equal(t, "volatile-lru", list[0].Policy)
	assert.Equal(t, int64(8<<20), list[0].Max)
	assert.Positive(t, list[0].Used)
	assert.Len(t, memory.Evicting(list), 1)

	mr := miniredis.RunT(t)
	mc := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer mc.Close()
	list, err = memory.Read(ctx, mc)
	require.NoError(t, err)
	assert.False(t, list[0].Known)
	assert.Empty(t, memory.Evicting(list))
}

// Explain turns an OOM reply into an *OOMError matching ErrOutOfMemory,
// with the server's figures, and leaves other errors alone.
func TestExplain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := redistest.Spawn("--maxmemory", "1", "--maxmemory-policy", "noeviction")
	require.NoError(t, err)
	defer s.Stop()
	rdb := redis.NewClient(redistest.Options(t, s.Addr))
	defer rdb.Close()
	werr := rdb.Set(ctx, "k", "v", 0).Err()
	require.True(t, memory.IsOOM(werr), werr)
	err = memory.Explain(ctx, rdb, werr)
	require.ErrorIs(t, err, errs.ErrOutOfMemory)
	var oom *memory.OOMError
	require.ErrorAs(t, err, &oom)
	assert.Equal(t, "noeviction", oom.Server.Policy)
	assert.Contains(t, err.Error(), "write refused, nothing written: used ")
	assert.Contains(t, err.Error(), "maxmemory 1 B, maxmemory-policy noeviction (Redis: OOM ")

	other := errors.New("boom")
	assert.Same(t, other, memory.Explain(ctx, rdb, other))
}

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }
