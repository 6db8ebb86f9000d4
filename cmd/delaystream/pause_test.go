package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/admin"
)

// pause and resume of a queue and of a group, as the figures show them.
func TestPauseResume(t *testing.T) {
	t.Parallel()
	tg := single(t)
	seed(t, tg)

	out := tg.ok(t, "pause", "jobs", "billing")
	assert.Regexp(t, `^paused group billing of jobs \(since .*\)\n$`, out)
	tg.ok(t, "pause", "jobs")
	var st admin.QueueReport
	tg.json(t, &st, "stats", "jobs")
	assert.WithinDuration(t, time.Now(), st.PausedSince, time.Minute)
	require.Len(t, st.Groups, 2)
	assert.True(t, st.Groups[0].PausedSince.IsZero(), "audit is not paused")
	assert.WithinDuration(t, time.Now(), st.Groups[1].PausedSince, time.Minute)

	assert.Regexp(t, `(?m)^\s+PAUSED\s+since .*: nothing is promoted`, tg.ok(t, "stats", "jobs"))
	groups := tg.ok(t, "groups", "jobs")
	assert.Regexp(t, `(?m)^audit\s.*\s-\s+-$`, groups)
	assert.Regexp(t, `(?m)^billing\s.*\ssince \S+\s+-$`, groups)
	assert.Regexp(t, `(?m)^jobs\s.*\ssince \S+$`, tg.ok(t, "queues"))

	assert.Regexp(t, `^resumed group billing of jobs \(paused for .*\)\n$`, tg.ok(t, "resume", "jobs", "billing"))
	assert.Equal(t, "group billing of jobs was not paused\n", tg.ok(t, "resume", "jobs", "billing"))
	var res map[string]any
	tg.json(t, &res, "resume", "jobs")
	assert.Equal(t, false, res["paused"])
	assert.NotNil(t, res["paused_since"], "the pause it ended")
	st = admin.QueueReport{}
	tg.json(t, &st, "stats", "jobs")
	assert.True(t, st.PausedSince.IsZero())
	assert.True(t, st.Groups[1].PausedSince.IsZero())

	r := tg.run(t, "pause", "jobs", "nosuch")
	assert.Equal(t, exitNotFound, r.code, r.stderr)
	r = tg.run(t, "pause", "nosuch")
	assert.Equal(t, exitNotFound, r.code, r.stderr)
	r = tg.run(t, "pause", "jobs", "bad group")
	assert.Equal(t, exitUsage, r.code, r.stderr)
	// An empty group (a variable left empty) is refused, never taken for
	// the whole queue.
	r = tg.run(t, "pause", "jobs", "")
	assert.Equal(t, exitUsage, r.code, r.stderr)
	st = admin.QueueReport{}
	tg.json(t, &st, "stats", "jobs")
	assert.True(t, st.PausedSince.IsZero(), "the queue is not paused")
}

func TestLimitsColumn(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "-", limits(admin.GroupReport{}))
	assert.Equal(t, "3 at once (2 held), 200/s burst 20",
		limits(admin.GroupReport{ConcurrencyLimit: 3, SlotsHeld: 2, RatePerSecond: 200, RateBurst: 20}))
	assert.Equal(t, "3 at once (0 held), waited 1m3s", limits(admin.GroupReport{ConcurrencyLimit: 3, LimitWaitMs: 63000}))
	assert.Equal(t, "0.5/s burst 1", limits(admin.GroupReport{RatePerSecond: 0.5, RateBurst: 1}))
}
