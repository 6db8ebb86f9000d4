package admin_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/admin"
	"github.com/delaystream/delaystream/internal/group"
	"github.com/delaystream/delaystream/internal/redistest"
	"github.com/delaystream/delaystream/internal/seedtest"
	"github.com/delaystream/delaystream/internal/stream"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// seed writes the state of seedtest.Seed under a prefix of its own and
// returns an Operator of it and the client.
func seed(t *testing.T) (*admin.Operator, redis.UniversalClient) {
	t.Helper()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	seedtest.Seed(t, rdb, prefix)
	in, err := admin.New(rdb, prefix)
	require.NoError(t, err)
	return in, rdb
}

func TestNew(t *testing.T) {
	t.Parallel()
	_, err := admin.New(nil, "")
	require.ErrorIs(t, err, delaystream.ErrInvalidOption)
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = rdb.Close() })
	_, err = admin.New(rdb, "a b")
	require.ErrorIs(t, err, delaystream.ErrInvalidOption)
	_, err = admin.New(rdb, "")
	require.NoError(t, err)
}

func TestQueuesAndStats(t *testing.T) {
	t.Parallel()
	in, _ := seed(t)
	ctx := context.Background()

	qs, err := in.Queues(ctx)
	require.NoError(t, err)
	require.Len(t, qs, 2)
	assert.Equal(t, []string{"jobs", "orders"}, []string{qs[0].Name, qs[1].Name})
	assert.Equal(t, 1, qs[1].Shards)

	qs, err = in.Queues(ctx, "orders")
	require.NoError(t, err)
	assert.Equal(t, "orders", qs[0].Name)
	assert.NotEmpty(t, qs[0].Meta)
	_, err = in.Queues(ctx, "orders", "nosuch")
	assert.ErrorIs(t, err, delaystream.ErrNotFound)
	_, err = in.Queues(ctx, "a{b}")
	assert.ErrorIs(t, err, delaystream.ErrInvalidOption)

	all, err := in.Stats(ctx)
	require.NoError(t, err)
	require.Len(t, all, 2)
	assert.Equal(t, "jobs", all[0].Queue)

	rs, err := in.Stats(ctx, "orders")
	require.NoError(t, err)
	require.Len(t, rs, 1)
	st := rs[0]
	assert.Equal(t, int64(3), st.Waiting)
	assert.Equal(t, int64(1), st.Overdue, "the message due a minute ago, with no mover running")
	assert.WithinDuration(t, time.Now().Add(-time.Minute), st.NextDue, 10*time.Second)
	assert.GreaterOrEqual(t, st.OverdueBy(), 50*time.Second)
	assert.Empty(t, st.Groups)
	require.Len(t, st.PerShard, 1)
	assert.Equal(t, st.Waiting, st.PerShard[0].Waiting)

	rs, err = in.Stats(ctx, "jobs")
	require.NoError(t, err)
	st = rs[0]
	assert.Zero(t, st.OverdueBy())
	assert.Equal(t, int64(1), st.Quarantined)
	require.Len(t, st.Groups, 2)
	assert.Equal(t, "audit", st.Groups[0].Group)
	assert.Equal(t, "billing", st.Groups[1].Group)
	assert.Equal(t, int64(3), st.Groups[1].DeadLetters)
	assert.Equal(t, int64(0), st.Groups[1].Lag)
	assert.Nil(t, st.Groups[1].ConsumerList, "Stats reads no consumers")
	assert.Equal(t, st.Groups, st.PerShard[0].Groups, "one shard: its figures are the queue's")

	_, err = in.Stats(ctx, "nosuch")
	assert.ErrorIs(t, err, delaystream.ErrNotFound)
}

func TestShardedStats(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	q, err := delaystream.New(rdb, "wide", delaystream.WithPrefix(prefix), delaystream.WithShards(3))
	require.NoError(t, err)
	for i := range 12 {
		_, err := q.Schedule(ctx, delaystream.Message{ID: fmt.Sprint("m", i)}, delaystream.After(time.Hour))
		require.NoError(t, err)
	}
	in, err := admin.New(rdb, prefix)
	require.NoError(t, err)
	rs, err := in.Stats(ctx, "wide")
	require.NoError(t, err)
	st := rs[0]
	assert.Equal(t, 3, st.Shards)
	require.Len(t, st.PerShard, 3)
	var sum int64
	for i, s := range st.PerShard {
		assert.Equal(t, i, s.Shard)
		assert.NotEmpty(t, s.Tag)
		sum += s.Waiting
	}
	assert.Equal(t, int64(12), st.Waiting)
	assert.Equal(t, st.Waiting, sum)

	ms, err := in.Peek(ctx, "wide", admin.ListOptions{IDs: []string{"m7"}})
	require.NoError(t, err)
	layout, err := stream.NewLayout(prefix, "wide", 3)
	require.NoError(t, err)
	assert.Equal(t, layout.ShardOf("m7"), ms[0].Shard)
}

func TestPeek(t *testing.T) {
	t.Parallel()
	in, _ := seed(t)
	ctx := context.Background()

	ms, err := in.Peek(ctx, "orders", admin.ListOptions{})
	require.NoError(t, err)
	require.Len(t, ms, 3)
	assert.Equal(t, []string{"late", "soon", "later"}, []string{ms[0].ID, ms[1].ID, ms[2].ID})
	assert.True(t, ms[0].Overdue)
	assert.False(t, ms[1].Overdue)
	assert.Equal(t, `{"order":5001}`, string(ms[1].Payload))
	assert.Equal(t, 14, ms[1].Size)
	assert.Equal(t, map[string]string{"tenant": "acme"}, ms[1].Headers)
	assert.Equal(t, 1, ms[1].Attempt)

	ms, err = in.Peek(ctx, "orders", admin.ListOptions{Limit: 1})
	require.NoError(t, err)
	require.Len(t, ms, 1)

	ms, err = in.Peek(ctx, "orders", admin.ListOptions{IDs: []string{"later", "late"}})
	require.NoError(t, err)
	require.Len(t, ms, 2)
	assert.Equal(t, "later", ms[0].ID)
	assert.False(t, ms[0].Overdue)
	assert.WithinDuration(t, time.Now().Add(2*time.Hour), ms[0].Due, 10*time.Second)
	assert.True(t, ms[1].Overdue)

	_, err = in.Peek(ctx, "orders", admin.ListOptions{IDs: []string{"nope"}})
	assert.ErrorIs(t, err, delaystream.ErrNotFound)
	_, err = in.Peek(ctx, "nosuch", admin.ListOptions{})
	assert.ErrorIs(t, err, delaystream.ErrNotFound)
	for name, o := range map[string]admin.ListOptions{
		"negative limit": {Limit: -1},
		"limit too big":  {Limit: admin.MaxPeek + 1},
		"after":          {After: "1-0"},
		"filter":         {Reason: group.ReasonExpired},
		"ids and limit":  {IDs: []string{"late"}, Limit: 2},
	} {
		_, err := in.Peek(ctx, "orders", o)
		assert.ErrorIs(t, err, delaystream.ErrInvalidOption, name)
	}
}

// Cancel takes waiting messages by id and by id prefix, reports those
// not waiting, and refuses the fields of other actions; Queue gives the
// queue's own Cancel and Reschedule.
func TestCancelAndReschedule(t *testing.T) {
	t.Parallel()
	in, rdb := seed(t)
	ctx := context.Background()

	before := redistest.Keys(t, rdb, prefixOf(t, in))
	res, err := in.Cancel(ctx, "orders", admin.ActionOptions{IDs: []string{"soon", "nope"}, DryRun: true})
	require.NoError(t, err)
	assert.Equal(t, admin.ActionResult{Queue: "orders", Action: "cancel", DryRun: true, Matched: 1, IDs: []string{"soon"},
		NotFound: []string{"nope"}}, res)
	for name, o := range map[string]admin.ActionOptions{
		"neither":  {},
		"all":      {IDs: []string{"soon"}, All: true},
		"delay":    {IDs: []string{"soon"}, Delay: time.Minute},
		"force":    {IDs: []string{"soon"}, Force: true},
		"filter":   {IDs: []string{"soon"}, Reason: group.ReasonExpired},
		"bad id":   {IDs: []string{""}},
		"prefix *": {IDPrefix: "x", All: true},
	} {
		_, err := in.Cancel(ctx, "orders", o)
		assert.ErrorIs(t, err, delaystream.ErrInvalidOption, name)
	}
	assert.Equal(t, before, redistest.Keys(t, rdb, prefixOf(t, in)), "a dry run or a refusal wrote something")
	res, err = in.Cancel(ctx, "orders", admin.ActionOptions{IDs: []string{"soon"}})
	require.NoError(t, err)
	assert.Equal(t, 1, res.Done)
	res, err = in.Cancel(ctx, "orders", admin.ActionOptions{IDs: []string{"soon"}})
	require.NoError(t, err)
	assert.Equal(t, []string{"soon"}, res.NotFound, "cancelled already")

	q, err := in.Queue(ctx, "orders")
	require.NoError(t, err)
	at := time.Now().Add(3 * time.Hour).Truncate(time.Millisecond)
	due, err := q.Reschedule(ctx, "later", delaystream.At(at))
	require.NoError(t, err)
	assert.True(t, at.Equal(due), "due %s, want %s", due, at)
	ms, err := in.Peek(ctx, "orders", admin.ListOptions{IDs: []string{"later"}})
	require.NoError(t, err)
	assert.True(t, at.Equal(ms[0].Due), "the operator's view agrees")
	_, err = q.Reschedule(ctx, "gone", delaystream.After(time.Minute))
	assert.ErrorIs(t, err, delaystream.ErrNotFound)
	_, err = in.Queue(ctx, "nosuch")
	assert.ErrorIs(t, err, delaystream.ErrNotFound)
}

func TestGroups(t *testing.T) {
	t.Parallel()
	in, _ := seed(t)
	gs, err := in.Groups(context.Background(), "jobs")
	require.NoError(t, err)
	require.Len(t, gs, 2)
	assert.Equal(t, "billing", gs[1].Group)
	assert.Equal(t, int64(1), gs[1].Consumers)
	require.Len(t, gs[1].ConsumerList, 1)
	assert.Equal(t, int64(0), gs[1].ConsumerList[0].Pending)
}

func TestDeadLetters(t *testing.T) {
	t.Parallel()
	in, _ := seed(t)
	ctx := context.Background()

	ds, err := in.DeadLetters(ctx, "jobs", "billing", admin.ListOptions{})
	require.NoError(t, err)
	require.Len(t, ds, 3)
	for _, d := range ds {
		assert.Equal(t, group.ReasonHandler, d.Reason)
		assert.Contains(t, d.LastError, "card declined")
		assert.True(t, d.Decoded)
		assert.Equal(t, "job payload "+d.ID[len("job-"):], string(d.Payload))
	}
	ds2, err := in.DeadLetters(ctx, "jobs", "billing", admin.ListOptions{After: ds[0].EntryID, Limit: 1})
	require.NoError(t, err)
	assert.Equal(t, ds[1:2], ds2)
	ds2, err = in.DeadLetters(ctx, "jobs", "billing", admin.ListOptions{IDs: []string{ds[2].EntryID}})
	require.NoError(t, err)
	assert.Equal(t, ds[2:], ds2)

	// Newest first: the same entries in reverse, paged towards older
	// ones, whole or cut.
	newest, err := in.DeadLetters(ctx, "jobs", "billing", admin.ListOptions{Newest: true})
	require.NoError(t, err)
	assert.Equal(t, []delaystream.DeadLetterEntry{ds[2], ds[1], ds[0]}, newest)
	ds2, err = in.DeadLetters(ctx, "jobs", "billing", admin.ListOptions{Newest: true, After: ds[2].EntryID, Limit: 1})
	require.NoError(t, err)
	assert.Equal(t, ds[1:2], ds2)
	cut, err := in.DeadLetters(ctx, "jobs", "billing", admin.ListOptions{Newest: true, MaxPayloadBytes: 3})
	require.NoError(t, err)
	require.Len(t, cut, 3)
	for i, d := range cut {
		assert.Equal(t, newest[i].EntryID, d.EntryID)
		assert.Equal(t, newest[i].Payload[:3], d.Payload, "cut")
		assert.Equal(t, newest[i].Size, d.Size, "the whole size")
	}
	_, err = in.DeadLetters(ctx, "jobs", "billing", admin.ListOptions{Newest: true, IDs: []string{ds[0].EntryID}})
	assert.ErrorIs(t, err, delaystream.ErrInvalidOption, "Newest with IDs")
	_, err = in.Peek(ctx, "jobs", admin.ListOptions{Newest: true})
	assert.ErrorIs(t, err, delaystream.ErrInvalidOption, "Peek takes no Newest")
	_, err = in.DeadLetters(ctx, "jobs", "billing", admin.ListOptions{IDs: []string{"1-1"}})
	assert.ErrorIs(t, err, delaystream.ErrNotFound)
	_, err = in.DeadLetters(ctx, "jobs", "billing", admin.ListOptions{IDs: []string{"bogus"}})
	assert.ErrorIs(t, err, delaystream.ErrInvalidOption)

	ds2, err = in.DeadLetters(ctx, "jobs", "billing", admin.ListOptions{Reason: group.ReasonHandler, From: time.Now().Add(-time.Hour)})
	require.NoError(t, err)
	assert.Len(t, ds2, 3)
	ds2, err = in.DeadLetters(ctx, "jobs", "billing", admin.ListOptions{Reason: group.ReasonExpired})
	require.NoError(t, err)
	assert.Empty(t, ds2)
	ds2, err = in.DeadLetters(ctx, "jobs", "billing", admin.ListOptions{To: ds[0].At})
	require.NoError(t, err)
	assert.Empty(t, ds2)
	ds2, err = in.DeadLetters(ctx, "jobs", "billing", admin.ListOptions{Reason: "handler"})
	require.NoError(t, err, "a reason's metrics label")
	assert.Len(t, ds2, 3)
	_, err = in.DeadLetters(ctx, "jobs", "billing", admin.ListOptions{Reason: "card declined"})
	require.ErrorIs(t, err, delaystream.ErrInvalidOption, "a reason no dead letter has")
	assert.Contains(t, err.Error(), `"handler asked to dead-letter"`, "the error names the valid reasons")

	ds2, err = in.DeadLetters(ctx, "jobs", "audit", admin.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, ds2)
	_, err = in.DeadLetters(ctx, "jobs", "nosuchgroup", admin.ListOptions{})
	assert.ErrorIs(t, err, delaystream.ErrNotFound)
}

func TestRedriveAndPurge(t *testing.T) {
	t.Parallel()
	in, rdb := seed(t)
	ctx := context.Background()
	ds, err := in.DeadLetters(ctx, "jobs", "billing", admin.ListOptions{})
	require.NoError(t, err)
	require.Len(t, ds, 3)

	// A dry run and a refused selection write nothing.
	before := redistest.Keys(t, rdb, prefixOf(t, in))
	res, err := in.Redrive(ctx, "jobs", "billing", admin.ActionOptions{All: true, DryRun: true})
	require.NoError(t, err)
	assert.Equal(t, admin.ActionResult{Queue: "jobs", Group: "billing", Action: "redrive", DryRun: true, Matched: 3,
		IDs: []string{ds[0].EntryID, ds[1].EntryID, ds[2].EntryID}}, res)
	res, err = in.Purge(ctx, "jobs", "billing", admin.ActionOptions{All: true, Reason: group.ReasonExpired, DryRun: true})
	require.NoError(t, err)
	assert.Zero(t, res.Matched)
	for name, o := range map[string]admin.ActionOptions{
		"neither":           {},
		"both":              {All: true, IDs: []string{ds[0].EntryID}},
		"filter by id":      {IDs: []string{ds[0].EntryID}, Reason: group.ReasonHandler},
		"unknown reason":    {All: true, Reason: "declined"},
		"force":             {All: true, Force: true},
		"prefix":            {All: true, IDPrefix: "x"},
		"purge with delay":  {All: true, Delay: time.Second},
		"negative delay":    {All: true, Delay: -time.Second},
		"malformed entryid": {IDs: []string{"bogus"}},
	} {
		do := in.Purge
		if name == "negative delay" {
			do = in.Redrive
		}
		_, err := do(ctx, "jobs", "billing", o)
		assert.ErrorIs(t, err, delaystream.ErrInvalidOption, name)
	}
	assert.Equal(t, before, redistest.Keys(t, rdb, prefixOf(t, in)), "a dry run or a refusal wrote something")

	res, err = in.Purge(ctx, "jobs", "billing", admin.ActionOptions{IDs: []string{ds[0].EntryID, "1-1"}})
	require.NoError(t, err)
	assert.Equal(t, 1, res.Done)
	assert.Equal(t, []string{"1-1"}, res.NotFound)

	res, err = in.Redrive(ctx, "jobs", "billing", admin.ActionOptions{All: true, Delay: time.Hour})
	require.NoError(t, err)
	assert.Equal(t, 2, res.Matched)
	assert.Equal(t, 2, res.Done)
	rs, err := in.Stats(ctx, "jobs")
	require.NoError(t, err)
	assert.Equal(t, int64(0), rs[0].Groups[1].DeadLetters)
	assert.Equal(t, int64(2), rs[0].Groups[1].RetryWaiting)
	assert.Equal(t, int64(0), rs[0].Groups[0].RetryWaiting, "a redrive goes to its own group only")
}

// prefixOf returns the prefix in reads, from the record of its queue
// "jobs".
func prefixOf(t *testing.T, in *admin.Operator) string {
	t.Helper()
	qs, err := in.Queues(context.Background(), "jobs")
	require.NoError(t, err)
	prefix, _, ok := strings.Cut(qs[0].Meta, ":1:")
	require.True(t, ok, qs[0].Meta)
	return prefix
}

func TestQuarantine(t *testing.T) {
	t.Parallel()
	in, _ := seed(t)
	ctx := context.Background()
	qs, err := in.Quarantine(ctx, "jobs", admin.ListOptions{})
	require.NoError(t, err)
	require.Len(t, qs, 1)
	assert.Equal(t, "main", qs[0].Lane)
	assert.Equal(t, stream.ReasonUnknownMember, qs[0].Reason)
	assert.Equal(t, "\x02junk", string(qs[0].Member))
	qs, err = in.Quarantine(ctx, "orders", admin.ListOptions{Limit: 5})
	require.NoError(t, err)
	assert.Empty(t, qs)
	for name, o := range map[string]admin.ListOptions{
		"ids":      {IDs: []string{"1-0"}},
		"after":    {After: "1-0"},
		"filter":   {From: time.Now()},
		"negative": {Limit: -1},
	} {
		_, err := in.Quarantine(ctx, "jobs", o)
		assert.ErrorIs(t, err, delaystream.ErrInvalidOption, name)
	}
}

func TestForgetGroup(t *testing.T) {
	t.Parallel()
	in, _ := seed(t)
	ctx := context.Background()
	require.NoError(t, in.ForgetGroup(ctx, "jobs", "audit"))
	gs, err := in.Groups(ctx, "jobs")
	require.NoError(t, err)
	require.Len(t, gs, 1)
	assert.Equal(t, "billing", gs[0].Group)
	assert.ErrorIs(t, in.ForgetGroup(ctx, "jobs", "audit"), delaystream.ErrNotFound)
	assert.ErrorIs(t, in.ForgetGroup(ctx, "jobs", "bad name"), delaystream.ErrInvalidOption)
}
