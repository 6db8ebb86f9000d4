package main

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Without a terminal, watch prints plain tables instead of failing
// ("bubbletea: error creating cancel reader"); --once prints one and
// exits 0.
func TestWatchPlain(t *testing.T) {
	t.Parallel()
	tg := single(t)
	seed(t, tg)

	r := tg.run(t, "watch", "--once")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `(?m)^QUEUE\s+GROUP\s+WAITING\s+OVERDUE\s+STREAM\s+QUARANTINED\s+LAG\s+PENDING\s+OLDEST PENDING\s+RETRY\s+DEAD\s+DONE/MIN\s+FAILED/MIN\s+PAUSED$`, r.stdout)
	assert.Regexp(t, `(?m)^orders\s+-\s+3\s+1\s+0\s+0\s+0\s+-$`, r.stdout)
	assert.Regexp(t, `(?m)^jobs\s+billing\s+0\s+0\s+-\s+0\s+3\s+0\s+\d\s+-$`, r.stdout)
	assert.Equal(t, 1, strings.Count(r.stdout, "QUEUE"), "one table")
	assert.Empty(t, r.stderr)

	// Without --once (stdin and stdout are not terminals): a table per
	// interval until interrupted.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, append(append([]string{"--prefix", tg.prefix}, tg.flags...), "watch", "orders", "--interval", "100ms")...)
	cmd.Env = append(append(os.Environ(), "REDIS_URL="+tg.url), tg.env...)
	var out syncBuffer
	cmd.Stdout = &out
	require.NoError(t, cmd.Start())
	require.Eventually(t, func() bool { return strings.Count(out.String(), "QUEUE") >= 3 }, 30*time.Second, 20*time.Millisecond)
	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	require.NoError(t, cmd.Wait(), "an interrupt is a requested stop")
	assert.NotContains(t, out.String(), "jobs", "only the queue named")
}

// syncBuffer is an output safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
