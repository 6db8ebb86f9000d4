package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/examples/internal/examplecheck"
)

func TestRun(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })

	var out bytes.Buffer
	require.NoError(t, run(t.Context(), rdb, &out))
	s := out.String()
	t.Logf("output:\n%s", s)

	// The good endpoint succeeds at once; the flaky one is retried when its
	// Retry-After says, then after the backoff, and succeeds on the third
	// attempt.
	assert.Contains(t, s, "attempt 1  delivery:1  200 OK")
	assert.Contains(t, s, "attempt 1  delivery:2  retry after 1s: post "+flakyURL+": 429 Too Many Requests; retry in 1s")
	assert.Contains(t, s, "attempt 2  delivery:2  post "+flakyURL+": 503 Service Unavailable; retry in")
	assert.Contains(t, s, "attempt 3  delivery:2  200 OK")

	// The dead endpoint is dead-lettered after three attempts, listed, and
	// delivered again after the redrive.
	assert.Contains(t, s, "attempt 3  delivery:3  post "+deadURL+": dial tcp: connection refused; no attempt left")
	assert.Contains(t, s, "attempt 3  delivery:3  dead-lettered: attempts exhausted")
	assert.Regexp(t, `\d+-\d+  delivery:3  reason "attempts exhausted"  last error "post `+deadURL+`: dial tcp: connection refused"  attempts 3`, s)
	// The redriven delivery runs on a worker beside the redrive's own
	// line, which it may precede: it must follow the dead letters' listing,
	// printed before the redrive.
	require.Contains(t, s, "redrove 1 dead letter(s)")
	listed := strings.Index(s, "dead letters of deliverer:")
	require.Positive(t, listed)
	assert.Equal(t, 1, strings.Count(s, "delivery:3  200 OK"))
	assert.Greater(t, strings.Index(s, "attempt 1  delivery:3  200 OK"), listed)
	assert.Contains(t, s, "0 dead letters left")

	// Nothing waits, nothing is pending or dead-lettered any more.
	examplecheck.Settled(t, rdb, queueName, groupName)
}
