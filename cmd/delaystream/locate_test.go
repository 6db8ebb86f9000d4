package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
)

// locate, and get for a message that no longer waits, say where a message
// is; a message found nowhere exits 3.
func TestLocateCommand(t *testing.T) {
	t.Parallel()
	tg := single(t)
	seed(t, tg)

	out := tg.ok(t, "locate", "jobs", "job-1")
	assert.Regexp(t, `(?m)^dead-lettered\s+billing\s+\d+-\d+\s+reason "handler asked to dead-letter", attempt 1: .*card declined$`, out)
	assert.NotContains(t, out, "audit", "handled by audit: not listed")
	assert.Equal(t, out, tg.ok(t, "get", "jobs", "job-1"), "get falls back to locate")

	var loc delaystream.Location
	tg.json(t, &loc, "locate", "jobs", "job-2")
	require.Len(t, loc.Groups, 1)
	assert.Equal(t, delaystream.PlaceDeadLettered, loc.Groups[0].Place)
	assert.Equal(t, "billing", loc.Groups[0].Group)

	out = tg.ok(t, "locate", "orders", "soon")
	assert.Regexp(t, `(?m)^waiting\s+-\s+-\s+due .*attempt 1$`, out)

	r := tg.run(t, "locate", "jobs", "nope")
	assert.Equal(t, 3, r.code)
	assert.Empty(t, r.stdout)
	assert.Equal(t, "delaystream: message nope of queue jobs: not found anywhere (handled by every group that keeps no records of it, cancelled, or never scheduled)\n", r.stderr)
	r = tg.run(t, "get", "jobs", "nope")
	assert.Equal(t, 3, r.code)
	r = tg.run(t, "get", "nosuchqueue", "nope")
	assert.Equal(t, 3, r.code)
	assert.Contains(t, r.stderr, "nosuchqueue")
}
