package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
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
