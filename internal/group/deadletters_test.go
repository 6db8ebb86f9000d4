package group_test

import (
	"context"
	"errors"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/internal/group"
	"github.com/delaystream/delaystream/internal/stream"
	"github.com/delaystream/delaystream/internal/wire"
)

// The dead-letter API end to end: List paging, Get, Len, Redrive (one, some,
// all, with a delay, to this group only, attempt reset to 1), RedriveError,
// Purge and PurgeAll.
func TestDeadLettersAPI(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	h.startMover()

	// Group g fails every message twice (max attempts 2) until it is told to
	// accept it; group "other" accepts everything at once.
	var accept sync.Map
	rec, other := newRecorder(), newRecorder()
	c := h.consumer("g", func(_ context.Context, m *group.Message) error {
		if _, ok := accept.Load(m.ID); ok {
			rec.add(m)
			return nil
		}
		return errors.New("not yet")
	}, group.WithMaxAttempts(2), group.WithBackoff(group.ConstantBackoff(10*time.Millisecond)))
	co := h.consumer("other", other.ack)
	r, ro := start(t, c.Run), start(t, co.Run)
	dl, err := group.NewDeadLetters(h.rdb, h.queue, "g", group.WithPrefix(h.prefix))
	require.NoError(t, err)
	assert.Equal(t, c.DeadLetters().Key(), dl.Key(), "standalone handle and consumer's handle")

	msgIDs := ids("dl", 8)
	h.schedule(msgIDs, 0)
	waitFor(t, 10*time.Second, func() bool { return dlLen(t, dl) == 8 && other.total() == 8 })

	// List pages of 3: 3 + 3 + 2, then nothing.
	var all []group.DeadEntry
	after := ""
	var pages []int
	for {
		page, err := dl.List(ctx, after, 3)
		require.NoError(t, err)
		if len(page) == 0 {
			break
		}
		pages = append(pages, len(page))
		all = append(all, page...)
		after = page[len(page)-1].EntryID
	}
	assert.Equal(t, []int{3, 3, 2}, pages)
	byMsg := map[string]group.DeadEntry{}
	for i, d := range all {
		if i > 0 {
			assert.True(t, stream.EntryTime(all[i-1].EntryID).Compare(stream.EntryTime(d.EntryID)) <= 0, "oldest first")
			assert.NotEqual(t, all[i-1].EntryID, d.EntryID)
		}
		assert.Equal(t, group.ReasonAttempts, d.Reason)
		assert.Equal(t, 2, d.Attempt)
		assert.Equal(t, "not yet", d.LastError)
		assert.True(t, d.Decoded)
		assert.Equal(t, []byte(d.Envelope.ID), d.Envelope.Payload)
		assert.Equal(t, h.retryStream("g"), d.Source)
		byMsg[d.Envelope.ID] = d
	}
	assert.Equal(t, msgIDs, sortedKeys(byMsg))
	_, err = dl.List(ctx, "", 0)
	assert.ErrorIs(t, err, group.ErrInvalidOption)

	// Get.
	got, err := dl.Get(ctx, all[4].EntryID)
	require.NoError(t, err)
	assert.Equal(t, all[4], got)
	_, err = dl.Get(ctx, "1-1")
	assert.ErrorIs(t, err, group.ErrNotFound)

	// Redrive one, after 400 ms: not delivered before the delay (Redis
	// clock and local clock), delivered to g only, attempt 1 again.
	const delay = 400 * time.Millisecond
	one := byMsg["dl00003"]
	accept.Store("dl00003", true)
	beforeRedis, beforeLocal := h.redisNow(), time.Now().Round(0)
	n, err := dl.Redrive(ctx, delay, one.EntryID)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	waitFor(t, 5*time.Second, func() bool { return len(rec.get("dl00003")) == 1 })
	d := rec.get("dl00003")[0]
	assert.Equal(t, 1, d.Attempt, "attempt reset to 1")
	assert.Equal(t, h.retryStream("g"), d.Stream)
	assert.GreaterOrEqual(t, d.Due.UnixMicro(), beforeRedis.Add(delay).UnixMicro(), "due before redrive+delay")
	assert.False(t, stream.EntryTime(d.EntryID).Before(d.Due), "appended before due")
	assert.GreaterOrEqual(t, d.At.Sub(beforeLocal), delay, "received %s after Redrive", d.At.Sub(beforeLocal))
	assert.EqualValues(t, 7, dlLen(t, dl))
	_, err = dl.Get(ctx, one.EntryID)
	assert.ErrorIs(t, err, group.ErrNotFound, "a redriven dead letter is gone")

	// Redrive some, at once.
	accept.Store("dl00000", true)
	accept.Store("dl00006", true)
	n, err = dl.Redrive(ctx, 0, byMsg["dl00000"].EntryID, byMsg["dl00006"].EntryID)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	waitFor(t, 5*time.Second, func() bool { return len(rec.get("dl00000")) == 1 && len(rec.get("dl00006")) == 1 })

	// Not found: already redriven, or never existed; the others still go.
	accept.Store("dl00001", true)
	n, err = dl.Redrive(ctx, 0, one.EntryID, byMsg["dl00001"].EntryID, "1-1")
	assert.Equal(t, 1, n)
	var re *group.RedriveError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, []string{one.EntryID, "1-1"}, re.NotFound)
	assert.Empty(t, re.Unrecoverable)
	assert.ErrorIs(t, err, group.ErrNotFound)
	assert.EqualError(t, err, "delaystream: redrive g: 2 not found ("+one.EntryID+", 1-1)", "one prefix, the ids named")
	waitFor(t, 5*time.Second, func() bool { return len(rec.get("dl00001")) == 1 })
	_, err = dl.Redrive(ctx, -time.Second, byMsg["dl00002"].EntryID)
	assert.ErrorIs(t, err, group.ErrInvalidOption)
	n, err = dl.Redrive(ctx, 0)
	assert.NoError(t, err)
	assert.Zero(t, n)

	// Unrecoverable: an undecodable entry's dead letter has no envelope to
	// send again. It stays where it is.
	h.addEntry(h.mainStream(), "i", "junk", "d", "1", "e", "not an envelope")
	var bad group.DeadEntry
	waitFor(t, 5*time.Second, func() bool {
		page, _ := dl.List(ctx, "", 100)
		for _, d := range page {
			if d.Reason == group.ReasonUndecodable {
				bad = d
				return true
			}
		}
		return false
	})
	n, err = dl.Redrive(ctx, 0, bad.EntryID)
	assert.Zero(t, n)
	require.ErrorAs(t, err, &re)
	assert.Equal(t, []string{bad.EntryID}, re.Unrecoverable)
	assert.Empty(t, re.NotFound)
	_, err = dl.Get(ctx, bad.EntryID)
	assert.NoError(t, err, "unrecoverable dead letter left in place")

	// RedriveAll: the four remaining good ones go, the bad one stays.
	for _, id := range []string{"dl00002", "dl00004", "dl00005", "dl00007"} {
		accept.Store(id, true)
	}
	n, err = dl.RedriveAll(ctx, 0)
	assert.Equal(t, 4, n)
	require.ErrorAs(t, err, &re)
	assert.Equal(t, []string{bad.EntryID}, re.Unrecoverable)
	assert.EqualValues(t, 1, dlLen(t, dl))
	waitFor(t, 5*time.Second, func() bool { return rec.total() == 8 })

	// Purge.
	k, err := dl.Purge(ctx, bad.EntryID)
	require.NoError(t, err)
	assert.EqualValues(t, 1, k)
	k, err = dl.Purge(ctx, bad.EntryID)
	require.NoError(t, err)
	assert.Zero(t, k)
	n, err = dl.RedriveAll(ctx, 0)
	assert.NoError(t, err, "nothing to redrive")
	assert.Zero(t, n)

	// PurgeAll.
	h.schedule(ids("later", 3), 0)
	waitFor(t, 10*time.Second, func() bool { return dlLen(t, dl) == 3 })
	require.NoError(t, dl.PurgeAll(ctx))
	assert.Zero(t, dlLen(t, dl))

	waitFor(t, 10*time.Second, func() bool { return other.total() == 11 })
	stopAll(t, r, ro)

	// Every redriven message came back once, to g only, with attempt 1.
	for _, id := range msgIDs {
		ds := rec.get(id)
		require.Len(t, ds, 1, id)
		assert.Equal(t, 1, ds[0].Attempt, id)
		assert.Equal(t, h.retryStream("g"), ds[0].Stream, id)
	}
	for id, ds := range other.snapshot() {
		assert.Len(t, ds, 1, "group other saw %s again", id)
	}
	infoOther, err := h.rdb.XInfoStream(ctx, h.retryStream("other")).Result()
	require.NoError(t, err)
	assert.Zero(t, infoOther.EntriesAdded, "nothing ever reached other's retry lane")
}

// WithDeadLetterCap(5) with 8 dead letters keeps the 5 newest and counts the
// 3 trimmed; a pending entry found deleted is recorded under the same cap,
// and what it pushes out is counted too.
func TestDeadLetterCap(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	h.startMover()
	var dlOrder sync.Map // message id -> order it was dead-lettered in
	var seq int64
	var mu sync.Mutex
	c := h.consumer("g", func(context.Context, *group.Message) error {
		return group.DeadLetter(errors.New("no"))
	}, group.WithWorkers(1), // one at a time: the hook order is the dead-letter order
		group.WithDeadLetterCap(5), group.WithVisibilityTimeout(100*time.Millisecond), group.WithReclaimInterval(20*time.Millisecond),
		group.WithHooks(group.Hooks{OnDeadLettered: func(m *group.Message, _ string) {
			if m != nil {
				mu.Lock()
				seq++
				dlOrder.Store(m.ID, seq)
				mu.Unlock()
			}
		}}))
	r := start(t, c.Run)
	h.schedule(ids("cap", 8), 0)
	waitFor(t, 10*time.Second, func() bool { return c.Counters().DeadLettered >= 8 })

	dl := c.DeadLetters()
	assert.EqualValues(t, 5, dlLen(t, dl))
	assert.EqualValues(t, 3, c.Counters().DeadLettersDropped)
	kept := deadLetters(t, dl)
	require.Len(t, kept, 5)
	var keptOrder []int64
	for _, d := range kept {
		v, ok := dlOrder.Load(d.Envelope.ID)
		require.True(t, ok)
		keptOrder = append(keptOrder, v.(int64))
	}
	sort.Slice(keptOrder, func(i, j int) bool { return keptOrder[i] < keptOrder[j] })
	assert.Equal(t, []int64{4, 5, 6, 7, 8}, keptOrder, "the newest five are kept")

	r.stop(t)

	// A record of an entry deleted while pending (found by a new consumer
	// of the group) also respects the cap, and what it pushes out is counted.
	key := h.mainStream()
	gone := h.addEntry(key, envEntry("gone", "x")...)
	_, err := h.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: "ghost", Streams: []string{key, ">"}, Count: 1, Block: -1}).Result()
	require.NoError(t, err)
	require.NoError(t, h.rdb.XDel(ctx, key, gone).Err())
	c2 := h.consumer("g", func(context.Context, *group.Message) error { return nil },
		group.WithDeadLetterCap(5), group.WithVisibilityTimeout(100*time.Millisecond), group.WithReclaimInterval(20*time.Millisecond))
	r2 := start(t, c2.Run)
	waitFor(t, 10*time.Second, func() bool { return c2.Counters().DeletedWhilePending >= 1 })
	r2.stop(t)
	assert.EqualValues(t, 5, dlLen(t, dl))
	assert.EqualValues(t, 1, c2.Counters().DeadLettered)
	assert.EqualValues(t, 1, c2.Counters().DeadLettersDropped, "the dead letter the record pushed out is counted")
	kept = deadLetters(t, dl)
	assert.Equal(t, group.ReasonDeleted, kept[len(kept)-1].Reason)
	assert.Equal(t, gone, kept[len(kept)-1].SourceID)
	// Such a record has no message left to send again.
	n, err := dl.Redrive(ctx, 0, kept[len(kept)-1].EntryID)
	assert.Zero(t, n)
	var re *group.RedriveError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, []string{kept[len(kept)-1].EntryID}, re.Unrecoverable)
}

// Dead letters written by someone else (no message id, an id no producer
// could give, no valid envelope) are not redriven and stay in place; the
// good one beside them is. Ids that are not stream entry ids are refused
// at the call, and nothing is written.
func TestRedriveForeignDeadLetters(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	dl, err := group.NewDeadLetters(h.rdb, h.queue, "g", group.WithPrefix(h.prefix))
	require.NoError(t, err)
	key := dl.Key()
	good := h.addEntry(key, envEntry("good", "p")...)
	noID := h.addEntry(key, envEntry("", "p")...)
	ctrlID := h.addEntry(key, envEntry("\x01packed-looking", "p")...)
	noEnv := h.addEntry(key, wire.FieldID, "no-env", wire.FieldReason, "x")
	badEnv := h.addEntry(key, wire.FieldID, "bad-env", wire.FieldEnvelope, "\x00garbage")

	n, err := dl.Redrive(ctx, 0, good, noID, ctrlID, noEnv, badEnv)
	assert.Equal(t, 1, n)
	var re *group.RedriveError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, []string{noID, ctrlID, noEnv, badEnv}, re.Unrecoverable)
	assert.NotErrorIs(t, err, group.ErrNotFound)
	assert.EqualError(t, err, "delaystream: redrive g: 4 unrecoverable, no message to redrive: purge them ("+
		strings.Join([]string{noID, ctrlID, noEnv, badEnv}, ", ")+")")
	assert.Equal(t, int64(4), dlLen(t, dl), "the foreign entries stay")
	members, err := h.rdb.ZRange(ctx, h.retryDelayed("g"), 0, -1).Result()
	require.NoError(t, err)
	assert.Equal(t, []string{wire.RetryMember("good", good)}, members)

	for _, bad := range []string{"x", "1-", "-1", "1-2-3", "1-x"} {
		_, err := dl.Redrive(ctx, 0, good, bad)
		require.ErrorIs(t, err, group.ErrInvalidOption, bad)
		assert.Contains(t, err.Error(), "is not a stream entry id")
		_, err = dl.Purge(ctx, badEnv, bad)
		require.ErrorIs(t, err, group.ErrInvalidOption, bad)
	}
	assert.Equal(t, int64(4), dlLen(t, dl), "nothing purged by a refused call")
}

// A redrive that meets the retry lane's envelopes hash holding another
// type fails having written nothing: no retry-lane member without its
// envelope (the mover would quarantine it, and its due time, never
// announced, would hide later retries' wake-ups), the dead letter kept.
func TestRedriveWrongTypeWritesNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	dl, err := group.NewDeadLetters(h.rdb, h.queue, "g", group.WithPrefix(h.prefix))
	require.NoError(t, err)
	id := h.addEntry(dl.Key(), envEntry("m1", "p")...)
	require.NoError(t, h.rdb.Set(ctx, h.keys.Retry("g").Envelopes, "foreign", 0).Err())

	_, err = dl.Redrive(ctx, 0, id)
	require.ErrorIs(t, err, stream.ErrWrongType)
	n, err := h.rdb.ZCard(ctx, h.retryDelayed("g")).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "retry-lane members written by the failed redrive")
	assert.Equal(t, int64(1), dlLen(t, dl), "the dead letter stays")
}
