package reach

import (
	"context"
	"errors"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/internal/redistest"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// A call that ran out of time against a closed port says why: go-redis
// alone returns only the context's error.
func TestExplainDown(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: closedAddr(t), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	<-ctx.Done()
	err := rdb.Get(ctx, "k").Err()
	require.ErrorIs(t, err, context.DeadlineExceeded, "what go-redis returns")

	got := Explain(ctx, rdb, err, "k")
	assert.ErrorIs(t, got, context.DeadlineExceeded)
	assert.ErrorIs(t, got, syscall.ECONNREFUSED)
	assert.Contains(t, got.Error(), "context deadline exceeded (Redis unreachable: dial tcp ")
	assert.Contains(t, got.Error(), "connection refused")
}

// Only a call whose ctx ended with a context error is explained, and a
// server that answers is not blamed.
func TestExplainLeaves(t *testing.T) {
	t.Parallel()
	down := redis.NewClient(&redis.Options{Addr: closedAddr(t)})
	t.Cleanup(func() { _ = down.Close() })
	up := redistest.Client(t)
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	other := errors.New("ERR something else")

	assert.NoError(t, Explain(ended, down, nil, "k"))
	assert.Equal(t, other, Explain(ended, down, other, "k"), "not a context error")
	assert.Equal(t, context.Canceled, Explain(context.Background(), down, context.Canceled, "k"), "ctx did not end: not the caller's")
	assert.Equal(t, context.Canceled, Explain(ended, up, context.Canceled, "k"), "the server accepts connections")
	got := Explain(ended, down, context.Canceled, "k")
	assert.ErrorIs(t, got, syscall.ECONNREFUSED)
	assert.ErrorIs(t, got, context.Canceled)
}
