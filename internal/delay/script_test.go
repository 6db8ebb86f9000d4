package delay_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/server"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/internal/delay"
	"github.com/delaystream/delaystream/internal/redistest"
)

// countedBackend is a Redis of its own whose command counts (including the
// commands run inside scripts) a test can read exactly.
type countedBackend struct {
	rdb   *redis.Client
	reset func(t *testing.T)
	calls func(t *testing.T) map[string]int // lower-case command -> calls since reset
}

// countedMiniredis returns a miniredis that counts every command it runs;
// withoutZMSCORE makes it answer ZMSCORE like a server that lacks it.
func countedMiniredis(t *testing.T, withoutZMSCORE bool) countedBackend {
	t.Helper()
	mr := miniredis.RunT(t)
	var mu sync.Mutex
	counts := map[string]int{}
	mr.Server().SetPreHook(func(c *server.Peer, cmd string, args ...string) bool {
		if withoutZMSCORE && cmd == "ZMSCORE" {
			c.WriteError("ERR unknown command `zmscore`, with args beginning with: ")
			return true
		}
		mu.Lock()
		counts[strings.ToLower(cmd)]++
		mu.Unlock()
		return false
	})
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	return countedBackend{
		rdb: rdb,
		reset: func(*testing.T) {
			mu.Lock()
			clear(counts)
			mu.Unlock()
		},
		calls: func(*testing.T) map[string]int {
			mu.Lock()
			defer mu.Unlock()
			out := map[string]int{}
			for k, v := range counts {
				out[k] = v
			}
			return out
		},
	}
}

// countedRedis returns a redis-server of its own (INFO commandstats counts
// the commands scripts run); extra are its command-line arguments.
func countedRedis(t *testing.T, extra ...string) countedBackend {
	t.Helper()
	s, err := redistest.Spawn(extra...)
	require.NoError(t, err)
	t.Cleanup(s.Stop)
	rdb := redis.NewClient(redistest.Options(t, s.Addr))
	t.Cleanup(func() { _ = rdb.Close() })
	return countedBackend{
		rdb: rdb,
		reset: func(t *testing.T) {
			require.NoError(t, rdb.ConfigResetStat(context.Background()).Err())
		},
		calls: func(t *testing.T) map[string]int {
			info, err := rdb.Info(context.Background(), "commandstats").Result()
			require.NoError(t, err)
			out := map[string]int{}
			for _, line := range strings.Split(info, "\r\n") {
				// cmdstat_zadd:calls=1,usec=5,...
				name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":calls=")
				if !ok || !strings.HasPrefix(line, "cmdstat_") {
					continue
				}
				n, err := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
				require.NoError(t, err)
				out[name] = n
			}
			return out
		},
	}
}

// The schedule script reads the stored due times of a whole chunk with one
// ZMSCORE; on a server without ZMSCORE (Redis < 6.2) it falls back to one
// ZSCORE per id. Both paths must give the same outcomes, and on Redis 7 and
// miniredis the fast one must be taken.
func TestScheduleScriptLookupPaths(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		backend  func(t *testing.T) countedBackend
		fallback bool // ZMSCORE is missing
	}{
		{"miniredis", func(t *testing.T) countedBackend { return countedMiniredis(t, false) }, false},
		{"miniredis without ZMSCORE", func(t *testing.T) countedBackend { return countedMiniredis(t, true) }, true},
		{"redis", func(t *testing.T) countedBackend { return countedRedis(t) }, false},
		{"redis without ZMSCORE", func(t *testing.T) countedBackend { return countedRedis(t, "--rename-command", "ZMSCORE", "") }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b := tt.backend(t)
			if tt.fallback {
				require.Error(t, b.rdb.ZMScore(ctx, "any", "x").Err(), "the server must lack ZMSCORE")
			}
			q, err := delay.New(b.rdb, "q", delay.WithPrefix(redistest.Prefix(t)))
			require.NoError(t, err)
			lane := q.Keys().Main()
			base := time.Now().Add(time.Hour).Truncate(time.Millisecond)
			at := func(m int) delay.When { return delay.At(base.Add(time.Duration(m) * time.Minute)) }
			due := func(m int) time.Time { return base.Add(time.Duration(m) * time.Minute) }
			hour := delay.After(time.Hour)

			// Waiting before the batch: three messages and an orphan (an id
			// in the delayed set whose envelope is gone).
			for i, id := range []string{"old-k", "old-r", "old-e"} {
				_, err := q.Schedule(ctx, delay.Message{ID: id, Payload: []byte("old")}, at(i+1))
				require.NoError(t, err)
			}
			require.NoError(t, b.rdb.ZAdd(ctx, lane.Delayed, redis.Z{Member: "orph", Score: float64(due(4).UnixMilli())}).Err())

			msg := func(id, payload string, p delay.Policy) delay.Message {
				return delay.Message{ID: id, Payload: []byte(payload), OnDuplicate: p}
			}
			items := []delay.Item{
				{Message: msg("old-k", "0", delay.QueueDefault), When: at(10)}, // queue default: keep
				{Message: msg("old-r", "1", delay.Replace), When: at(11)},
				{Message: msg("old-e", "2", delay.Reject), When: at(12)},
				{Message: msg("orph", "3", delay.Reject), When: at(13)}, // an orphan is overwritten
				{Message: msg("orph", "4", delay.Keep), When: at(14)},   // sees item 3
				// Items 5 to 9: one When, different policies.
				{Message: msg("new", "5", delay.Keep), When: hour},
				{Message: msg("new", "6", delay.Replace), When: hour}, // replaces item 5
				{Message: msg("new", "7", delay.Reject), When: hour},  // sees item 6
				{Message: msg("", "8", delay.QueueDefault), When: hour},
				{Message: msg("new2", "9", delay.Keep), When: hour},
			}
			b.reset(t)
			res, err := q.ScheduleBatch(ctx, items)
			require.NoError(t, err)
			calls := b.calls(t)

			require.Len(t, res, len(items))
			want := []struct {
				outcome delay.Outcome
				due     time.Time // zero: After(time.Hour), checked below
			}{
				{delay.Kept, due(1)}, {delay.Replaced, due(11)}, {delay.Rejected, due(3)},
				{delay.Created, due(13)}, {delay.Kept, due(13)},
				{delay.Created, time.Time{}}, {delay.Replaced, time.Time{}}, {delay.Rejected, time.Time{}},
				{delay.Created, time.Time{}}, {delay.Created, time.Time{}},
			}
			for i, w := range want {
				assert.Equal(t, w.outcome, res[i].Outcome, "item %d", i)
				if !w.due.IsZero() {
					assert.True(t, w.due.Equal(res[i].Due), "item %d: due %v, want %v", i, res[i].Due, w.due)
				}
			}
			assert.WithinDuration(t, time.Now().Add(time.Hour), res[5].Due, time.Minute)
			for i := 6; i <= 9; i++ {
				assert.True(t, res[5].Due.Equal(res[i].Due),
					"one call, one Redis TIME: equal delays give equal due times (item %d: %v, item 5: %v)", i, res[i].Due, res[5].Due)
			}
			assert.Len(t, res[8].ID, 26)

			for id, payload := range map[string]string{"old-k": "old", "old-r": "1", "old-e": "old", "orph": "3", "new": "6", res[8].ID: "8", "new2": "9"} {
				env, err := q.Get(ctx, id)
				require.NoError(t, err, id)
				assert.Equal(t, payload, string(env.Payload), id)
			}
			n, err := q.Len(ctx)
			require.NoError(t, err)
			assert.Equal(t, int64(7), n)

			// One script call. Existing ids not written earlier in the call
			// (items 0 to 3) are checked for an orphaned envelope. No id has
			// the layout of a generated one: no search for a packed member
			// (its ZCOUNTs), and no head check either, every message being due
			// beyond the wake horizon.
			assert.Zero(t, calls["zcount"], "calls %v", calls)
			assert.Equal(t, 1, calls["time"], "calls %v", calls)
			assert.Equal(t, 1, calls["zadd"], "calls %v", calls)
			assert.Equal(t, 1, calls["hset"], "calls %v", calls)
			assert.Equal(t, 4, calls["hexists"], "calls %v", calls)
			if tt.fallback {
				// Not for the generated id (item 8): it is new.
				assert.Equal(t, len(items)-1, calls["zscore"], "one ZSCORE per caller-chosen id: %v", calls)
				assert.Zero(t, calls["zmscore"], "calls %v", calls)
			} else {
				assert.Equal(t, 1, calls["zmscore"], "one ZMSCORE for the chunk: %v", calls)
				assert.Zero(t, calls["zscore"], "calls %v", calls)
			}

			// A single message (every Schedule) is looked up with ZSCORE on
			// any server, with the same outcomes.
			require.NoError(t, b.rdb.ZAdd(ctx, lane.Delayed, redis.Z{Member: "orph2", Score: float64(due(5).UnixMilli())}).Err())
			b.reset(t)
			r1, err := q.Schedule(ctx, msg("old-r", "10", delay.Keep), at(20))
			require.NoError(t, err)
			assert.Equal(t, delay.Kept, r1.Outcome)
			assert.True(t, due(11).Equal(r1.Due), "kept: the stored due %v", r1.Due)
			r2, err := q.Schedule(ctx, msg("single", "11", delay.Reject), at(21))
			require.NoError(t, err)
			assert.Equal(t, delay.Created, r2.Outcome)
			r3, err := q.Schedule(ctx, msg("orph2", "12", delay.Keep), at(22))
			require.NoError(t, err)
			assert.Equal(t, delay.Created, r3.Outcome, "an orphan is overwritten")
			assert.True(t, due(22).Equal(r3.Due))
			calls = b.calls(t)
			assert.Equal(t, 3, calls["zscore"], "calls %v", calls)
			assert.Zero(t, calls["zmscore"], "calls %v", calls)
			assert.Equal(t, 2, calls["hexists"], "the two waiting ids are checked for an orphan: %v", calls)
			env, err := q.Get(ctx, "orph2")
			require.NoError(t, err)
			assert.Equal(t, "12", string(env.Payload))
		})
	}
}

// Chunks of up to MaxBatchSize messages are sent to ZMSCORE, ZADD and HSET
// in slices (Lua's unpack is bounded): ids that already wait and duplicates
// inside the call are found across slice boundaries.
func TestScheduleBatchLargeChunk(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		q := b.queue(t, delay.WithBatchSize(delay.MaxBatchSize))
		base := time.Now().Add(time.Hour).Truncate(time.Millisecond)
		id := func(i int) string { return fmt.Sprintf("id-%04d", i) }
		// Every 7th id waits already, due at base.
		var old []delay.Item
		for i := 0; i < delay.MaxBatchSize; i += 7 {
			old = append(old, delay.Item{Message: delay.Message{ID: id(i), Payload: []byte("old")}, When: delay.At(base)})
		}
		_, err := q.ScheduleBatch(ctx, old)
		require.NoError(t, err)

		// Items 4990..4999 repeat ids 10..19 (written near the start of the
		// call, in another ZMSCORE slice and another ZADD slice).
		items := make([]delay.Item, delay.MaxBatchSize)
		for i := range items {
			n := i
			if i >= 4990 {
				n = i - 4980
			}
			items[i] = delay.Item{Message: delay.Message{ID: id(n), Payload: []byte(strconv.Itoa(i))},
				When: delay.At(base.Add(time.Duration(i+1) * time.Millisecond))}
		}
		res, err := q.ScheduleBatch(ctx, items)
		require.NoError(t, err)
		require.Len(t, res, len(items))
		for i, r := range res {
			n := i
			if i >= 4990 {
				n = i - 4980
			}
			wantDue := base.Add(time.Duration(n+1) * time.Millisecond)
			wantOutcome := delay.Created
			switch {
			case n%7 == 0:
				wantOutcome, wantDue = delay.Kept, base
			case i != n:
				wantOutcome = delay.Kept
			}
			require.Equal(t, wantOutcome, r.Outcome, "item %d", i)
			require.True(t, wantDue.Equal(r.Due), "item %d: due %v, want %v", i, r.Due, wantDue)
		}
		n, err := q.Len(ctx)
		require.NoError(t, err)
		assert.Equal(t, int64(715+4277), n, "715 old ids, 4277 new ones (ids 0..4989 that are not multiples of 7)")
		for _, i := range []int{0, 7, 10, 13, 14, 2000, 2001, 4989, 4998} {
			env, err := q.Get(ctx, id(i))
			require.NoError(t, err)
			want := strconv.Itoa(i)
			if i%7 == 0 {
				want = "old"
			}
			assert.Equal(t, want, string(env.Payload), id(i))
		}
	})
}

// A call in which every message gets a generated id takes the fast path: no
// lookups, no envelope hash, ZADD in slices of 2000 values, one PUBLISH
// when the earliest new due time is before the head. A call whose messages
// are all due beyond the wake horizon spares the head check: TIME and ZADD.
func TestScheduleGeneratedFastPath(t *testing.T) {
	t.Parallel()
	for name, backend := range map[string]func(t *testing.T) countedBackend{
		"miniredis": func(t *testing.T) countedBackend { return countedMiniredis(t, false) },
		"redis":     func(t *testing.T) countedBackend { return countedRedis(t) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b := backend(t)
			q, err := delay.New(b.rdb, "q", delay.WithPrefix(redistest.Prefix(t)), delay.WithBatchSize(delay.MaxBatchSize))
			require.NoError(t, err)
			lane := q.Keys().Main()
			// Within the wake horizon: the head check is made.
			base := time.Now().Add(30 * time.Second).Truncate(time.Millisecond)
			_, err = q.Schedule(ctx, delay.Message{Payload: []byte("head")}, delay.At(base))
			require.NoError(t, err)

			items := make([]delay.Item, delay.MaxBatchSize)
			for i := range items {
				// Runs of 100 items share a When; the last run is due before the head.
				w := delay.At(base.Add(time.Duration(1+i/100) * time.Second))
				if i >= delay.MaxBatchSize-100 {
					w = delay.At(base.Add(-10 * time.Second))
				}
				items[i] = delay.Item{Message: delay.Message{Payload: []byte(strconv.Itoa(i))}, When: w}
			}
			b.reset(t)
			res, err := q.ScheduleBatch(ctx, items)
			require.NoError(t, err)
			calls := b.calls(t)
			assert.Equal(t, 1, calls["evalsha"]+calls["eval"], "one call: %v", calls)
			assert.Equal(t, 5, calls["zadd"], "10000 values in slices of 2000: %v", calls)
			assert.Equal(t, 1, calls["publish"], "calls %v", calls)
			for _, c := range []string{"zscore", "zmscore", "hset", "hexists", "zrange"} {
				assert.Zero(t, calls[c], "%s: %v", c, calls)
			}
			assert.Equal(t, 1, calls["zcount"], "the head check: %v", calls)
			for i, r := range res {
				require.Equal(t, delay.Created, r.Outcome, "item %d", i)
				want := base.Add(time.Duration(1+i/100) * time.Second)
				if i >= delay.MaxBatchSize-100 {
					want = base.Add(-10 * time.Second)
				}
				require.True(t, want.Equal(r.Due), "item %d: due %v, want %v", i, r.Due, want)
			}
			for _, i := range []int{0, 1999, 2000, 4999} {
				env, err := q.Get(ctx, res[i].ID)
				require.NoError(t, err, "item %d", i)
				assert.Equal(t, strconv.Itoa(i), string(env.Payload))
			}
			n, err := q.Len(ctx)
			require.NoError(t, err)
			assert.Equal(t, int64(delay.MaxBatchSize+1), n)
			hlen, err := b.rdb.HLen(ctx, lane.Envelopes).Result()
			require.NoError(t, err)
			assert.Zero(t, hlen)

			// Beyond the wake horizon (and the call token's resend window):
			// TIME and ZADD only.
			b.reset(t)
			_, err = q.ScheduleBatch(ctx, []delay.Item{
				{Message: delay.Message{Payload: []byte("far")}, When: delay.After(time.Hour)},
				{Message: delay.Message{Payload: []byte("farther")}, When: delay.After(2 * time.Hour)},
			})
			require.NoError(t, err)
			calls = b.calls(t)
			delete(calls, "config|resetstat")
			assert.Equal(t, map[string]int{"evalsha": 1, "time": 1, "zadd": 1}, calls)
		})
	}
}
