package shardsub

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
)

// syncBuf is a log destination safe for concurrent use.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A failure that comes as Run's ctx ends (a shutdown: the Cluster's
// state is read as ctx is cancelled, and the read times out) is neither
// logged nor reported lost: Run returns quietly.
func TestNoWarningAtShutdown(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cc := redis.NewClusterClient(&redis.ClusterOptions{
		ClusterSlots: func(context.Context) ([]redis.ClusterSlot, error) {
			cancel() // the shutdown begins during the call
			return nil, errors.New("read tcp 127.0.0.1:1->127.0.0.1:2: i/o timeout")
		},
	})
	defer cc.Close()
	var logs syncBuf
	lost := 0
	var mu sync.Mutex
	err := Run(ctx, cc, Config{
		Groups: [][]string{{"{q}:w"}},
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		OnLost: func([][]string) { mu.Lock(); lost++; mu.Unlock() },
	})
	assert.NoError(t, err)
	assert.NotContains(t, logs.String(), "resubscribing")
	assert.Empty(t, logs.String())
	mu.Lock()
	defer mu.Unlock()
	assert.Zero(t, lost)
}
