package delaystream_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/internal/redistest"
	"github.com/delaystream/delaystream/internal/stream"
)

// occurrences records the occurrences each group handled: group ->
// occurrence time (HeaderOccurrence) -> deliveries.
type occurrences struct {
	mu   sync.Mutex
	got  map[string]map[string][]*delaystream.Delivery
	late map[string]time.Duration // occurrence -> how late it was appended
}

func (o *occurrences) handler(group string) delaystream.Handler {
	return func(_ context.Context, d *delaystream.Delivery) error {
		occ := d.Headers[delaystream.HeaderOccurrence]
		o.mu.Lock()
		defer o.mu.Unlock()
		if o.got == nil {
			o.got, o.late = map[string]map[string][]*delaystream.Delivery{}, map[string]time.Duration{}
		}
		if o.got[group] == nil {
			o.got[group] = map[string][]*delaystream.Delivery{}
		}
		o.got[group][occ] = append(o.got[group][occ], d)
		if at, err := time.Parse(time.RFC3339Nano, occ); err == nil {
			o.late[occ] = d.Appended().Sub(at)
		}
		return nil
	}
}

// times returns the occurrence times group handled, sorted, and the
// occurrences handled more than once.
func (o *occurrences) times(group string) (ts []time.Time, twice []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for occ, ds := range o.got[group] {
		at, _ := time.Parse(time.RFC3339Nano, occ)
		ts = append(ts, at)
		if len(ds) > 1 {
			twice = append(twice, occ)
		}
	}
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	return ts, twice
}

// process is a Queue that runs and stops on demand.
type process struct {
	q    *delaystream.Queue
	stop context.CancelFunc
	done chan error
}

func (p *process) start(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	p.stop, p.done = cancel, make(chan error, 1)
	go func() { p.done <- p.q.Run(ctx) }()
}

func (p *process) halt(t *testing.T) {
	p.stop()
	select {
	case err := <-p.done:
		require.NoError(t, err)
	case <-time.After(15 * time.Second):
		require.FailNow(t, "Run did not return")
	}
}

func redisNow(t *testing.T, rdb redis.UniversalClient) time.Time {
	now, err := rdb.Time(context.Background()).Result()
	require.NoError(t, err)
	return now
}

// Two processes serve a 1 s schedule while one of them at a time is
// stopped and restarted at random moments: every group gets every
// occurrence once, none twice, none skipped.
func TestRecurringTwoProcesses(t *testing.T) {
	t.Parallel()
	for _, shards := range []int{1, 4} {
		t.Run(fmt.Sprint(shards, "shards"), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			rdb := redistest.Client(t)
			prefix := redistest.Prefix(t)
			var o occurrences
			procs := make([]*process, 2)
			for i := range procs {
				q, err := delaystream.New(rdb, "ticks", delaystream.WithPrefix(prefix), delaystream.WithShards(shards),
					delaystream.WithRecurringHorizon(2*time.Second), delaystream.WithDrainTimeout(time.Second))
				require.NoError(t, err)
				for _, g := range []string{"a", "b"} {
					_, err := q.Handle(g, o.handler(g))
					require.NoError(t, err)
				}
				procs[i] = &process{q: q}
			}
			// Both define it at once: one creates it, the other keeps it.
			outcomes := make([]delaystream.Outcome, 2)
			var wg sync.WaitGroup
			for i, p := range procs {
				wg.Go(func() {
					var err error
					outcomes[i], err = p.q.DefineRecurring(ctx, delaystream.Recurring{ID: "tick", Spec: delaystream.Every(time.Second), Payload: []byte("t")})
					assert.NoError(t, err)
				})
			}
			wg.Wait()
			assert.ElementsMatch(t, []delaystream.Outcome{delaystream.OutcomeCreated, delaystream.OutcomeKept}, outcomes)
			for _, p := range procs {
				p.start(t)
			}
			// One process at a time stops for a random while (real time:
			// the schedule's occurrences must keep coming meanwhile).
			end := time.Now().Add(20 * time.Second)
			restarts := 0
			for time.Now().Before(end) {
				p := procs[rand.IntN(2)]
				time.Sleep(time.Duration(300+rand.IntN(1500)) * time.Millisecond) // a random moment
				p.halt(t)
				time.Sleep(time.Duration(rand.IntN(3000)) * time.Millisecond) // down for a random while
				p.start(t)
				restarts++
			}
			require.NoError(t, procs[0].q.DeleteRecurring(ctx, "tick"))
			deleted := redisNow(t, rdb)
			// What was due before the delete is delivered to both groups.
			require.EventuallyWithT(t, func(c *assert.CollectT) {
				for _, g := range []string{"a", "b"} {
					ts, _ := o.times(g)
					if assert.NotEmpty(c, ts) {
						assert.GreaterOrEqual(c, ts[len(ts)-1], deleted.Add(-1500*time.Millisecond).Truncate(time.Second), g)
					}
				}
			}, 20*time.Second, 50*time.Millisecond)
			for _, p := range procs {
				p.halt(t)
			}
			for _, g := range []string{"a", "b"} {
				ts, twice := o.times(g)
				assert.Empty(t, twice, "group %s: occurrences handled twice", g)
				require.GreaterOrEqual(t, len(ts), 15, "group %s", g)
				for i := 1; i < len(ts); i++ {
					assert.Equal(t, time.Second, ts[i].Sub(ts[i-1]), "group %s: skipped after %s", g, ts[i-1])
				}
				assert.False(t, ts[len(ts)-1].After(deleted.Add(time.Second)), "group %s: fired after its delete", g)
			}
			t.Logf("%d restarts, %d occurrences", restarts, len(o.got["a"]))
		})
	}
}

// atSpec fires at fixed instants (its text: Unix ms, comma-separated).
type atSpec []int64

func (a atSpec) Next(t time.Time) time.Time {
	for _, ms := range a {
		if ms > t.UnixMilli() {
			return time.UnixMilli(ms)
		}
	}
	return time.Time{}
}
func (a atSpec) Kind() string { return "at" }
func (a atSpec) String() string {
	s := make([]string, len(a))
	for i, ms := range a {
		s[i] = strconv.FormatInt(ms, 10)
	}
	return strings.Join(s, ",")
}

func parseAt(text string) (delaystream.Spec, error) {
	var a atSpec
	for _, f := range strings.Split(text, ",") {
		ms, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return nil, err
		}
		a = append(a, ms)
	}
	return a, nil
}

// A schedule defined while no process runs: the definer writes its next
// occurrence; the next two fall while every process is down and are
// missed; on restart, SkipMissed goes on with the next one to come and
// FireMissedOnce fires the latest missed one once first.
func TestRecurringMissedPolicy(t *testing.T) {
	t.Parallel()
	for _, policy := range []delaystream.MissedPolicy{delaystream.SkipMissed, delaystream.FireMissedOnce} {
		t.Run(fmt.Sprint(policy), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			rdb := redistest.Client(t)
			q, err := delaystream.New(rdb, "q", delaystream.WithPrefix(redistest.Prefix(t)),
				delaystream.WithRecurringHorizon(time.Second), delaystream.WithSpecParser("at", parseAt))
			require.NoError(t, err)
			var o occurrences
			_, err = q.Handle("g", o.handler("g"))
			require.NoError(t, err)
			d := redisNow(t, rdb).UnixMilli()
			spec := atSpec{d + 1500, d + 3000, d + 4000, d + 25000}
			_, err = q.DefineRecurring(ctx, delaystream.Recurring{ID: "r", Spec: spec, Missed: policy})
			require.NoError(t, err)
			// Every process is down until the missed ones are more than
			// 5 s late.
			require.Eventually(t, func() bool { return redisNow(t, rdb).UnixMilli() > d+4000+6000 }, 30*time.Second, 100*time.Millisecond)
			p := &process{q: q}
			p.start(t)
			defer p.halt(t)
			require.Eventually(t, func() bool {
				ts, _ := o.times("g")
				return len(ts) > 0 && ts[len(ts)-1].UnixMilli() == d+25000
			}, 40*time.Second, 50*time.Millisecond)
			ts, twice := o.times("g")
			assert.Empty(t, twice)
			var got []int64
			for _, at := range ts {
				got = append(got, at.UnixMilli())
			}
			want := []int64{d + 1500, d + 25000}
			if policy == delaystream.FireMissedOnce {
				want = []int64{d + 1500, d + 4000, d + 25000}
			}
			assert.Equal(t, want, got)
		})
	}
}

// Ten processes define one schedule at once: one creates it, nine keep it.
// Then an old and a new spec race (a rolling deploy) and the new one is
// defined last: one schedule remains, of the new spec, and after the last
// change no occurrence of another revision waits and none fires twice.
func TestRecurringConcurrentDefiners(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	qs := make([]*delaystream.Queue, 10)
	for i := range qs {
		q, err := delaystream.New(rdb, "q", delaystream.WithPrefix(prefix), delaystream.WithShards(3), delaystream.WithRecurringHorizon(5*time.Second))
		require.NoError(t, err)
		qs[i] = q
	}
	old := delaystream.Recurring{ID: "digest", Spec: delaystream.Every(time.Second), Payload: []byte("old")}
	outcomes := make([]delaystream.Outcome, len(qs))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, q := range qs {
		wg.Go(func() {
			<-start
			var err error
			outcomes[i], err = q.DefineRecurring(ctx, old)
			assert.NoError(t, err)
		})
	}
	close(start)
	wg.Wait()
	count := map[delaystream.Outcome]int{}
	for _, o := range outcomes {
		count[o]++
	}
	assert.Equal(t, map[delaystream.Outcome]int{delaystream.OutcomeCreated: 1, delaystream.OutcomeKept: 9}, count)

	neu := delaystream.Recurring{ID: "digest", Spec: delaystream.Every(2 * time.Second), Payload: []byte("new")}
	start = make(chan struct{})
	for i, q := range qs {
		wg.Go(func() {
			<-start
			r := old
			if i%2 == 1 {
				r = neu
			}
			for range 3 {
				_, err := q.DefineRecurring(ctx, r)
				assert.NoError(t, err)
			}
		})
	}
	close(start)
	wg.Wait()
	_, err := qs[0].DefineRecurring(ctx, neu)
	require.NoError(t, err)
	changed := redisNow(t, rdb)

	list, err := qs[1].ListRecurring(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	st := list[0]
	assert.Equal(t, "2s", st.SpecText)
	assert.Equal(t, []byte("new"), st.Payload)
	rev := "#" + strconv.FormatInt(st.Revision, 10)

	// Run two processes: after the change only the new spec fires, once.
	var o occurrences
	var procs []*process
	for _, q := range qs[:2] {
		_, err := q.Handle("g", o.handler("g"))
		require.NoError(t, err)
		p := &process{q: q}
		p.start(t)
		procs = append(procs, p)
	}
	require.Eventually(t, func() bool {
		ts, _ := o.times("g")
		return len(ts) > 0 && ts[len(ts)-1].After(changed.Add(6*time.Second))
	}, 30*time.Second, 50*time.Millisecond)
	for _, p := range procs {
		p.halt(t)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	after := 0
	for occ, ds := range o.got["g"] {
		at, _ := time.Parse(time.RFC3339Nano, occ)
		if !at.After(changed) {
			continue
		}
		after++
		assert.Len(t, ds, 1, "%s fired more than once", occ)
		assert.Equal(t, "new", string(ds[0].Payload), occ)
		assert.True(t, strings.HasSuffix(ds[0].ID, rev), "%s is of revision %s", ds[0].ID, rev)
		assert.Zero(t, at.UnixMilli()%2000, "%s is of the new spec", occ)
	}
	assert.GreaterOrEqual(t, after, 3)
}

// The API refuses bad definitions with nothing written, reports a
// schedule's state, and pause, resume and delete work and name unknown
// schedules.
func TestRecurringAPI(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	q, err := delaystream.New(rdb, "q", delaystream.WithPrefix(prefix), delaystream.WithMaxPayload(10))
	require.NoError(t, err)
	for name, r := range map[string]delaystream.Recurring{
		"empty id":      {Spec: delaystream.Every(time.Minute)},
		"long id":       {ID: strings.Repeat("x", 201), Spec: delaystream.Every(time.Minute)},
		"nil spec":      {ID: "r"},
		"short every":   {ID: "r", Spec: delaystream.Every(time.Millisecond)},
		"unknown kind":  {ID: "r", Spec: atSpec{1}},
		"payload":       {ID: "r", Spec: delaystream.Every(time.Minute), Payload: make([]byte, 11)},
		"reserved head": {ID: "r", Spec: delaystream.Every(time.Minute), Headers: map[string]string{"ds.x": "1"}},
		"missed":        {ID: "r", Spec: delaystream.Every(time.Minute), Missed: 7},
	} {
		_, err := q.DefineRecurring(ctx, r)
		assert.ErrorIs(t, err, delaystream.ErrInvalidMessage, name)
	}
	assert.Empty(t, redistest.Keys(t, rdb, prefix), "nothing written")

	// An hourly schedule, defined well before the hour: a pause and a
	// delete remove only occurrences not yet due, so the one written here
	// must not fall due while the test runs.
	require.Eventually(t, func() bool {
		return time.Hour-time.Duration(redisNow(t, rdb).UnixMilli()%time.Hour.Milliseconds())*time.Millisecond > time.Minute
	}, 2*time.Minute, 100*time.Millisecond, "clear of the hour's end")
	r := delaystream.Recurring{ID: "r", Spec: delaystream.Every(time.Hour), Payload: []byte("p"), Headers: map[string]string{"k": "v"}}
	out, err := q.DefineRecurring(ctx, r)
	require.NoError(t, err)
	assert.Equal(t, delaystream.OutcomeCreated, out)
	out, err = q.DefineRecurring(ctx, r)
	require.NoError(t, err)
	assert.Equal(t, delaystream.OutcomeKept, out)
	st, err := q.GetRecurring(ctx, "r")
	require.NoError(t, err)
	now := redisNow(t, rdb)
	assert.Zero(t, st.Next.UnixMilli()%time.Hour.Milliseconds(), "at a whole hour")
	assert.WithinRange(t, st.Next, now.Add(time.Minute-time.Second), now.Add(time.Hour), "the next hour")
	assert.Equal(t, "every", st.SpecKind)
	assert.Equal(t, "1h0m0s", st.Spec.String())
	assert.Equal(t, int64(1), st.Revision)
	assert.False(t, st.Paused)
	stats, err := q.Stats(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(1), stats.Recurring)
	assert.Equal(t, int64(1), stats.Waiting, "the next occurrence waits")
	env, err := q.Get(ctx, "r@"+strconv.FormatInt(st.Next.UnixMilli(), 10)+"#1")
	require.NoError(t, err)
	assert.Equal(t, "p", string(env.Payload))
	assert.Equal(t, map[string]string{"k": "v", delaystream.HeaderSchedule: "r",
		delaystream.HeaderOccurrence: st.Next.UTC().Format("2006-01-02T15:04:05.000Z")}, env.Headers)

	require.NoError(t, q.PauseRecurring(ctx, "r"))
	require.NoError(t, q.PauseRecurring(ctx, "r"))
	st, err = q.GetRecurring(ctx, "r")
	require.NoError(t, err)
	assert.True(t, st.Paused)
	assert.True(t, st.Next.IsZero())
	n, err := q.Len(ctx)
	require.NoError(t, err)
	assert.Zero(t, n, "a pause removes the waiting occurrence")
	require.NoError(t, q.ResumeRecurring(ctx, "r"))
	n, err = q.Len(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(1), n, "a resume writes the next occurrence")
	require.NoError(t, q.DeleteRecurring(ctx, "r"))
	_, err = q.GetRecurring(ctx, "r")
	assert.ErrorIs(t, err, delaystream.ErrNotFound)
	for _, f := range []func(context.Context, string) error{q.PauseRecurring, q.ResumeRecurring, q.DeleteRecurring} {
		assert.ErrorIs(t, f(ctx, "r"), delaystream.ErrNotFound)
	}
	list, err := q.ListRecurring(ctx)
	require.NoError(t, err)
	assert.Empty(t, list)
	n, err = q.Len(ctx)
	require.NoError(t, err)
	assert.Zero(t, n)
	// Defined again, it starts anew (a later revision).
	out, err = q.DefineRecurring(ctx, r)
	require.NoError(t, err)
	assert.Equal(t, delaystream.OutcomeCreated, out)
	st, err = q.GetRecurring(ctx, "r")
	require.NoError(t, err)
	assert.Greater(t, st.Revision, int64(4))
}

// A definition with a lower Version than the stored one's is kept out,
// whatever its content; the same Version compares by content; versions
// compare as whole unsigned 64-bit numbers; a definition without one is
// stored as before versions existed; a delete forgets the version.
func TestRecurringVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	q, err := delaystream.New(rdb, "q", delaystream.WithPrefix(prefix))
	require.NoError(t, err)
	l, err := stream.NewLayout(prefix, "q", 1)
	require.NoError(t, err)
	define := func(v uint64, every time.Duration, payload string) delaystream.Outcome {
		t.Helper()
		out, err := q.DefineRecurring(ctx, delaystream.Recurring{ID: "r", Spec: delaystream.Every(every), Payload: []byte(payload), Version: v})
		require.NoError(t, err)
		return out
	}
	stored := func(v uint64, every time.Duration, payload string, rev int64) {
		t.Helper()
		st, err := q.GetRecurring(ctx, "r")
		require.NoError(t, err)
		assert.Equal(t, v, st.Version)
		assert.Equal(t, every.String(), st.SpecText)
		assert.Equal(t, payload, string(st.Payload))
		assert.Equal(t, rev, st.Revision)
	}

	assert.Equal(t, delaystream.OutcomeCreated, define(0, time.Minute, "a"))
	body, err := rdb.HGet(ctx, l.Recurring(), "r").Result()
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(body, `{"k":`), "no version stored: %s", body)
	assert.Equal(t, delaystream.OutcomeReplaced, define(2, 2*time.Minute, "b"))
	stored(2, 2*time.Minute, "b", 2)
	assert.Equal(t, delaystream.OutcomeKept, define(1, time.Minute, "a"), "an older version")
	assert.Equal(t, delaystream.OutcomeKept, define(0, time.Minute, "a"), "no version, after one")
	stored(2, 2*time.Minute, "b", 2)
	assert.Equal(t, delaystream.OutcomeKept, define(2, 2*time.Minute, "b"), "the same definition")
	assert.Equal(t, delaystream.OutcomeReplaced, define(2, 2*time.Minute, "c"), "the same version, another content")
	stored(2, 2*time.Minute, "c", 3)

	assert.Equal(t, delaystream.OutcomeReplaced, define(10, time.Minute, "d"))
	assert.Equal(t, delaystream.OutcomeKept, define(9, 2*time.Minute, "e"), "9 < 10")
	assert.Equal(t, delaystream.OutcomeReplaced, define(math.MaxUint64, time.Minute, "f"))
	assert.Equal(t, delaystream.OutcomeKept, define(math.MaxUint64-1, 2*time.Minute, "g"), "beyond a float's precision")
	stored(math.MaxUint64, time.Minute, "f", 5)

	require.NoError(t, q.DeleteRecurring(ctx, "r"))
	assert.Equal(t, delaystream.OutcomeCreated, define(1, time.Minute, "h"), "a delete forgets the version")
	stored(1, time.Minute, "h", 7)
}

// When the last occurrence was written is kept with the schedule, known
// after its entry is trimmed; when it was appended is read from the entry
// while it is in the stream.
func TestRecurringLastWrittenKept(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	q, err := delaystream.New(rdb, "q", delaystream.WithPrefix(prefix),
		delaystream.WithRecurringHorizon(time.Second), delaystream.WithSpecParser("at", parseAt))
	require.NoError(t, err)
	held, release := make(chan string, 1), make(chan struct{})
	_, err = q.Handle("g", func(ctx context.Context, d *delaystream.Delivery) error {
		held <- d.EntryID
		<-release // pending, so not trimmed, until the status was read
		return nil
	})
	require.NoError(t, err)
	d := redisNow(t, rdb).UnixMilli()
	_, err = q.DefineRecurring(ctx, delaystream.Recurring{ID: "r", Spec: atSpec{d + 1500, d + 3_600_000}})
	require.NoError(t, err)
	defined := redisNow(t, rdb).UnixMilli()
	p := &process{q: q}
	p.start(t)
	defer p.halt(t)
	var entry string
	select {
	case entry = <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("the occurrence was not delivered")
	}
	st, err := q.GetRecurring(ctx, "r")
	require.NoError(t, err)
	require.Equal(t, d+1500, st.Last.UnixMilli())
	assert.Equal(t, wireTime(t, entry), st.LastFired.UnixMilli(), "read from the stream")
	require.False(t, st.LastWritten.IsZero())
	assert.GreaterOrEqual(t, st.LastWritten.UnixMilli(), d, "by the definer")
	assert.LessOrEqual(t, st.LastWritten.UnixMilli(), defined, "by the definer")
	late, ok := st.Lateness()
	assert.True(t, ok)
	assert.Equal(t, st.LastFired.Sub(st.Last), late)
	written := st.LastWritten
	close(release)

	l, err := stream.NewLayout(prefix, "q", 1)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		n, err := rdb.XLen(ctx, l.Shard(0).Main().Stream).Result()
		return err == nil && n == 0
	}, 30*time.Second, 20*time.Millisecond, "the acknowledged entry is trimmed")
	st, err = q.GetRecurring(ctx, "r")
	require.NoError(t, err)
	require.Equal(t, d+1500, st.Last.UnixMilli())
	assert.Equal(t, written, st.LastWritten, "kept after the trim")
	assert.Equal(t, wireTime(t, entry), st.LastFired.UnixMilli(), "when it was promoted, kept after the trim")
	late, ok = st.Lateness()
	assert.True(t, ok, "how late it fired is known after the trim")
	assert.Equal(t, st.LastFired.Sub(st.Last), late)
}

// An occurrence written late (FireMissedOnce after every process was
// down) is known to have fired at least as late as it was written, with
// no status read while its entry was in the stream.
func TestRecurringWrittenLate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	q, err := delaystream.New(rdb, "q", delaystream.WithPrefix(prefix),
		delaystream.WithRecurringHorizon(time.Second), delaystream.WithSpecParser("at", parseAt))
	require.NoError(t, err)
	var o occurrences
	_, err = q.Handle("g", o.handler("g"))
	require.NoError(t, err)
	d := redisNow(t, rdb).UnixMilli()
	_, err = q.DefineRecurring(ctx, delaystream.Recurring{ID: "r", Spec: atSpec{d + 1500, d + 3000, d + 3_600_000},
		Missed: delaystream.FireMissedOnce})
	require.NoError(t, err)
	// Every process is down until d+3000 is more than 5 s late.
	require.Eventually(t, func() bool { return redisNow(t, rdb).UnixMilli() > d+3000+6000 }, 30*time.Second, 100*time.Millisecond)
	p := &process{q: q}
	p.start(t)
	defer p.halt(t)
	require.Eventually(t, func() bool {
		ts, _ := o.times("g")
		return len(ts) == 2
	}, 30*time.Second, 20*time.Millisecond)
	l, err := stream.NewLayout(prefix, "q", 1)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		n, err := rdb.XLen(ctx, l.Shard(0).Main().Stream).Result()
		return err == nil && n == 0
	}, 30*time.Second, 20*time.Millisecond, "the acknowledged entries are trimmed")
	st, err := q.GetRecurring(ctx, "r")
	require.NoError(t, err)
	require.Equal(t, d+3000, st.Last.UnixMilli())
	assert.GreaterOrEqual(t, st.LastWritten.UnixMilli(), d+3000+6000, "written on restart")
	late, ok := st.Lateness()
	assert.True(t, ok)
	assert.GreaterOrEqual(t, late, st.LastWritten.Sub(st.Last))
}

// wireTime returns the ms of stream entry id eid.
func wireTime(t *testing.T, eid string) int64 {
	ms, _, ok := strings.Cut(eid, "-")
	require.True(t, ok, eid)
	v, err := strconv.ParseInt(ms, 10, 64)
	require.NoError(t, err)
	return v
}
