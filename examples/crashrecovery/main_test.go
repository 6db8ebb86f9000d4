package main

import (
	"bytes"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/examples/internal/examplecheck"
)

// TestMain lets the test binary play the crashing worker, as main does.
func TestMain(m *testing.M) {
	if os.Getenv(workerEnv) != "" {
		if err := crashingWorker(); err != nil {
			fmt.Fprintln(os.Stderr, "crashing worker:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestRun needs REDIS_URL or redis-server on PATH, like the program; it
// fails, never skips, without either.
func TestRun(t *testing.T) {
	rdb, closeRedis, err := connect(t.Context())
	require.NoError(t, err)
	t.Cleanup(closeRedis)

	var out bytes.Buffer
	err = run(t.Context(), rdb, &out)
	t.Logf("output:\n%s", out.String())
	require.NoError(t, err)

	s := out.String()
	assert.Contains(t, s, "took job:42 (delivery 1), working on it...")
	assert.Contains(t, s, "killed worker-1 with SIGKILL")
	assert.Contains(t, s, "worker-2: reclaimed job:42")
	assert.Contains(t, s, "(delivery 2, attempt 1)")

	// worker-2 acknowledged job:42: nothing is pending any more.
	examplecheck.Settled(t, rdb, queueName, groupName)
}
