package recur

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/internal/redistest"
	"github.com/delaystream/delaystream/internal/stream"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

func ms(s string) int64 {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t.UnixMilli()
}

func TestEveryNext(t *testing.T) {
	t.Parallel()
	e := Every{D: 30 * time.Second}
	for _, c := range []struct{ at, want string }{
		{"2026-11-28T10:00:00Z", "2026-11-28T10:00:30Z"},
		{"2026-11-28T10:00:00.001Z", "2026-11-28T10:00:30Z"},
		{"2026-11-28T10:00:29.999Z", "2026-11-28T10:00:30Z"},
		{"1969-12-31T23:59:45Z", "1970-01-01T00:00:00Z"},
	} {
		assert.Equal(t, ms(c.want), e.Next(time.UnixMilli(ms(c.at))).UnixMilli(), c.at)
	}
	// Another process, another zone: the same instants.
	loc, err := time.LoadLocation("Asia/Kolkata")
	require.NoError(t, err)
	assert.Equal(t, ms("2026-11-28T10:00:30Z"), e.Next(time.UnixMilli(ms("2026-11-28T10:00:10Z")).In(loc)).UnixMilli())
	_, err = NewEvery(999 * time.Millisecond)
	assert.Error(t, err)
	_, err = NewEvery(1500 * time.Microsecond * 1000)
	assert.NoError(t, err)
}

func TestPlan(t *testing.T) {
	t.Parallel()
	sec := Every{D: time.Second}
	now := ms("2026-11-28T10:00:00.500Z")
	cases := []struct {
		name        string
		spec        Spec
		missed      Missed
		through     int64
		horizon     time.Duration
		want        []int64
		wantThrough int64
	}{
		{"up to the horizon", sec, SkipMissed, now - 500, 3 * time.Second,
			[]int64{now + 500, now + 1500, now + 2500}, now + 2500},
		{"at least the next one", Every{D: time.Hour}, SkipMissed, now - 500, time.Second,
			[]int64{ms("2026-11-28T11:00:00Z")}, ms("2026-11-28T11:00:00Z")},
		{"late within grace is added", sec, SkipMissed, now - 3500, time.Second,
			[]int64{now - 2500, now - 1500, now - 500, now + 500}, now + 500},
		{"missed skipped", sec, SkipMissed, now - 20500, time.Second,
			[]int64{now - 4500, now - 3500, now - 2500, now - 1500, now - 500, now + 500}, now + 500},
		{"missed fired once", sec, FireMissedOnce, now - 20500, time.Second,
			[]int64{now - 5500, now - 4500, now - 3500, now - 2500, now - 1500, now - 500, now + 500}, now + 500},
		{"nothing new", sec, SkipMissed, now + 2500, time.Second, nil, now + 2500},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, th := plan(c.spec, c.missed, c.through, now, c.horizon)
			assert.Equal(t, c.want, got)
			assert.Equal(t, c.wantThrough, th)
		})
	}
	// A long outage is walked over in bounded time and still skipped.
	got, _ := plan(sec, FireMissedOnce, now-int64(400*24*time.Hour/time.Millisecond), now, time.Second)
	require.NotEmpty(t, got)
	assert.Greater(t, got[0], now-int64(Grace/time.Millisecond)-1000, "only the latest missed one fires")
}

func newStore(t *testing.T, rdb redis.UniversalClient, prefix string, shards int, horizon time.Duration) *Store {
	t.Helper()
	l, err := stream.NewLayout(prefix, "q", shards)
	require.NoError(t, err)
	return New(rdb, l, Config{Horizon: horizon})
}

// waitingOccurrences returns every occurrence id waiting on any shard.
func waitingOccurrences(t *testing.T, rdb redis.UniversalClient, s *Store) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for i := range s.layout.Shards() {
		zs, err := rdb.ZRangeWithScores(context.Background(), s.layout.Shard(i).Main().Delayed, 0, -1).Result()
		require.NoError(t, err)
		for _, z := range zs {
			out[z.Member.(string)] = z.Score
		}
	}
	return out
}

// A top-up that crashed before recording its progress, or between its
// shards, and a racing top-up never re-create an occurrence: neither one
// still waiting nor one delivered (gone from the delayed set).
func TestTopUpNeverRecreates(t *testing.T) {
	t.Parallel()
	for _, shards := range []int{1, 4} {
		t.Run(fmt.Sprint(shards, " shards"), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			rdb := redistest.Client(t)
			s := newStore(t, rdb, redistest.Prefix(t), shards, 20*time.Second)
			code, err := s.Define(ctx, "tick", Def{Kind: KindEvery, Spec: "1s", Payload: []byte("p")})
			require.NoError(t, err)
			require.Equal(t, Created, code)
			first := waitingOccurrences(t, rdb, s)
			require.GreaterOrEqual(t, len(first), 19)

			// Every occurrence is "delivered": removed from the delayed
			// sets, as promotion does.
			for id := range first {
				sh := s.layout.ShardOf(id)
				require.NoError(t, rdb.ZRem(ctx, s.layout.Shard(sh).Main().Delayed, id).Err())
				require.NoError(t, rdb.HDel(ctx, s.layout.Shard(sh).Main().Envelopes, id).Err())
			}
			// The progress record is rewound, as if the top-up had crashed
			// after its shards and before recording.
			p, err := rdb.HGet(ctx, s.layout.RecurringProgress(), "tick").Result()
			require.NoError(t, err)
			pr, ok := parseProgress(p)
			require.True(t, ok)
			rewound := fmt.Sprintf("%d|%d|1|a", pr.rev, pr.through-int64(25*time.Second/time.Millisecond))
			require.NoError(t, rdb.HSet(ctx, s.layout.RecurringProgress(), "tick", rewound).Err())

			// Ten top-ups at once (racing processes).
			var wg sync.WaitGroup
			for range 10 {
				wg.Go(func() { assert.NoError(t, s.TopUp(ctx, "tick")) })
			}
			wg.Wait()
			again := waitingOccurrences(t, rdb, s)
			for id := range again {
				_, was := first[id]
				assert.False(t, was, "occurrence %s re-created after its delivery", id)
			}
			// Later occurrences (after the first horizon) are added once.
			for id, due := range again {
				assert.Greater(t, int64(due), maxScore(first), "%s", id)
			}
		})
	}
}

func maxScore(m map[string]float64) int64 {
	var out float64
	for _, v := range m {
		out = max(out, v)
	}
	return int64(out)
}

// An update fences every shard: the old revision's waiting occurrences
// are removed, and a process still holding the old revision cannot add
// more.
func TestUpdateFences(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	s := newStore(t, rdb, redistest.Prefix(t), 4, 10*time.Second)
	_, err := s.Define(ctx, "tick", Def{Kind: KindEvery, Spec: "1s"})
	require.NoError(t, err)
	require.NotEmpty(t, waitingOccurrences(t, rdb, s))
	code, err := s.Define(ctx, "tick", Def{Kind: KindEvery, Spec: "2s"})
	require.NoError(t, err)
	require.Equal(t, Changed, code)
	w := waitingOccurrences(t, rdb, s)
	require.NotEmpty(t, w)
	now := time.Now().UnixMilli()
	for id, due := range w {
		if strings.HasSuffix(id, "#1") {
			assert.LessOrEqual(t, int64(due), now, "old revision's %s still waits", id)
		} else {
			assert.True(t, strings.HasSuffix(id, "#2"), id)
			assert.Zero(t, int64(due)%2000, "%s is of the new spec", id)
		}
	}
	// A stale process adding revision 1 is refused on every shard.
	for i := range 4 {
		refused, _, err := s.addShard(ctx, i, "tick", 1, []any{fmt.Sprint(now + 60_000), "x"})
		require.NoError(t, err)
		assert.True(t, refused, "shard %d", i)
	}
	// Delete removes every waiting occurrence not yet due.
	code, err = s.Change(ctx, "tick", "x")
	require.NoError(t, err)
	require.Equal(t, Changed, code)
	for id, due := range waitingOccurrences(t, rdb, s) {
		assert.LessOrEqual(t, int64(due), time.Now().UnixMilli(), "%s still waits after delete", id)
	}
	n, err := s.Count(ctx)
	require.NoError(t, err)
	assert.Zero(t, n)
}

// A fence left unfinished by a crashed caller is finished by the next
// process's top-up pass.
func TestFenceFinishedByAnother(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	s := newStore(t, rdb, prefix, 4, 10*time.Second)
	_, err := s.Define(ctx, "tick", Def{Kind: KindEvery, Spec: "1s"})
	require.NoError(t, err)
	// The pause is written, but its caller "crashes" before fencing: the
	// script alone runs.
	_, err = rdbRun(ctx, rdb, s, "tick", "p")
	require.NoError(t, err)
	require.NotEmpty(t, futureOccurrences(t, rdb, s))
	other := newStore(t, rdb, prefix, 4, 10*time.Second)
	n, err := other.TopUpDue(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Empty(t, futureOccurrences(t, rdb, s), "the fence was finished")
}

func rdbRun(ctx context.Context, rdb redis.UniversalClient, s *Store, sid, op string) (any, error) {
	return scriptsRecurDefine(ctx, rdb, s, sid, op)
}

func futureOccurrences(t *testing.T, rdb redis.UniversalClient, s *Store) []string {
	var out []string
	now := time.Now().UnixMilli() + 200
	for id, due := range waitingOccurrences(t, rdb, s) {
		if int64(due) > now {
			out = append(out, id)
		}
	}
	return out
}

// A process without the parser of a schedule's spec kind warns once and
// leaves the schedule to the processes that have it: it writes nothing.
func TestUnknownKindLeftToOthers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	l, err := stream.NewLayout(prefix, "q", 2)
	require.NoError(t, err)
	// The definer knows "hourly" (every hour, as Every).
	hourly := func(string) (Spec, error) { return Every{D: time.Hour}, nil }
	definer := New(rdb, l, Config{Parsers: map[string]Parser{"hourly": hourly}})
	_, err = definer.Define(ctx, "h", Def{Kind: "hourly", Spec: "-"})
	require.NoError(t, err)
	before := waitingOccurrences(t, rdb, definer)
	require.Len(t, before, 1, "the definer wrote the next occurrence")

	var logs strings.Builder
	var mu sync.Mutex
	other := New(rdb, l, Config{Logger: slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &mu}, nil))})
	// Its progress says a top-up is due: the other process looks at it.
	require.NoError(t, rdb.HSet(ctx, l.RecurringProgress(), "h", "1|0|1|a|0").Err())
	for range 3 {
		_, err := other.TopUpDue(ctx)
		require.NoError(t, err)
	}
	assert.Equal(t, before, waitingOccurrences(t, rdb, definer), "nothing written")
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, 1, strings.Count(logs.String(), "cannot compute"), "warned once: %s", logs.String())
	assert.Contains(t, logs.String(), "kind=hourly")
}

type lockedWriter struct {
	w  *strings.Builder
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Each shard keeps when its occurrences were written, by the Redis clock:
// a fence drops the times of the occurrences it removes, so the next
// revision's occurrences at the same instants read their own.
func TestWrittenTimes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	s := newStore(t, rdb, redistest.Prefix(t), 2, 10*time.Second)
	written := func(rev string) map[int64]int64 { // occurrence ms -> written ms
		t.Helper()
		out := map[int64]int64{}
		for id := range waitingOccurrences(t, rdb, s) {
			if !strings.HasSuffix(id, rev) {
				continue
			}
			at, _ := strconv.ParseInt(id[strings.Index(id, "@")+1:strings.Index(id, "#")], 10, 64)
			runs, err := rdb.HGet(ctx, s.layout.Shard(s.layout.ShardOf(id)).Occurrences(), writtenField("tick")).Result()
			require.NoError(t, err)
			out[at] = writtenAt(runs, at)
		}
		return out
	}
	before := redisMs(t, rdb)
	_, err := s.Define(ctx, "tick", Def{Kind: KindEvery, Spec: "1s"})
	require.NoError(t, err)
	after := redisMs(t, rdb)
	w1 := written("#1")
	require.GreaterOrEqual(t, len(w1), 9)
	var first int64 // the latest written
	for at, w := range w1 {
		assert.GreaterOrEqual(t, w, before, "occurrence %d: written by the definer", at)
		assert.LessOrEqual(t, w, after, "occurrence %d: written by the definer", at)
		assert.Less(t, w, at, "written ahead")
		first = max(first, w)
	}

	require.Eventually(t, func() bool { return redisMs(t, rdb) > first }, 5*time.Second, time.Millisecond)
	code, err := s.Define(ctx, "tick", Def{Kind: KindEvery, Spec: "2s"})
	require.NoError(t, err)
	require.Equal(t, Changed, code)
	w2 := written("#2")
	require.NotEmpty(t, w2)
	for at, w := range w2 {
		assert.Greater(t, w, first, "occurrence %d of the new revision: its own time", at)
	}
}

func redisMs(t *testing.T, rdb redis.UniversalClient) int64 {
	t.Helper()
	now, err := rdb.Time(context.Background()).Result()
	require.NoError(t, err)
	return now.UnixMilli()
}

func TestWrittenAt(t *testing.T) {
	t.Parallel()
	runs := "1000:3000:500,4000:4000:3900,x:1:2,5000:9000:4100"
	for ms, want := range map[int64]int64{999: 0, 1000: 500, 3000: 500, 3500: 0, 4000: 3900, 7000: 4100, 9001: 0} {
		assert.Equal(t, want, writtenAt(runs, ms), "ms %d", ms)
	}
	occ, at, ok := parseAppended("1000|1007")
	assert.True(t, ok)
	assert.Equal(t, [2]int64{1000, 1007}, [2]int64{occ, at})
	_, _, ok = parseAppended("1000")
	assert.False(t, ok)
}

// A status read takes when the last occurrence was appended from its
// shard's occurrence records when they record that occurrence, and when
// it was written from them too.
func TestStatusReadsOccurrenceTimes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	l, err := stream.NewLayout(redistest.Prefix(t), "q", 4)
	require.NoError(t, err)
	before := redisMs(t, rdb)
	// Fires once soon, then not for an hour: the last occurrence stays.
	once := func(string) (Spec, error) { return onceSpec(before + 300), nil }
	s := New(rdb, l, Config{Horizon: 10 * time.Second, Parsers: map[string]Parser{"once": once}})
	_, err = s.Define(ctx, "tick", Def{Kind: "once", Spec: "-"})
	require.NoError(t, err)
	var st Status
	require.Eventually(t, func() bool { // the first occurrence is due (nothing promotes it here)
		st, err = s.Status(ctx, "tick")
		require.NoError(t, err)
		return !st.Last.IsZero()
	}, 5*time.Second, 10*time.Millisecond)
	last := st.Last.UnixMilli()
	assert.True(t, st.LastFired.IsZero(), "not in the stream")
	assert.GreaterOrEqual(t, st.LastWritten.UnixMilli(), before)
	assert.Less(t, st.LastWritten.UnixMilli(), last, "written ahead")

	key := s.layout.Shard(s.layout.ShardOf(OccurrenceID("tick", last, 1))).Occurrences()
	require.NoError(t, rdb.HSet(ctx, key, appendedField("tick"), fmt.Sprintf("%d|%d", last-1000, last-990)).Err())
	st, err = s.Status(ctx, "tick")
	require.NoError(t, err)
	require.Equal(t, last, st.Last.UnixMilli())
	assert.True(t, st.LastFired.IsZero(), "a record of another occurrence")
	require.NoError(t, rdb.HSet(ctx, key, appendedField("tick"), fmt.Sprintf("%d|%d", last, last+3)).Err())
	st, err = s.Status(ctx, "tick")
	require.NoError(t, err)
	require.Equal(t, last, st.Last.UnixMilli())
	assert.Equal(t, last+3, st.LastFired.UnixMilli())
}

// onceSpec fires at its ms, then an hour later.
type onceSpec int64

func (o onceSpec) Next(t time.Time) time.Time {
	switch ms := t.UnixMilli(); {
	case ms < int64(o):
		return time.UnixMilli(int64(o))
	case ms < int64(o)+time.Hour.Milliseconds():
		return time.UnixMilli(int64(o) + time.Hour.Milliseconds())
	}
	return time.Time{}
}
func (o onceSpec) Kind() string   { return "once" }
func (o onceSpec) String() string { return "-" }

// ListedIDs lists, from the progress records alone, the schedules Status
// reports: active and paused ones, not deleted ones nor a record of
// another form; and the same as IDs when every definition has its record.
func TestListedIDs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	s := newStore(t, rdb, redistest.Prefix(t), 2, time.Minute)
	ids, err := s.ListedIDs(ctx)
	require.NoError(t, err)
	assert.Empty(t, ids)
	for _, sid := range []string{"c", "a", "b", "d"} {
		_, err := s.Define(ctx, sid, Def{Kind: KindEvery, Spec: "1h", Payload: []byte("p")})
		require.NoError(t, err)
	}
	_, err = s.Change(ctx, "b", "p")
	require.NoError(t, err)
	_, err = s.Change(ctx, "d", "x")
	require.NoError(t, err)
	ids, err = s.ListedIDs(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b", "c"}, ids)
	defined, err := s.IDs(ctx)
	require.NoError(t, err)
	assert.Equal(t, defined, ids)

	require.NoError(t, rdb.HSet(ctx, s.layout.RecurringProgress(), "e", "not a record").Err())
	ids, err = s.ListedIDs(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b", "c"}, ids)
}
