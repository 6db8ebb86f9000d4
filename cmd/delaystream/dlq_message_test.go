package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/admin"
)

// Dead letters are shown, redriven and purged by their message's id too;
// a message id with no dead letter in the group exits 3 with a sentence
// that says so, and acts on nothing.
func TestDeadLettersByMessageID(t *testing.T) {
	t.Parallel()
	tg := single(t)
	seed(t, tg)

	var d deadRow
	tg.json(t, &d, "dlq", "show", "jobs", "billing", "job-2")
	assert.Equal(t, "job-2", d.ID)
	assert.Equal(t, "job payload 2", string(d.Payload))
	out := tg.ok(t, "dlq", "show", "jobs", "billing", "job-2")
	assert.Regexp(t, `(?m)^message id\s+job-2$`, out)

	var res admin.ActionResult
	tg.json(t, &res, "dlq", "redrive", "jobs", "billing", "job-1", "--dry-run")
	assert.Equal(t, 1, res.Matched)
	require.Len(t, res.IDs, 1)

	tg.json(t, &res, "dlq", "purge", "jobs", "billing", "job-3", "--yes")
	assert.Equal(t, 1, res.Done)
	r := tg.run(t, "dlq", "show", "jobs", "billing", "job-3")
	assert.Equal(t, exitNotFound, r.code)

	for _, action := range []string{"redrive", "purge"} {
		r = tg.run(t, "dlq", action, "jobs", "billing", "order-5001", "--yes")
		assert.Equal(t, exitNotFound, r.code, action)
		assert.Equal(t, "delaystream: no dead letter of message order-5001 in group billing of queue jobs: not found\n", r.stderr)
		assert.Empty(t, r.stdout)
	}
	// An entry id that names no dead letter is not a success either.
	r = tg.run(t, "dlq", "redrive", "jobs", "billing", "1-1", "--yes")
	assert.Equal(t, exitNotFound, r.code, "stdout: %s", r.stdout)
}
