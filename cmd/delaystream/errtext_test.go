package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/internal/logpace"
)

// A command's error is one line, one sentence: no go-redis pool lines
// before it, no internal package chain in it.
func TestErrorsAreOneSentence(t *testing.T) {
	t.Parallel()
	down := target{url: "redis://127.0.0.1:1", prefix: "ds"}
	r := down.run(t, "stats", "orders", "--timeout", "200ms")
	assert.Equal(t, exitError, r.code)
	assert.Equal(t, "delaystream: cannot reach Redis at 127.0.0.1:1: connection refused\n", r.stderr)

	tg := single(t)
	seed(t, tg)
	r = tg.run(t, "dlq", "ls", "jobs", "billing", "--reason", "nope")
	assert.Equal(t, exitUsage, r.code)
	assert.Regexp(t, `^delaystream: unknown dead-letter reason "nope": want one of "attempts" \("attempts exhausted"\), .*\n$`, r.stderr)
	r = tg.run(t, "dlq", "ls", "jo{bs", "billing")
	assert.Equal(t, exitUsage, r.code)
	assert.Equal(t, "delaystream: queue name \"jo{bs\" contains '{' (no braces, spaces or control characters)\n", r.stderr)
}

// While Redis is down the pool logs each failed dial; the long-running
// commands write the first line at once and the next ones spaced as a
// failing loop's lines are, saying how many they left out, and start
// again after a quiet spell.
func TestPacedRedisLog(t *testing.T) {
	var b strings.Builder
	l := newPacedRedisLog(&b)
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	l.timeNow = func() time.Time { return now }
	dial := func(n int, every time.Duration) {
		for range n {
			l.Printf(context.Background(), "redis: connection pool: failed to dial after 5 attempts: %s", "refused")
			now = now.Add(every)
		}
	}
	dial(10, 100*time.Millisecond) // 1 s: the first line only
	dial(10, 100*time.Millisecond) // the second after 1 s, then 2 s to wait
	dial(10, 100*time.Millisecond)
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	require.Len(t, lines, 2, b.String())
	assert.Equal(t, "2026-12-07T12:00:00Z redis: connection pool: failed to dial after 5 attempts: refused", lines[0])
	assert.Equal(t, "2026-12-07T12:00:01Z redis: connection pool: failed to dial after 5 attempts: refused (9 similar lines left out)", lines[1])
	now = now.Add(logpace.Max + time.Second) // quiet: a new run, logged at once
	b.Reset()
	dial(2, 100*time.Millisecond)
	assert.Equal(t, 1, strings.Count(b.String(), "\n"))
	assert.Contains(t, b.String(), "(19 similar lines left out)", "what the old run left out is still counted")
}
