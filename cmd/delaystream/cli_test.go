package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/admin"
	"github.com/delaystream/delaystream/internal/redistest"
	"github.com/delaystream/delaystream/internal/stream"
)

func TestQueuesAndStats(t *testing.T) {
	t.Parallel()
	tg := single(t)
	seed(t, tg)

	var rows []struct {
		Name   string             `json:"name"`
		Shards int                `json:"shards"`
		Stats  *admin.QueueReport `json:"stats"`
	}
	tg.json(t, &rows, "queues")
	require.Len(t, rows, 2)
	assert.Equal(t, "jobs", rows[0].Name)
	assert.Equal(t, "orders", rows[1].Name)
	assert.Equal(t, 1, rows[1].Shards)
	require.NotNil(t, rows[1].Stats)
	assert.Equal(t, int64(3), rows[1].Stats.Waiting)

	var st admin.QueueReport
	tg.json(t, &st, "stats", "orders")
	assert.Equal(t, "orders", st.Queue)
	assert.Equal(t, int64(3), st.Waiting)
	assert.Equal(t, int64(1), st.Overdue, "the message due a minute ago, with no mover running")
	assert.WithinDuration(t, time.Now().Add(-time.Minute), st.NextDue, 10*time.Second)
	assert.Empty(t, st.Groups)
	assert.GreaterOrEqual(t, st.OverdueBy(), 50*time.Second)

	tg.json(t, &st, "stats", "jobs", "--per-shard")
	assert.Equal(t, int64(0), st.Waiting)
	assert.Equal(t, int64(1), st.Quarantined)
	require.Len(t, st.Groups, 2)
	assert.Equal(t, "audit", st.Groups[0].Group)
	assert.Equal(t, int64(0), st.Groups[0].DeadLetters)
	assert.Equal(t, "billing", st.Groups[1].Group)
	assert.Equal(t, int64(3), st.Groups[1].DeadLetters)
	assert.Equal(t, int64(0), st.Groups[1].Lag)
	require.Len(t, st.PerShard, 1)
	assert.Equal(t, "jobs", st.PerShard[0].Tag)

	// The counts Redis keeps of the seeded work, in stats and history.
	text := tg.ok(t, "stats", "jobs")
	assert.Regexp(t, `(?m)^COUNTED\s+LAST MINUTE\s+LAST HOUR\s+LAST DAY\s+TOTAL$`, text)
	assert.Regexp(t, `(?m)^promoted\s+\d\s+3\s+3\s+3$`, text)
	assert.Regexp(t, `(?m)^quarantined\s+\d\s+1\s+1\s+1$`, text)
	assert.Regexp(t, `(?m)^billing dead-lettered\s+\d\s+3\s+3\s+3$`, text)
	assert.Regexp(t, `(?m)^audit handled\s+\d\s+3\s+3\s+3$`, text)
	var h admin.History
	tg.json(t, &h, "history", "jobs")
	assert.Equal(t, "jobs", h.Queue)
	assert.Equal(t, admin.HistoryCounts{Promoted: 3, Quarantined: 1, Groups: map[string]admin.GroupHistory{
		"billing": {DeadLettered: 3}, "audit": {Handled: 3}}}, h.Totals)
	assert.Len(t, h.Minutes, 60)
	text = tg.ok(t, "history", "jobs", "--hours")
	assert.Regexp(t, `(?m)^FROM\s+PROMOTED\s+QUARANTINED\s+audit HANDLED\s+DROPPED\s+RETRIED\s+DEAD\s+billing HANDLED\s+DROPPED\s+RETRIED\s+DEAD$`, text)
	assert.Regexp(t, `(?m)^total\s+3\s+1\s+3\s+0\s+0\s+0\s+0\s+0\s+0\s+3$`, text)
	assert.Equal(t, 24+3, strings.Count(text, "\n"), "a title, a header, 24 hours and the totals")

	text = tg.ok(t, "stats", "orders")
	assert.Regexp(t, `overdue\s+1 \(oldest due 1m\d+s ago: is a mover running\?\)`, text)
	assert.Contains(t, text, "no consumer groups yet")
	text = tg.ok(t, "queues")
	assert.Regexp(t, `(?m)^orders\s+1\s+3\s+1\s`, text)
	assert.Regexp(t, `(?m)^jobs\s+1\s+0\s+0\s+-\s+\d+\s+2\s+0\s+3\s+1\s+-$`, text)
}

func TestPeekAndGet(t *testing.T) {
	t.Parallel()
	tg := single(t)
	seed(t, tg)

	var ms []waitingRow
	tg.json(t, &ms, "peek", "orders")
	require.Len(t, ms, 3)
	assert.Equal(t, []string{"late", "soon", "later"}, []string{ms[0].ID, ms[1].ID, ms[2].ID})
	assert.True(t, ms[0].Overdue)
	assert.False(t, ms[1].Overdue)
	assert.Equal(t, "overdue one", ms[0].Preview)
	assert.Equal(t, `{"order":5001}`, string(ms[1].Payload))
	assert.Equal(t, map[string]string{"tenant": "acme"}, ms[1].Headers)
	assert.Equal(t, `msgpack:{"order":5002}`, ms[2].Preview)
	assert.WithinDuration(t, time.Now().Add(time.Hour), ms[1].Due, 10*time.Second)

	tg.json(t, &ms, "peek", "orders", "-n", "1")
	require.Len(t, ms, 1)
	tg.json(t, &ms, "peek", "orders", "--overdue")
	require.Len(t, ms, 1)
	assert.Equal(t, "late", ms[0].ID)

	text := tg.ok(t, "peek", "orders")
	assert.Regexp(t, `(?m)^late\s+0\s+.*ago\)\s+OVERDUE\s+1\s+11\s+overdue one$`, text)

	var m waitingRow
	tg.json(t, &m, "get", "orders", "soon")
	assert.Equal(t, "soon", m.ID)
	assert.Equal(t, 1, m.Attempt)
	assert.Equal(t, 14, m.Size)

	r := tg.run(t, "get", "orders", "nope")
	assert.Equal(t, exitNotFound, r.code)
	assert.Contains(t, r.stderr, "not found")
	assert.Empty(t, r.stdout)
}

func TestCancelAndReschedule(t *testing.T) {
	t.Parallel()
	tg := single(t)
	seed(t, tg)
	rdb := tg.client(t)
	before := redistest.Keys(t, rdb, tg.prefix)

	// Without a terminal and without --yes: refused, nothing written.
	r := tg.run(t, "cancel", "orders", "soon")
	assert.Equal(t, exitNotConfirmd, r.code)
	assert.Contains(t, r.stderr, "--yes")
	r = tg.run(t, "reschedule", "orders", "soon", "--in", "5m")
	assert.Equal(t, exitNotConfirmd, r.code)
	assert.Equal(t, before, redistest.Keys(t, rdb, tg.prefix), "a refused command wrote something")

	assert.Equal(t, "cancelled 1 waiting message of orders\n  soon\n", tg.ok(t, "cancel", "orders", "soon", "--yes"))
	assert.Equal(t, exitNotFound, tg.run(t, "get", "orders", "soon").code)
	assert.Equal(t, exitNotFound, tg.run(t, "cancel", "orders", "soon", "--yes").code)

	at := time.Now().Add(3 * time.Hour).UTC().Truncate(time.Second)
	var out struct {
		Due time.Time `json:"due"`
	}
	tg.json(t, &out, "reschedule", "orders", "later", "--at", at.Format(time.RFC3339), "--yes")
	assert.True(t, at.Equal(out.Due), "due %s, want %s", out.Due, at)
	var m waitingRow
	tg.json(t, &m, "get", "orders", "later")
	assert.True(t, at.Equal(m.Due))

	tg.ok(t, "reschedule", "orders", "later", "--in", "0s", "-y")
	tg.json(t, &m, "get", "orders", "later")
	assert.True(t, m.Overdue)

	assert.Equal(t, exitUsage, tg.run(t, "reschedule", "orders", "later", "--yes").code, "neither --in nor --at")
	assert.Equal(t, exitNotFound, tg.run(t, "reschedule", "orders", "gone", "--in", "1m", "--yes").code)
}

func TestGroupsAndDeadLetters(t *testing.T) {
	t.Parallel()
	tg := single(t)
	seed(t, tg)
	rdb := tg.client(t)

	var gs []admin.GroupReport
	tg.json(t, &gs, "groups", "jobs")
	require.Len(t, gs, 2)
	assert.Equal(t, "billing", gs[1].Group)
	assert.Equal(t, int64(3), gs[1].DeadLetters)
	assert.Equal(t, int64(0), gs[1].Pending)
	assert.Equal(t, int64(1), gs[1].Consumers)
	require.Len(t, gs[1].ConsumerList, 1)
	assert.False(t, gs[1].ConsumerList[0].Live, "the seed's consumers have stopped")
	out := tg.ok(t, "groups", "jobs")
	assert.Contains(t, out, "group billing consumers:")
	assert.Regexp(t, `(?m)^\s+CONSUMER\s+STATE\s+PENDING\s+IDLE$`, out)
	assert.Regexp(t, `(?m)^\s+\S+\s+gone\s+0\s`, out, "a consumer whose process exited")

	var ds []deadRow
	tg.json(t, &ds, "dlq", "ls", "jobs", "billing")
	require.Len(t, ds, 3)
	ids := map[string]bool{}
	for _, d := range ds {
		assert.Equal(t, "handler asked to dead-letter", d.Reason)
		assert.Contains(t, d.LastError, "card declined")
		assert.True(t, d.Decoded)
		ids[d.ID] = true
	}
	assert.Equal(t, map[string]bool{"job-1": true, "job-2": true, "job-3": true}, ids)
	tg.json(t, &ds, "dlq", "ls", "jobs", "audit")
	assert.Empty(t, ds)
	tg.json(t, &ds, "dlq", "ls", "jobs", "billing", "--reason", "expired")
	assert.Empty(t, ds)
	// --reason takes the reasons as listings show them or as metrics label
	// them, and nothing else.
	tg.json(t, &ds, "dlq", "ls", "jobs", "billing", "--reason", "handler asked to dead-letter")
	assert.Len(t, ds, 3)
	tg.json(t, &ds, "dlq", "ls", "jobs", "billing", "--reason", "handler") // the metrics label
	assert.Len(t, ds, 3)
	bad := tg.run(t, "dlq", "ls", "jobs", "billing", "--reason", "card declined")
	assert.Equal(t, exitUsage, bad.code)
	assert.Contains(t, bad.stderr, `unknown dead-letter reason "card declined"`)
	assert.Contains(t, bad.stderr, `"handler" ("handler asked to dead-letter")`)
	assert.Equal(t, exitUsage, tg.run(t, "dlq", "purge", "jobs", "billing", "--all", "--reason", "declined", "--yes").code)
	tg.json(t, &ds, "dlq", "ls", "jobs", "billing", "--since", "1h", "-n", "2")
	require.Len(t, ds, 2)
	var all, newest []deadRow
	tg.json(t, &all, "dlq", "ls", "jobs", "billing")
	tg.json(t, &newest, "dlq", "ls", "jobs", "billing", "--newest")
	slices.Reverse(all)
	assert.Equal(t, all, newest, "--newest: newest first")
	tg.json(t, &newest, "dlq", "ls", "jobs", "billing", "--newest", "--after", all[0].EntryID, "-n", "1")
	assert.Equal(t, all[1:2], newest, "--after pages towards older ones")
	assert.Equal(t, exitNotFound, tg.run(t, "dlq", "ls", "jobs", "nosuchgroup").code)
	// Every group's, with the group named and the totals.
	tg.json(t, &ds, "dlq", "ls", "jobs")
	require.Len(t, ds, 3)
	assert.Equal(t, "billing", ds[0].Group)
	out = tg.ok(t, "dlq", "ls", "jobs", "-n", "2")
	assert.Regexp(t, `(?m)^GROUP\s+ENTRY ID\s+DEAD-LETTERED`, out)
	assert.Regexp(t, `(?m)^billing\s+\d+-\d+\s`, out)
	assert.Contains(t, out, "2 shown of 3 dead letters in 2 groups")
	assert.Equal(t, exitUsage, tg.run(t, "dlq", "ls", "jobs", "--after", "0-1").code, "--after pages one group")

	var d deadRow
	tg.json(t, &d, "dlq", "show", "jobs", "billing", ds[0].EntryID)
	assert.Equal(t, ds[0].ID, d.ID)
	assert.Equal(t, "job payload "+strings.TrimPrefix(d.ID, "job-"), string(d.Payload))
	assert.Equal(t, exitNotFound, tg.run(t, "dlq", "show", "jobs", "billing", "1-1").code)
	assert.Equal(t, exitNotFound, tg.run(t, "dlq", "show", "jobs", "billing", "bogus").code, "a message id with no dead letter")

	// --dry-run and a refusal write nothing.
	before := redistest.Keys(t, rdb, tg.prefix)
	var res admin.ActionResult
	tg.json(t, &res, "dlq", "redrive", "jobs", "billing", "--all", "--dry-run")
	assert.True(t, res.DryRun)
	assert.Equal(t, 3, res.Matched)
	assert.Equal(t, 0, res.Done)
	assert.Len(t, res.IDs, 3)
	tg.json(t, &res, "dlq", "purge", "jobs", "billing", ds[0].EntryID, "--dry-run")
	assert.Equal(t, 1, res.Matched)
	assert.Equal(t, exitNotConfirmd, tg.run(t, "dlq", "purge", "jobs", "billing", "--all").code)
	assert.Equal(t, exitNotConfirmd, tg.run(t, "dlq", "redrive", "jobs", "billing", ds[0].EntryID).code)
	assert.Equal(t, before, redistest.Keys(t, rdb, tg.prefix), "a dry run or a refusal wrote something")

	assert.Equal(t, exitUsage, tg.run(t, "dlq", "purge", "jobs", "billing").code, "neither ids nor --all")
	assert.Equal(t, exitUsage, tg.run(t, "dlq", "purge", "jobs", "billing", "--since", "1h", ds[0].EntryID, "--yes").code)

	// Purge one by id; a missing id is reported with exit code 3.
	r := tg.run(t, "dlq", "purge", "jobs", "billing", ds[0].EntryID, "1-1", "--yes", "--json")
	assert.Equal(t, exitNotFound, r.code, r.stderr)
	assert.Contains(t, r.stdout, `"done": 1`)
	assert.Contains(t, r.stdout, `"not_found": [`)

	// Redrive the rest: back to billing's retry lane, gone from the dead letters.
	tg.json(t, &res, "dlq", "redrive", "jobs", "billing", "--all", "--yes", "--delay", "1h")
	assert.Equal(t, 2, res.Matched)
	assert.Equal(t, 2, res.Done)
	var st admin.QueueReport
	tg.json(t, &st, "stats", "jobs")
	assert.Equal(t, int64(0), st.Groups[1].DeadLetters)
	assert.Equal(t, int64(2), st.Groups[1].RetryWaiting)
	assert.Equal(t, int64(0), st.Groups[0].RetryWaiting, "a redrive goes to its own group only")
	assert.Contains(t, tg.ok(t, "dlq", "ls", "jobs", "billing"), "no dead letters")
}

func TestQuarantine(t *testing.T) {
	t.Parallel()
	tg := single(t)
	seed(t, tg)

	var qs []quarantineRow
	tg.json(t, &qs, "quarantine", "ls", "jobs")
	require.Len(t, qs, 1)
	assert.Equal(t, "main", qs[0].Lane)
	assert.Equal(t, "unknown member format", qs[0].Reason)
	assert.Equal(t, "\x02junk", string(qs[0].Member))
	assert.Equal(t, "hex:026a756e6b", qs[0].Preview)
	tg.json(t, &qs, "quarantine", "ls", "orders")
	assert.Empty(t, qs)
	assert.Contains(t, tg.ok(t, "quarantine", "ls", "jobs"), "unknown member format")

	// A foreign member has no message to restore; rm deletes it.
	tg.json(t, &qs, "quarantine", "ls", "jobs")
	id := qs[0].EntryID
	assert.Equal(t, exitNotConfirmd, tg.run(t, "quarantine", "rm", "jobs", id).code)
	r := tg.run(t, "quarantine", "restore", "jobs", id, "--yes")
	assert.Equal(t, exitError, r.code)
	assert.Contains(t, r.stdout, "unrecoverable (no message id or readable envelope; rm it): "+id)
	assert.Equal(t, "deleted 1 of 1 quarantined entry of jobs\n", tg.ok(t, "quarantine", "rm", "jobs", id, "--yes"))
	tg.json(t, &qs, "quarantine", "ls", "jobs")
	assert.Empty(t, qs)
	r = tg.run(t, "quarantine", "rm", "jobs", id, "--yes")
	assert.Equal(t, exitNotFound, r.code)
	assert.Contains(t, r.stdout, "not found: "+id)
	assert.Equal(t, exitUsage, tg.run(t, "quarantine", "rm", "jobs", "garbage", "--yes").code)

	// --all deletes every quarantined entry.
	assert.Equal(t, "nothing quarantined\n", tg.ok(t, "quarantine", "rm", "jobs", "--all", "--yes"))
	l, err := stream.NewLayout(tg.prefix, "jobs", 1)
	require.NoError(t, err)
	for _, m := range []string{"\x02a", "\x02b"} {
		require.NoError(t, tg.client(t).XAdd(context.Background(), &redis.XAddArgs{Stream: l.Shard(0).Main().Quarantine,
			Values: []string{"r", "unknown member format", "d", "1", "m", m}}).Err())
	}
	assert.Equal(t, exitUsage, tg.run(t, "quarantine", "rm", "jobs", id, "--all", "--yes").code, "ids or --all")
	assert.Equal(t, exitUsage, tg.run(t, "quarantine", "rm", "jobs", "--yes").code, "ids or --all")
	assert.Equal(t, "deleted 2 of 2 quarantined entries of jobs\n", tg.ok(t, "quarantine", "rm", "jobs", "--all", "--yes"))
	tg.json(t, &qs, "quarantine", "ls", "jobs")
	assert.Empty(t, qs)
}

func TestExitCodes(t *testing.T) {
	t.Parallel()
	tg := single(t)
	seed(t, tg)
	for _, c := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"unknown command", []string{"frobnicate"}, exitUsage, "unknown command"},
		{"unknown flag", []string{"queues", "--frob"}, exitUsage, "unknown flag"},
		{"missing argument", []string{"stats"}, exitUsage, "accepts 1 arg"},
		{"bad queue name", []string{"stats", "a{b}"}, exitUsage, "braces"},
		{"unknown queue", []string{"stats", "nosuch"}, exitNotFound, "not found"},
		{"unknown queue for peek", []string{"peek", "nosuch"}, exitNotFound, "not found"},
		{"bad count", []string{"peek", "orders", "-n", "0"}, exitUsage, "count"},
		{"unreachable", []string{"queues", "--redis-url", "redis://127.0.0.1:1", "--timeout", "500ms"}, exitError, "connect"},
		{"bad url", []string{"queues", "--redis-url", "http://x"}, exitUsage, "scheme"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := tg.run(t, c.args...)
			assert.Equal(t, c.code, r.code, "stderr: %s", r.stderr)
			assert.Contains(t, r.stderr, c.msg)
		})
	}
}

// forget-group retires a group: refused without --yes (nothing written),
// then its group is gone from the stream and from the queue's record of
// groups; an unknown group exits 3.
func TestForgetGroup(t *testing.T) {
	t.Parallel()
	tg := single(t)
	seed(t, tg)
	rdb := tg.client(t)
	ctx := context.Background()
	before := redistest.Keys(t, rdb, tg.prefix)
	r := tg.run(t, "forget-group", "jobs", "audit")
	assert.Equal(t, exitNotConfirmd, r.code)
	assert.Equal(t, before, redistest.Keys(t, rdb, tg.prefix), "a refused command wrote something")

	assert.Contains(t, tg.ok(t, "forget-group", "jobs", "audit", "--yes"), "forgot group audit of jobs")
	var gs []admin.GroupReport
	tg.json(t, &gs, "groups", "jobs")
	require.Len(t, gs, 1)
	assert.Equal(t, "billing", gs[0].Group)
	keys, err := stream.NewKeys(tg.prefix, "jobs", 0, 1)
	require.NoError(t, err)
	recorded, err := rdb.SMembers(ctx, keys.Groups()).Result()
	require.NoError(t, err)
	assert.Equal(t, []string{"billing"}, recorded)

	assert.Equal(t, exitNotFound, tg.run(t, "forget-group", "jobs", "audit", "--yes").code)
	assert.Equal(t, exitUsage, tg.run(t, "forget-group", "jobs", "bad name", "--yes").code)
}
