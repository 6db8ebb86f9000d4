package admin_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/admin"
	"github.com/delaystream/delaystream/internal/stream"
)

// With MaxPayloadBytes, Peek, DeadLetters and Quarantine list what they
// list without it, but for the payloads (and quarantined bytes): at most
// their first MaxPayloadBytes bytes, with the whole Size.
func TestMaxPayloadBytes(t *testing.T) {
	t.Parallel()
	in, rdb := seed(t)
	ctx := context.Background()
	orders, err := delaystream.New(rdb, "orders", delaystream.WithPrefix(prefixOf(t, in)))
	require.NoError(t, err)
	big := strings.Repeat("b", 5000)
	_, err = orders.Schedule(ctx, delaystream.Message{ID: "big", Payload: []byte(big)}, delaystream.After(3*time.Hour))
	require.NoError(t, err)
	_, err = orders.Schedule(ctx, delaystream.Message{Payload: []byte(big)}, delaystream.After(4*time.Hour)) // a generated id
	require.NoError(t, err)

	whole, err := in.Peek(ctx, "orders", admin.ListOptions{})
	require.NoError(t, err)
	cut, err := in.Peek(ctx, "orders", admin.ListOptions{MaxPayloadBytes: 4})
	require.NoError(t, err)
	require.Len(t, cut, 5)
	require.Len(t, whole, 5)
	for i, w := range whole {
		c := cut[i]
		assert.Equal(t, w.ID, c.ID)
		assert.Equal(t, w.Headers, c.Headers)
		assert.Equal(t, w.Size, c.Size, w.ID)
		assert.Equal(t, w.Payload[:min(4, len(w.Payload))], c.Payload, w.ID)
	}
	assert.Equal(t, 5000, cut[3].Size)
	assert.Equal(t, "bbbb", string(cut[4].Payload))

	dw, err := in.DeadLetters(ctx, "jobs", "billing", admin.ListOptions{})
	require.NoError(t, err)
	dc, err := in.DeadLetters(ctx, "jobs", "billing", admin.ListOptions{MaxPayloadBytes: 5, After: dw[0].EntryID})
	require.NoError(t, err)
	require.Len(t, dc, 2)
	for i, c := range dc {
		w := dw[i+1]
		assert.Equal(t, w.EntryID, c.EntryID)
		assert.Equal(t, w.ID, c.ID)
		assert.True(t, c.Decoded)
		assert.Equal(t, w.Size, c.Size)
		assert.Equal(t, "job p", string(c.Payload))
	}

	qw, err := in.Quarantine(ctx, "jobs", admin.ListOptions{})
	require.NoError(t, err)
	qc, err := in.Quarantine(ctx, "jobs", admin.ListOptions{MaxPayloadBytes: 2})
	require.NoError(t, err)
	require.Len(t, qc, 1)
	assert.Equal(t, stream.ReasonUnknownMember, qc[0].Reason)
	assert.Equal(t, "\x02j", string(qc[0].Member))
	assert.Equal(t, len("\x02junk"), qc[0].Size)
	assert.Equal(t, qw[0].Size, qc[0].Size)

	for name, o := range map[string]admin.ListOptions{
		"negative": {MaxPayloadBytes: -1},
		"with ids": {IDs: []string{"late"}, MaxPayloadBytes: 10},
	} {
		_, err := in.Peek(ctx, "orders", o)
		assert.ErrorIs(t, err, delaystream.ErrInvalidOption, name)
		_, err = in.DeadLetters(ctx, "jobs", "billing", o)
		assert.ErrorIs(t, err, delaystream.ErrInvalidOption, name)
	}
}

// A consumer group made on a queue's stream by other means, with a name
// delaystream cannot use, does not fail the figures of the queue (nor of
// every queue): it is reported, marked Foreign, with what XINFO GROUPS
// says of it; the actions refuse it.
func TestForeignGroup(t *testing.T) {
	t.Parallel()
	in, rdb := seed(t)
	ctx := context.Background()
	layout, err := stream.NewLayout(prefixOf(t, in), "jobs", 1)
	require.NoError(t, err)
	require.NoError(t, rdb.XGroupCreate(ctx, layout.Shard(0).Main().Stream, "bad name", "0").Err())

	all, err := in.Stats(ctx)
	require.NoError(t, err)
	require.Len(t, all, 2)
	jobs := all[0]
	require.Equal(t, "jobs", jobs.Queue)
	require.Len(t, jobs.Groups, 3)
	var foreign admin.GroupReport
	for _, g := range jobs.Groups {
		if g.Group == "bad name" {
			foreign = g
		} else {
			assert.False(t, g.Foreign, g.Group)
		}
	}
	require.Equal(t, "bad name", foreign.Group)
	assert.True(t, foreign.Foreign)
	assert.Contains(t, []int64{3, -1}, foreign.Lag, "created at 0: the 3 entries to deliver (or unknown, once trimmed)")
	assert.Zero(t, foreign.Pending)
	assert.Zero(t, foreign.Consumers)
	require.Len(t, jobs.PerShard, 1)
	assert.Len(t, jobs.PerShard[0].Groups, 3)

	gs, err := in.Groups(ctx, "jobs")
	require.NoError(t, err)
	assert.Len(t, gs, 3)
	_, err = in.Quarantine(ctx, "jobs", admin.ListOptions{})
	require.NoError(t, err)
	_, err = in.Pause(ctx, "jobs", "bad name")
	assert.ErrorIs(t, err, delaystream.ErrInvalidOption)
	_, err = in.DeadLetters(ctx, "jobs", "bad name", admin.ListOptions{})
	assert.ErrorIs(t, err, delaystream.ErrInvalidOption)
}

// RecurringIDs lists the schedules' ids, sorted (a paused one too, not a
// deleted one), and nothing for a queue without any; it never reads the
// definitions, which carry the occurrences' payloads.
func TestRecurringIDs(t *testing.T) {
	t.Parallel()
	in, rdb := seed(t)
	ctx := context.Background()
	ids, err := in.RecurringIDs(ctx, "orders")
	require.NoError(t, err)
	assert.Empty(t, ids)
	prefix := prefixOf(t, in)
	orders, err := delaystream.New(rdb, "orders", delaystream.WithPrefix(prefix))
	require.NoError(t, err)
	for _, id := range []string{"c", "a", "b", "d"} {
		_, err := orders.DefineRecurring(ctx, delaystream.Recurring{ID: id, Spec: delaystream.Every(24 * time.Hour),
			Payload: []byte(strings.Repeat("p", 10000))})
		require.NoError(t, err)
	}
	require.NoError(t, orders.PauseRecurring(ctx, "b"))
	require.NoError(t, orders.DeleteRecurring(ctx, "d"))

	// A client that records every command it sends.
	watched := redis.NewClient(rdb.(*redis.Client).Options())
	t.Cleanup(func() { _ = watched.Close() })
	rec := &cmdRecorder{}
	watched.AddHook(rec)
	win, err := admin.New(watched, prefix)
	require.NoError(t, err)
	ids, err = win.RecurringIDs(ctx, "orders")
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b", "c"}, ids)
	layout, err := stream.NewLayout(prefix, "orders", 1)
	require.NoError(t, err)
	require.NotEmpty(t, rec.all())
	for _, args := range rec.all() {
		assert.NotContains(t, args, layout.Recurring(), "a command on the definitions: %v", args)
	}
	_, err = in.RecurringIDs(ctx, "nosuch")
	assert.ErrorIs(t, err, delaystream.ErrNotFound)
}

// cmdRecorder is a go-redis hook that records the arguments of every
// command.
type cmdRecorder struct {
	mu   sync.Mutex
	cmds [][]string
}

func (r *cmdRecorder) all() [][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.cmds)
}

func (r *cmdRecorder) record(cmds ...redis.Cmder) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range cmds {
		args := make([]string, len(c.Args()))
		for i, a := range c.Args() {
			args[i] = fmt.Sprint(a)
		}
		r.cmds = append(r.cmds, args)
	}
}

func (r *cmdRecorder) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *cmdRecorder) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, c redis.Cmder) error {
		r.record(c)
		return next(ctx, c)
	}
}

func (r *cmdRecorder) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		r.record(cmds...)
		return next(ctx, cmds)
	}
}

// Groups lists the consumers of a group made by other means, whose retry
// lane does not exist ("ERR no such key" from XINFO CONSUMERS): of one
// with a name delaystream could use, and of a foreign one, whose retry
// lane is never looked for.
func TestGroupsWithoutRetryLane(t *testing.T) {
	t.Parallel()
	in, rdb := seed(t)
	ctx := context.Background()
	layout, err := stream.NewLayout(prefixOf(t, in), "jobs", 1)
	require.NoError(t, err)
	main := layout.Shard(0).Main().Stream
	for _, g := range []string{"outside", "bad name"} {
		require.NoError(t, rdb.XGroupCreate(ctx, main, g, "0").Err())
		require.NoError(t, rdb.XGroupCreateConsumer(ctx, main, g, "c1").Err())
		n, err := rdb.Exists(ctx, layout.Shard(0).Retry(g).Stream).Result()
		require.NoError(t, err)
		require.Zero(t, n, "%s: no retry lane", g)
	}

	gs, err := in.Groups(ctx, "jobs")
	require.NoError(t, err)
	byName := map[string]admin.GroupReport{}
	for _, g := range gs {
		byName[g.Group] = g
	}
	for _, g := range []string{"outside", "bad name"} {
		require.Contains(t, byName, g)
		assert.Equal(t, g == "bad name", byName[g].Foreign, g)
		require.Len(t, byName[g].ConsumerList, 1, g)
		assert.Equal(t, "c1", byName[g].ConsumerList[0].Name, g)
	}
}
