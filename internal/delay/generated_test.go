package delay_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/internal/delay"
)

// A message scheduled without an id is stored as one packed delayed-set
// member (no envelope hash entry), and found by its generated id.
func TestGeneratedIDLookups(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		q := b.queue(t)
		lane := q.Keys().Main()
		var gen []delay.Result
		for i := range 3 {
			r, err := q.Schedule(ctx, delay.Message{Payload: fmt.Appendf(nil, "p%d", i)}, delay.After(time.Hour))
			require.NoError(t, err)
			require.Equal(t, delay.Created, r.Outcome)
			gen = append(gen, r)
		}
		hlen, err := b.rdb.HLen(ctx, lane.Envelopes).Result()
		require.NoError(t, err)
		assert.Zero(t, hlen, "packed members need no envelope hash entry")
		for i, r := range gen {
			env, err := q.Get(ctx, r.ID)
			require.NoError(t, err, r.ID)
			assert.Equal(t, fmt.Sprintf("p%d", i), string(env.Payload))
			assert.Equal(t, r.ID, env.ID)
			assert.True(t, r.Due.Equal(env.Due), "due %v, want %v", env.Due, r.Due)
		}

		// Rescheduled, the message becomes a plain member: its id no
		// longer tells its due time.
		later := time.Now().Add(2 * time.Hour).Truncate(time.Millisecond)
		due, err := q.Reschedule(ctx, gen[0].ID, delay.At(later))
		require.NoError(t, err)
		assert.True(t, later.Equal(due))
		env, err := q.Get(ctx, gen[0].ID)
		require.NoError(t, err)
		assert.Equal(t, "p0", string(env.Payload))
		assert.True(t, later.Equal(env.Due))
		plain, err := b.rdb.HExists(ctx, lane.Envelopes, gen[0].ID).Result()
		require.NoError(t, err)
		assert.True(t, plain)
		n, err := q.Len(ctx)
		require.NoError(t, err)
		assert.Equal(t, int64(3), n)

		ok, err := q.Cancel(ctx, gen[1].ID)
		require.NoError(t, err)
		assert.True(t, ok)
		ok, err = q.Cancel(ctx, gen[1].ID)
		require.NoError(t, err)
		assert.False(t, ok, "cancelled twice")
		_, err = q.Get(ctx, gen[1].ID)
		assert.ErrorIs(t, err, delay.ErrNotFound)
		_, err = q.Reschedule(ctx, gen[1].ID, delay.After(time.Minute))
		assert.ErrorIs(t, err, delay.ErrNotFound)

		// Ids in the layout of generated ones that are not waiting.
		for _, id := range []string{delay.NewID(), gen[2].ID[:25] + flip(gen[2].ID[25]), "7ZZZZZZZZZZZZZZZZZZZZZZZZZ"} {
			_, err = q.Get(ctx, id)
			assert.ErrorIs(t, err, delay.ErrNotFound, id)
			ok, err = q.Cancel(ctx, id)
			require.NoError(t, err)
			assert.False(t, ok, id)
		}

		for _, id := range []string{gen[0].ID, gen[2].ID} {
			ok, err = q.Cancel(ctx, id)
			require.NoError(t, err)
			assert.True(t, ok, id)
		}
		assert.Equal(t, []string{q.Layout().Meta()}, b.keys(t), "nothing left behind but the queue's record")
	})
}

// flip returns another character of the generated ids' alphabet.
func flip(c byte) string {
	if c == '0' {
		return "1"
	}
	return "0"
}

// Generated ids that share one due time are told apart by a binary search
// among the members of that score, plain members included.
func TestGeneratedIDsShareADueTime(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		q := b.queue(t)
		at := delay.At(time.Now().Add(time.Hour).Truncate(time.Millisecond))
		count := 1000
		if b.mr != nil {
			count = 200 // miniredis compiles each script call: slower
		}
		var items []delay.Item
		for i := range count {
			items = append(items, delay.Item{Message: delay.Message{Payload: fmt.Appendf(nil, "g%d", i)}, When: at})
			if i%5 == 0 { // plain members of the same score, some in the generated layout
				items = append(items, delay.Item{Message: delay.Message{ID: fmt.Sprintf("p-%d", i), Payload: []byte("plain")}, When: at})
				items = append(items, delay.Item{Message: delay.Message{ID: delay.NewID(), Payload: []byte("plain")}, When: at})
			}
		}
		res, err := q.ScheduleBatch(ctx, items)
		require.NoError(t, err)
		var gen []int // indexes of generated ids in items and res
		for i, r := range res {
			require.Equal(t, delay.Created, r.Outcome, "item %d", i)
			if items[i].Message.ID == "" {
				gen = append(gen, i)
				require.Equal(t, res[gen[0]].ID[:10], r.ID[:10], "one due time, one time part")
			}
		}
		require.Len(t, gen, count)
		rand.Shuffle(len(gen), func(i, j int) { gen[i], gen[j] = gen[j], gen[i] })
		for k, i := range gen {
			if k%2 == 0 {
				ok, err := q.Cancel(ctx, res[i].ID)
				require.NoError(t, err)
				require.True(t, ok, res[i].ID)
			}
		}
		for k, i := range gen {
			env, err := q.Get(ctx, res[i].ID)
			if k%2 == 0 {
				require.ErrorIs(t, err, delay.ErrNotFound, res[i].ID)
				continue
			}
			require.NoError(t, err, res[i].ID)
			assert.Equal(t, items[i].Message.Payload, env.Payload)
		}
		// Random parts below and above every waiting one.
		for _, rnd := range []string{"0000000000000000", "ZZZZZZZZZZZZZZZZ"} {
			_, err := q.Get(ctx, res[gen[0]].ID[:10]+rnd)
			assert.ErrorIs(t, err, delay.ErrNotFound)
		}
		for i, it := range items {
			if it.Message.ID != "" {
				env, err := q.Get(ctx, it.Message.ID)
				require.NoError(t, err, "item %d", i)
				assert.Equal(t, "plain", string(env.Payload))
			}
		}
		n, err := q.Len(ctx)
		require.NoError(t, err)
		assert.Equal(t, int64(len(items)-count/2), n)
	})
}

// A caller-chosen id that equals a waiting generated id is a duplicate of
// it, under every policy.
func TestScheduleTheIDOfAGeneratedMessage(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		q := b.queue(t)
		t1 := time.Now().Add(time.Hour).Truncate(time.Millisecond)
		t2 := t1.Add(time.Hour)
		gen, err := q.Schedule(ctx, delay.Message{Payload: []byte("first")}, delay.At(t1))
		require.NoError(t, err)

		r, err := q.Schedule(ctx, delay.Message{ID: gen.ID, Payload: []byte("kept")}, delay.At(t2))
		require.NoError(t, err)
		assert.Equal(t, delay.Kept, r.Outcome)
		assert.True(t, t1.Equal(r.Due))
		_, err = q.Schedule(ctx, delay.Message{ID: gen.ID, Payload: []byte("rejected"), OnDuplicate: delay.Reject}, delay.At(t2))
		assert.ErrorIs(t, err, delay.ErrDuplicate)

		res, err := q.ScheduleBatch(ctx, []delay.Item{
			{Message: delay.Message{ID: gen.ID, Payload: []byte("replaced"), OnDuplicate: delay.Replace}, When: delay.At(t2)},
			{Message: delay.Message{ID: gen.ID, Payload: []byte("kept again")}, When: delay.At(t1)}, // sees the first item
		})
		require.NoError(t, err)
		assert.Equal(t, delay.Replaced, res[0].Outcome)
		assert.Equal(t, delay.Kept, res[1].Outcome)
		assert.True(t, t2.Equal(res[1].Due))
		env, err := q.Get(ctx, gen.ID)
		require.NoError(t, err)
		assert.Equal(t, "replaced", string(env.Payload))
		assert.True(t, t2.Equal(env.Due))
		members, err := b.rdb.ZRange(ctx, q.Keys().Main().Delayed, 0, -1).Result()
		require.NoError(t, err)
		assert.Equal(t, []string{gen.ID}, members, "the packed member is replaced by a plain one")
	})
}

// A generated id is known once Redis has answered: a result that stays
// Unknown has no id, while a caller-chosen id is reported as given.
func TestUnknownResultHasNoGeneratedID(t *testing.T) {
	t.Parallel()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	q, err := delay.New(rdb, "q")
	require.NoError(t, err)
	mr.Close()
	res, err := q.ScheduleBatch(context.Background(), []delay.Item{
		{Message: delay.Message{Payload: []byte("a")}, When: delay.After(time.Minute)},
		{Message: delay.Message{ID: "given", Payload: []byte("b")}, When: delay.After(time.Minute)},
	})
	require.Error(t, err)
	require.Len(t, res, 2)
	assert.Equal(t, delay.Result{}, res[0])
	assert.Equal(t, delay.Result{ID: "given"}, res[1])
}
