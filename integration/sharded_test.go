package integration

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/integration/internal/harness"
	"github.com/delaystream/delaystream/internal/delay"
	"github.com/delaystream/delaystream/internal/group"
	"github.com/delaystream/delaystream/internal/margin"
	"github.com/delaystream/delaystream/internal/stream"
	"github.com/delaystream/delaystream/internal/wire"
)

// TestShardedClusterSuite states the guarantees of a queue of 16 shards on
// the 3-master Cluster, through the front door (package delaystream):
//
//   - placement: every key of a shard is in one slot (the slot computed by
//     package wire is what CLUSTER KEYSLOT answers), shard i's slot is in
//     the i-th sixteenth of the slots, and the shards spread 5/6/5 over the
//     masters;
//   - schedule, cancel, reschedule and get find each message in the shard of
//     its id (caller-chosen and generated ids, landing in every shard);
//   - fan-out: three groups each get every message at least once, none before
//     its due time by the Redis clock (TIME, read in the handler);
//   - retries are per group (and per shard: a retry comes from the retry lane
//     of the message's shard); dead letters are per shard, listed merged with
//     ids "<ms>-<seq>@<shard>", and redriven to their group only;
//   - a consumer process killed with SIGKILL while holding entries of
//     several shards has them handled by another consumer once they were
//     idle for the visibility timeout, not before, and within a reclaim
//     interval of it;
//   - every shard's stream is trimmed once every group acknowledged;
//   - a group's Stats are the sum of its ShardStats.
func TestShardedClusterSuite(t *testing.T) {
	t.Parallel()
	heavy.RLock()
	defer heavy.RUnlock()
	ctx := t.Context()
	rdb := harness.Cluster(t)
	prefix := harness.Prefix(t, rdb)
	const (
		queue   = "suite"
		shards  = 16
		named   = 480 // caller-chosen ids, due in 1 to 2 s
		gen     = 120 // generated ids, due in 1 to 2 s
		stays   = 20  // due in an hour: still waiting at the end
		cancels = 20  // cancelled before they are due
		moved   = 10  // rescheduled from an hour to 1 to 1.5 s
		held    = 6   // entries the doomed consumer holds when killed
	)
	groups := []string{"g1", "g2", "g3"}

	var promoted atomic.Int64
	q, err := delaystream.New(rdb, queue, delaystream.WithPrefix(prefix), delaystream.WithShards(shards),
		delaystream.WithLogger(testLogger(t)), delaystream.WithDrainTimeout(time.Second),
		delaystream.WithMoverHooks(delaystream.MoverHooks{OnPromote: func(lane string, moved, _ int, _ time.Duration) {
			if strings.HasSuffix(lane, ":s") { // the queue stream, not a retry lane
				promoted.Add(int64(moved))
			}
		}}))
	require.NoError(t, err)
	layout, err := stream.NewLayout(prefix, queue, shards)
	require.NoError(t, err)
	// A producer of the same queue, for its per-shard figures.
	producer, err := delay.New(rdb, queue, delay.WithPrefix(prefix), delay.WithShards(shards))
	require.NoError(t, err)

	// Placement, before anything is written.
	byMaster := checkPlacement(ctx, t, rdb, layout, groups)
	t.Logf("shards per master: %v", byMaster)

	// Schedule across shards: caller ids and generated ids, due soon, and
	// some due in an hour (to cancel, to bring forward, to stay).
	var items []delaystream.Item
	for i := range named {
		w := delaystream.After(time.Second + rand.N(time.Second))
		if i%2 == 1 {
			w = delaystream.At(time.Now().Add(time.Second + rand.N(time.Second)))
		}
		items = append(items, delaystream.Item{Message: delaystream.Message{ID: fmt.Sprintf("m%03d", i), Payload: []byte("named")}, When: w})
	}
	for range gen {
		items = append(items, delaystream.Item{Message: delaystream.Message{Payload: []byte("generated")}, When: delaystream.After(time.Second + rand.N(time.Second))})
	}
	for i := range stays {
		items = append(items, delaystream.Item{Message: delaystream.Message{ID: fmt.Sprintf("stay-%02d", i), Payload: []byte("stays"),
			Headers: map[string]string{"n": fmt.Sprint(i)}}, When: delaystream.After(time.Hour)})
	}
	for i := range cancels {
		items = append(items, delaystream.Item{Message: delaystream.Message{ID: fmt.Sprintf("cancel-%02d", i)}, When: delaystream.After(time.Hour)})
	}
	for i := range moved {
		items = append(items, delaystream.Item{Message: delaystream.Message{ID: fmt.Sprintf("resched-%02d", i), Payload: []byte("moved")}, When: delaystream.After(time.Hour)})
	}
	res, err := q.ScheduleBatch(ctx, items)
	require.NoError(t, err)
	require.Len(t, res, len(items))
	want := map[string]time.Time{}    // id -> due, of the messages to deliver
	waiting := map[string]time.Time{} // id -> due, of those still waiting at the end
	var generated []string
	for i, r := range res {
		require.Equal(t, delaystream.OutcomeCreated, r.Outcome, r.ID)
		switch id := items[i].Message.ID; {
		case id == "":
			generated = append(generated, r.ID)
			want[r.ID] = r.Due
		case strings.HasPrefix(id, "m"):
			want[r.ID] = r.Due
		case strings.HasPrefix(id, "stay-"):
			waiting[r.ID] = r.Due
		}
	}
	require.Len(t, generated, gen)
	hit := map[int]int{}
	for id := range want {
		hit[layout.ShardOf(id)]++
	}
	require.Len(t, hit, shards, "the messages land in every shard: %v", hit)

	// Each message is in the shard of its id: caller ids in the shard's
	// envelopes and delayed set (and no other shard's), generated ids found
	// by Get, which calls that shard only.
	for i := range named {
		id := fmt.Sprintf("m%03d", i)
		sh := layout.ShardOf(id)
		l := layout.Shard(sh).Main()
		ok, err := rdb.HExists(ctx, l.Envelopes, id).Result()
		require.NoError(t, err)
		assert.True(t, ok, "%s in shard %d's envelopes", id, sh)
		score, err := rdb.ZScore(ctx, l.Delayed, id).Result()
		require.NoError(t, err)
		assert.EqualValues(t, want[id].UnixMilli(), score, "%s due in shard %d", id, sh)
		ok, err = rdb.HExists(ctx, layout.Shard((sh+1)%shards).Main().Envelopes, id).Result()
		require.NoError(t, err)
		assert.False(t, ok, "%s in another shard", id)
	}
	for _, id := range generated {
		env, err := q.Get(ctx, id)
		require.NoError(t, err, id)
		assert.Equal(t, "generated", string(env.Payload))
		assert.True(t, want[id].Equal(env.Due), id)
	}

	// Per-shard and total waiting counts before anything is due.
	perShard := make([]int64, shards)
	for _, r := range res {
		perShard[layout.ShardOf(r.ID)]++
	}
	pst, err := producer.ShardStats(ctx)
	require.NoError(t, err)
	require.Len(t, pst, shards)
	for i, s := range pst {
		assert.Equal(t, perShard[i], s.Waiting, "shard %d waiting", i)
	}
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, len(items), st.Waiting)

	// Cancel, reschedule and get by id, each in its own shard.
	for i := range cancels {
		id := fmt.Sprintf("cancel-%02d", i)
		ok, err := q.Cancel(ctx, id)
		require.NoError(t, err)
		assert.True(t, ok, "%s cancelled", id)
		ok, err = q.Cancel(ctx, id)
		require.NoError(t, err)
		assert.False(t, ok, "%s cancelled twice", id)
		_, err = q.Get(ctx, id)
		assert.ErrorIs(t, err, delay.ErrNotFound, id)
	}
	for i := range moved {
		id := fmt.Sprintf("resched-%02d", i)
		due, err := q.Reschedule(ctx, id, delaystream.After(time.Second+rand.N(500*time.Millisecond)))
		require.NoError(t, err)
		want[id] = due
		env, err := q.Get(ctx, id)
		require.NoError(t, err)
		assert.True(t, due.Equal(env.Due), "%s: get says due %v, reschedule %v", id, env.Due, due)
	}
	for i := range stays {
		id := fmt.Sprintf("stay-%02d", i)
		env, err := q.Get(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, "stays", string(env.Payload))
		assert.Equal(t, map[string]string{"n": fmt.Sprint(i)}, env.Headers)
	}

	// Who fails what: group g2 fails the first attempt of every 8th
	// message; group g3 dead-letters every 40th until it is redriven.
	failG2, poison := map[string]bool{}, map[string]bool{}
	k := 0
	for _, id := range sortedIDs(want) {
		if k%8 == 0 {
			failG2[id] = true
		}
		if k%40 == 5 {
			poison[id] = true
		}
		k++
	}
	var redriven atomic.Bool
	rec := newShardRecorder(rdb)
	// The groups' consumers are built from package group, as the Queue
	// builds them, to see the stream each delivery came from; they run
	// beside the Queue's promotion.
	opts := []group.Option{group.WithPrefix(prefix), group.WithShards(shards), group.WithoutPromotion(), group.WithLogger(testLogger(t)),
		group.WithDrainTimeout(time.Second), group.WithTrimInterval(200 * time.Millisecond), group.WithBackoff(group.ConstantBackoff(100 * time.Millisecond))}
	cons := map[string]*group.Consumer{}
	newConsumer := func(g string, h group.Handler, opts ...group.Option) (*group.Consumer, error) {
		return group.New(rdb, queue, g, h, opts...)
	}
	cons["g1"], err = newConsumer("g1", rec.handler(t, "g1", nil), append(opts, group.WithConsumerName("survivor"))...)
	require.NoError(t, err)
	cons["g2"], err = newConsumer("g2", rec.handler(t, "g2", func(m *group.Message) error {
		if failG2[m.ID] && m.Attempt == 1 {
			return errors.New("g2 fails the first attempt")
		}
		return nil
	}), opts...)
	require.NoError(t, err)
	cons["g3"], err = newConsumer("g3", rec.handler(t, "g3", func(m *group.Message) error {
		if poison[m.ID] && !redriven.Load() {
			return group.DeadLetter(errors.New("g3 cannot handle it"))
		}
		return nil
	}), opts...)
	require.NoError(t, err)

	// A consumer of g1 in another process takes entries and never
	// finishes them; then the front door runs the mover and the groups.
	doomed := startProc(t, "doomed", childSpec{Role: "consumer", Addrs: rdb.Options().Addrs, Prefix: prefix, Queue: queue,
		Shards: shards, Group: "g1", Name: "doomed", Workers: held})
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	for _, c := range cons {
		require.NoError(t, c.CreateGroup(ctx))
	}
	done := make(chan error, 1)
	go func() {
		var run errgroup.Group
		run.Go(func() error { return q.Run(runCtx) })
		for _, c := range cons {
			run.Go(func() error { return c.Run(runCtx) })
		}
		done <- run.Wait()
	}()

	// Kill it with SIGKILL once it holds its entries; the survivor of g1
	// must handle each once it was idle for the visibility timeout, within
	// a reclaim interval.
	type entry struct{ stream, id string }
	heldBy := map[entry]string{}
	deadline := time.After(15 * time.Second)
	for len(heldBy) < held {
		select {
		case l, ok := <-doomed.lines:
			require.True(t, ok, "the doomed consumer exited: %s", doomed.stderr.String())
			f := strings.Fields(l.text)
			if len(f) == 4 && f[0] == lineHeld {
				heldBy[entry{f[2], f[3]}] = f[1]
			}
		case <-deadline:
			require.FailNow(t, "the doomed consumer did not get its entries", "held %d of %d", len(heldBy), held)
		}
	}
	killed := time.Now()
	doomed.kill()
	// When each held entry was last delivered or extended: its idle time
	// as Redis counts it, before the call was sent (a lower bound of the
	// moment, to the millisecond).
	pending := map[entry]time.Time{}
	for i := range shards {
		s := layout.Shard(i).Main().Stream
		sent := time.Now()
		p, err := rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: s, Group: "g1", Start: "-", End: "+", Count: 100, Consumer: "doomed"}).Result()
		require.NoError(t, err)
		for _, x := range p {
			pending[entry{s, x.ID}] = sent.Add(-x.Idle - time.Millisecond)
		}
	}
	heldShards := map[string]bool{}
	for e := range heldBy {
		assert.Contains(t, pending, e, "held entry %v pending for the doomed consumer", e)
		heldShards[e.stream] = true
	}
	assert.Len(t, pending, held, "the doomed consumer reads no more than its workers take")
	require.Eventually(t, func() bool {
		for e := range pending {
			if _, ok := rec.byEntry("g1", e.stream, e.id); !ok {
				return false
			}
		}
		return true
	}, 15*time.Second, 5*time.Millisecond, "the killed consumer's entries handled by the survivor")
	var reclaim, late time.Duration // from the kill; from when each became reclaimable
	for e, touched := range pending {
		d, _ := rec.byEntry("g1", e.stream, e.id)
		assert.GreaterOrEqual(t, d.deliveries, int64(2), "%v reclaimed", e)
		reclaimable := touched.Add(group.DefaultVisibility)
		// Causal: XAUTOCLAIM takes only entries idle for the visibility timeout.
		assert.False(t, d.at.Before(reclaimable), "%v handled elsewhere %s before it was idle for the visibility timeout",
			e, reclaimable.Sub(d.at))
		reclaim, late = max(reclaim, d.at.Sub(killed)), max(late, d.at.Sub(reclaimable))
	}
	t.Logf("kill -9 of a consumer holding %d entries of %d shards: the last handled by the survivor %s later, %s after it became reclaimable",
		len(pending), len(heldShards), reclaim.Round(time.Millisecond), late.Round(time.Millisecond))
	// The survivor's reclaim pass runs every reclaim interval; the rest
	// (a read, the handler, two loaded cores) is slack.
	margin.LessOrEqual(t, "reclaimed after reclaimable", late, group.DefaultReclaimEvery+time.Second,
		"a killed consumer's entries handled elsewhere within a reclaim interval of becoming reclaimable")

	// Every group gets every message: g2 twice for its failures, g3 all
	// but the poison, which it dead-letters.
	dl := cons["g3"].DeadLetters()
	require.Eventually(t, func() bool {
		for id := range want {
			for _, g := range groups {
				ds := rec.get(g, id)
				switch {
				case len(ds) == 0:
					return false
				case g == "g2" && failG2[id] && !slices.ContainsFunc(ds, func(d shardDelivery) bool { return d.attempt == 2 }):
					return false
				}
			}
		}
		n, err := dl.Len(ctx)
		return err == nil && n == int64(len(poison))
	}, 20*time.Second, 10*time.Millisecond, "every message delivered to every group")

	// Never early (handler's Redis TIME and the entry's append time, both
	// Redis clock, against the due time); retries only in g2, from the
	// retry lane of the message's own shard; nothing else delivered.
	for _, g := range groups {
		for id, ds := range rec.snapshot(g) {
			due, ok := want[id]
			if !assert.True(t, ok, "%s got %q, which was not to be delivered", g, id) {
				continue
			}
			sh := layout.Shard(layout.ShardOf(id))
			for _, d := range ds {
				assert.True(t, due.Equal(d.due) || d.attempt > 1, "%s %s: due %v, scheduled %v", g, id, d.due, due)
				assert.False(t, d.ran.Before(d.due), "%s %s handled %s before its due time (Redis TIME)", g, id, d.due.Sub(d.ran))
				assert.False(t, d.ran.Before(due), "%s %s handled before it was first due", g, id)
				assert.False(t, stream.EntryTime(d.entryID).Before(d.due), "%s %s appended early", g, id)
				switch {
				case d.attempt == 1:
					assert.Equal(t, sh.Main().Stream, d.stream, "%s %s first attempt from its shard's stream", g, id)
				case g == "g2" && failG2[id] && d.attempt == 2:
					assert.Equal(t, sh.Retry(g).Stream, d.stream, "%s %s retried from its shard's retry lane", g, id)
				default:
					assert.Fail(t, "unexpected retry", "%s %s attempt %d from %s", g, id, d.attempt, d.stream)
				}
			}
		}
	}
	assert.EqualValues(t, len(failG2), cons["g2"].Counters().Retried, "g2 retries")
	assert.Zero(t, cons["g1"].Counters().Retried+cons["g3"].Counters().Retried, "no retry outside g2")

	// Dead letters: g3's, per shard, listed merged with qualified ids.
	var dead []group.DeadEntry
	after := ""
	for {
		page, err := dl.List(ctx, after, 5)
		require.NoError(t, err)
		if len(page) == 0 {
			break
		}
		dead = append(dead, page...)
		after = page[len(page)-1].EntryID
	}
	require.Len(t, dead, len(poison))
	deadShards := map[int]bool{}
	var ids []string
	for i, e := range dead {
		assert.True(t, poison[e.Envelope.ID], "dead letter %s", e.Envelope.ID)
		assert.Equal(t, layout.ShardOf(e.Envelope.ID), e.Shard, "%s dead-lettered in its shard", e.Envelope.ID)
		assert.Equal(t, fmt.Sprintf("%s@%d", strings.Split(e.EntryID, "@")[0], e.Shard), e.EntryID, "qualified id")
		assert.Equal(t, group.ReasonHandler, e.Reason)
		if i > 0 {
			assert.False(t, e.At().Before(dead[i-1].At()), "merged in entry order")
		}
		got, err := dl.Get(ctx, e.EntryID)
		require.NoError(t, err)
		assert.Equal(t, e.Envelope.ID, got.Envelope.ID)
		deadShards[e.Shard] = true
		ids = append(ids, e.EntryID)
	}
	assert.Greater(t, len(deadShards), 1, "dead letters in several shards")
	_, err = dl.Get(ctx, strings.Split(ids[0], "@")[0])
	assert.ErrorIs(t, err, group.ErrInvalidOption, "an unqualified id on a sharded queue")
	for _, g := range []string{"g1", "g2"} {
		n, err := cons[g].DeadLetters().Len(ctx)
		require.NoError(t, err)
		assert.Zero(t, n, "%s has no dead letters", g)
	}

	// Redrive: back to g3 only, from each message's shard's retry lane.
	before := map[string]int{}
	for id := range poison {
		before[id] = len(rec.get("g1", id)) + len(rec.get("g2", id))
	}
	redriven.Store(true)
	n, err := dl.Redrive(ctx, 0, ids...)
	require.NoError(t, err)
	require.Equal(t, len(poison), n)
	require.Eventually(t, func() bool {
		for id := range poison {
			if len(rec.get("g3", id)) < 2 {
				return false
			}
		}
		n, err := dl.Len(ctx)
		return err == nil && n == 0
	}, 10*time.Second, 10*time.Millisecond, "redriven messages delivered to g3 again")
	for id := range poison {
		ds := rec.get("g3", id)
		last := ds[len(ds)-1]
		assert.Equal(t, 1, last.attempt, "%s redriven with attempt 1", id)
		assert.Equal(t, layout.Shard(layout.ShardOf(id)).Retry("g3").Stream, last.stream, "%s redriven into its shard's retry lane of g3", id)
		assert.Equal(t, before[id], len(rec.get("g1", id))+len(rec.get("g2", id)), "%s: g1 and g2 never see g3's redrive", id)
	}

	// Trimming: once every group acknowledged, every shard's stream and
	// retry lanes shrink to nothing.
	var left int64
	require.Eventually(t, func() bool {
		left = 0
		for i := range shards {
			k := layout.Shard(i)
			for _, s := range []string{k.Main().Stream, k.Retry("g2").Stream, k.Retry("g3").Stream} {
				n, err := rdb.XLen(ctx, s).Result()
				if err != nil {
					return false
				}
				left += n
			}
		}
		return left == 0
	}, 10*time.Second, 20*time.Millisecond, "streams trimmed after every group acknowledged")

	// Stats: a group's figures are the sum of its shards'; what waits is
	// the 20 messages due in an hour.
	nextDue := time.Time{}
	waitShard := make([]int64, shards)
	for id, due := range waiting {
		if nextDue.IsZero() || due.Before(nextDue) {
			nextDue = due
		}
		waitShard[layout.ShardOf(id)]++
	}
	for _, g := range groups {
		st, err := cons[g].Stats(ctx)
		require.NoError(t, err)
		per, err := cons[g].ShardStats(ctx)
		require.NoError(t, err)
		require.Len(t, per, shards)
		assert.Equal(t, st, sumStats(g, per), "%s: Stats is the sum of ShardStats", g)
		assert.EqualValues(t, stays, st.Queue.Waiting, "%s: waiting", g)
		assert.Zero(t, st.Queue.Overdue, g)
		assert.True(t, nextDue.Equal(st.Queue.NextDue), "%s: next due %v, want %v", g, st.Queue.NextDue, nextDue)
		assert.Zero(t, st.Queue.StreamLength, "%s: stream length after trimming", g)
		assert.Zero(t, st.Pending, g)
		assert.Zero(t, st.Lag, g)
		assert.Zero(t, st.RetryWaiting, g)
		assert.Zero(t, st.DeadLetters, g)
		assert.Positive(t, st.Consumers, g)
		for i, p := range per {
			assert.Equal(t, waitShard[i], p.Queue.Waiting, "%s shard %d waiting", g, i)
		}
		t.Logf("%s: stats %+v; counters %+v", g, st, cons[g].Counters())
	}
	qs, err := q.Stats(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, stays, qs.Waiting)

	stop()
	select {
	case err := <-done:
		require.NoError(t, err, "Run")
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return within 15s of cancel")
	}
	t.Logf("promoted %d; %d messages to 3 groups over %d shards", promoted.Load(), len(want), shards)
	assert.EqualValues(t, len(want), promoted.Load())
}

// TestShardedLayoutSpreadsEvenly checks, on the Cluster's own slot map,
// that stream.NewLayout spreads a queue's shards over the masters as
// evenly as the count allows (each of M masters holds floor(S/M) or
// ceil(S/M) of S shards), as stream's shardTag documents, for many queue
// names: the spread must not depend on the queue's name.
//
// It fails today for about 2 % of names (e.g. "q3" with 16 shards: 6/4/6
// over 3 masters; "q66" with 2 shards: both on one master): shardTag takes
// any slot in the middle half of shard i's range, and a range that
// straddles a master boundary (shards 5 and 10 of 16 on 3 masters) then
// lands on either side, depending on the name.
func TestShardedLayoutSpreadsEvenly(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	rdb := harness.Cluster(t)
	owner, masters := slotOwners(ctx, t, rdb)
	var bad []string
	checked := 0
	for _, n := range []int{2, 4, 8, 16, 32} {
		lo, hi := n/len(masters), (n+len(masters)-1)/len(masters)
		for i := range 200 {
			name := fmt.Sprintf("q%d", i)
			layout, err := stream.NewLayout("ds", name, n)
			require.NoError(t, err)
			count := map[string]int{}
			for s := range n {
				count[owner[wire.Slot(layout.Shard(s).Main().Stream)]]++
			}
			counts := make([]int, len(masters))
			uneven := false
			for m, addr := range masters {
				counts[m] = count[addr]
				uneven = uneven || counts[m] < lo || counts[m] > hi
			}
			if uneven {
				bad = append(bad, fmt.Sprintf("%s/%d shards: %v", name, n, counts))
			}
			checked++
		}
	}
	t.Logf("%d of %d layouts uneven over %d masters", len(bad), checked, len(masters))
	assert.Empty(t, bad, "layouts whose shards are not spread as evenly as the count allows (shards per master, in slot order)")
}

// slotOwners returns the address of the master of every slot and the
// masters in slot order.
func slotOwners(ctx context.Context, t *testing.T, rdb *redis.ClusterClient) ([]string, []string) {
	t.Helper()
	//lint:ignore SA1019 CLUSTER SLOTS lists each range with its master first, all this needs (Redis 7.0 has both)
	slots, err := rdb.ClusterSlots(ctx).Result()
	require.NoError(t, err)
	slices.SortFunc(slots, func(a, b redis.ClusterSlot) int { return a.Start - b.Start })
	owner := make([]string, wire.Slots)
	var masters []string
	for _, s := range slots {
		require.NotEmpty(t, s.Nodes)
		addr := s.Nodes[0].Addr
		if !slices.Contains(masters, addr) {
			masters = append(masters, addr)
		}
		for i := s.Start; i <= s.End; i++ {
			owner[i] = addr
		}
	}
	for i, a := range owner {
		require.NotEmpty(t, a, "slot %d has no master", i)
	}
	return owner, masters
}

// checkPlacement checks where a sharded queue's keys live on the Cluster
// and returns the shards of each master: every key of shard i (its main
// lane, and each group's retry lane and dead letters) hashes to one slot,
// which package wire computes as CLUSTER KEYSLOT does and which lies in the
// i-th of the n equal slot ranges; the queue-wide keys share the queue's
// own tag; the shards spread over every master, floor(n/M) or ceil(n/M)
// each.
func checkPlacement(ctx context.Context, t *testing.T, rdb *redis.ClusterClient, layout *stream.Layout, groups []string) map[string][]int {
	t.Helper()
	n := layout.Shards()
	_, masters := slotOwners(ctx, t, rdb)
	keyslot := func(key string) int {
		got, err := rdb.ClusterKeySlot(ctx, key).Result()
		require.NoError(t, err)
		assert.EqualValues(t, wire.Slot(key), got, "CLUSTER KEYSLOT %s", key)
		return int(got)
	}
	home := keyslot(layout.Meta())
	assert.Equal(t, home, keyslot(layout.Movers()), "queue-wide keys share a slot")
	byMaster := map[string][]int{}
	slots := map[int]int{}
	for i := range n {
		k := layout.Shard(i)
		keys := []string{k.Main().Stream, k.Main().Delayed, k.Main().Envelopes, k.Main().Quarantine, k.Main().Lease}
		for _, g := range groups {
			r := k.Retry(g)
			keys = append(keys, r.Stream, r.Delayed, r.Envelopes, r.Quarantine, r.Lease, k.DeadLetters(g))
		}
		slot := keyslot(keys[0])
		for _, key := range keys[1:] {
			assert.Equal(t, slot, keyslot(key), "shard %d: %s in the shard's slot", i, key)
		}
		assert.True(t, slot >= i*wire.Slots/n && slot < (i+1)*wire.Slots/n, "shard %d in slot %d, outside its range", i, slot)
		if j, dup := slots[slot]; dup {
			assert.Fail(t, "shards share a slot", "shards %d and %d in slot %d", j, i, slot)
		}
		slots[slot] = i
		node, err := rdb.MasterForKey(ctx, keys[0])
		require.NoError(t, err)
		addr := node.Options().Addr
		require.Contains(t, masters, addr)
		byMaster[addr] = append(byMaster[addr], i)
		exists, err := node.Exists(ctx, keys[0]).Result() // the key is served by that master (MOVED would fail)
		require.NoError(t, err)
		assert.Zero(t, exists, "nothing written yet")
	}
	assert.Len(t, byMaster, len(masters), "every master holds shards")
	for addr, sh := range byMaster {
		assert.True(t, len(sh) == n/len(masters) || len(sh) == (n+len(masters)-1)/len(masters),
			"master %s holds %d of %d shards: %v", addr, len(sh), n, sh)
	}
	return byMaster
}

// sumStats adds up shard figures as group.Consumer.Stats documents:
// counts summed, the oldest pending age the largest, the next due time the
// earliest, Consumers the most any shard knows, Lag -1 if any is unknown.
func sumStats(g string, per []group.Stats) group.Stats {
	st := group.Stats{Group: g}
	for _, p := range per {
		st.Consumers = max(st.Consumers, p.Consumers)
		st.Pending += p.Pending
		st.OldestPending = max(st.OldestPending, p.OldestPending)
		if st.Lag >= 0 && p.Lag >= 0 {
			st.Lag += p.Lag
		} else {
			st.Lag = -1
		}
		st.RetryWaiting += p.RetryWaiting
		st.DeadLetters += p.DeadLetters
		st.Queue.Waiting += p.Queue.Waiting
		st.Queue.Overdue += p.Queue.Overdue
		st.Queue.StreamLength += p.Queue.StreamLength
		if !p.Queue.NextDue.IsZero() && (st.Queue.NextDue.IsZero() || p.Queue.NextDue.Before(st.Queue.NextDue)) {
			st.Queue.NextDue = p.Queue.NextDue
		}
	}
	return st
}

func sortedIDs(m map[string]time.Time) []string {
	out := make([]string, 0, len(m))
	for id := range m {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// shardRecorder keeps every delivery the groups' handlers saw, with the
// Redis clock when the handler ran.
type shardRecorder struct {
	rdb redis.UniversalClient
	mu  sync.Mutex
	by  map[string]map[string][]shardDelivery // group -> message id -> deliveries
	ent map[string]shardDelivery              // group + stream + entry id -> first delivery
}

type shardDelivery struct {
	attempt    int
	deliveries int64
	due        time.Time // group.Message.Due
	ran        time.Time // Redis TIME when the handler ran
	at         time.Time // local clock, for durations measured by the test
	stream     string
	entryID    string
}

func newShardRecorder(rdb redis.UniversalClient) *shardRecorder {
	return &shardRecorder{rdb: rdb, by: map[string]map[string][]shardDelivery{}, ent: map[string]shardDelivery{}}
}

// handler records each delivery to g, then returns decide's verdict (nil:
// success).
func (r *shardRecorder) handler(t *testing.T, g string, decide func(*group.Message) error) group.Handler {
	return func(ctx context.Context, m *group.Message) error {
		at := time.Now()
		now, err := r.rdb.Time(ctx).Result()
		if err != nil {
			t.Errorf("%s %s: redis TIME: %v", g, m.ID, err)
		}
		d := shardDelivery{attempt: m.Attempt, deliveries: m.Deliveries, due: m.Due, ran: now, at: at, stream: m.Stream, entryID: m.EntryID}
		r.mu.Lock()
		if r.by[g] == nil {
			r.by[g] = map[string][]shardDelivery{}
		}
		r.by[g][m.ID] = append(r.by[g][m.ID], d)
		if k := g + " " + m.Stream + " " + m.EntryID; !hasKey(r.ent, k) {
			r.ent[k] = d
		}
		r.mu.Unlock()
		if decide == nil {
			return nil
		}
		return decide(m)
	}
}

func hasKey[V any](m map[string]V, k string) bool { _, ok := m[k]; return ok }

func (r *shardRecorder) get(g, id string) []shardDelivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.by[g][id])
}

func (r *shardRecorder) byEntry(g, streamKey, entryID string) (shardDelivery, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d, ok := r.ent[g+" "+streamKey+" "+entryID]
	return d, ok
}

func (r *shardRecorder) snapshot(g string) map[string][]shardDelivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string][]shardDelivery, len(r.by[g]))
	for id, ds := range r.by[g] {
		out[id] = slices.Clone(ds)
	}
	return out
}
