package integration

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/integration/internal/harness"
	"github.com/delaystream/delaystream/internal/delay"
	"github.com/delaystream/delaystream/internal/margin"
	"github.com/delaystream/delaystream/internal/mover"
	"github.com/delaystream/delaystream/internal/stream"
)

// TestShardedMoversShareShards runs the movers of a 16-shard queue on the
// Cluster as separate processes, each printing its shards on every
// ownership change, while 5000 messages come due: three movers split the
// shards 5/5/6; a fourth joins and all have 4 within 2 s; one stopped with
// SIGTERM (its program cancels Run's ctx: a clean leave) is covered by the
// others within 2 s; one killed with SIGKILL is covered within the lease
// TTL. At the end every message is in its shard's stream exactly
// once (nothing lost, nothing promoted twice through the rebalances), and
// none early.
func TestShardedMoversShareShards(t *testing.T) {
	t.Parallel()
	heavy.RLock()
	defer heavy.RUnlock()
	ctx := t.Context()
	rdb := harness.Cluster(t)
	prefix := harness.Prefix(t, rdb)
	const (
		queue  = "movers"
		shards = 16
		n      = 5000
		spread = 5 * time.Second // due times from 300 ms to 300 ms + spread
	)
	layout, err := stream.NewLayout(prefix, queue, shards)
	require.NoError(t, err)

	// Schedule everything first (half caller ids, half generated), due
	// over the whole run: every rebalance happens while messages come due.
	q := newQueue(t, rdb, prefix, queue, delay.WithShards(shards))
	items := make([]delay.Item, n)
	for i := range items {
		items[i] = delay.Item{Message: delay.Message{Payload: []byte("x")},
			When: delay.After(300*time.Millisecond + time.Duration(i)*spread/n)}
		if i%2 == 0 {
			items[i].Message.ID = fmt.Sprintf("m%04d", i)
		}
	}
	rand.Shuffle(len(items), func(i, j int) { items[i], items[j] = items[j], items[i] })
	res, err := q.ScheduleBatch(ctx, items)
	require.NoError(t, err)
	want := make(map[string]time.Time, n)
	for _, r := range res {
		require.Equal(t, delay.Created, r.Outcome, r.ID)
		want[r.ID] = r.Due
	}
	require.Len(t, want, n)

	f := newFleet(t, childSpec{Role: "mover", Addrs: rdb.Options().Addrs, Prefix: prefix, Queue: queue, Shards: shards})

	// Three movers split the shards evenly.
	var t0 time.Time
	for _, name := range []string{"m1", "m2", "m3"} {
		t0 = time.Now()
		f.start(name)
	}
	took := f.waitSplit(t, []string{"m1", "m2", "m3"}, t0, 5*time.Second)
	t.Logf("3 movers: %s, settled %s after the third started", f.describe("m1", "m2", "m3"), took.Round(time.Millisecond))

	// A fourth joins: 4 shards each within 2 s of its joining (its first
	// report follows its first registration; the time its process took to
	// start, a few hundred ms for a race-enabled test binary, is logged).
	spawned := time.Now()
	f.start("m4")
	joined := f.firstLine(t, "m4", 5*time.Second)
	took = f.waitSplit(t, []string{"m1", "m2", "m3", "m4"}, joined, 2*time.Second)
	t.Logf("m4 joined (first report %s after its process started): %s, settled %s after it joined, %s after its process started",
		joined.Sub(spawned).Round(time.Millisecond), f.describe("m1", "m2", "m3", "m4"),
		took.Round(time.Millisecond), (took + joined.Sub(spawned)).Round(time.Millisecond))

	// A clean leave: SIGTERM, the program cancels Run's ctx, Run leaves the
	// registry; the other three cover every shard within 2 s.
	stopped := time.Now()
	f.procs["m2"].signal(syscall.SIGTERM)
	took = f.waitSplit(t, []string{"m1", "m3", "m4"}, stopped, 2*time.Second)
	require.NoError(t, f.procs["m2"].waitExit(t, 10*time.Second), "m2 exits cleanly after SIGTERM")
	assert.True(t, f.saw("m2", lineStopped), "m2's Run returned nil")
	assert.Empty(t, f.owned("m2"), "m2 reported an empty set when Run returned")
	t.Logf("m2 stopped (SIGTERM): %s, settled %s after the signal", f.describe("m1", "m3", "m4"), took.Round(time.Millisecond))

	// A crash: SIGKILL; the other two cover every shard once its
	// registration lapsed (two beat periods after its last beat, at most
	// that after the kill) and one of them beat (every third of the lease
	// TTL): the lease TTL, plus a second for the processes to report it on
	// two loaded cores.
	killed := time.Now()
	f.procs["m3"].kill()
	took = f.waitSplit(t, []string{"m1", "m4"}, killed, mover.DefaultLeaseTTL+time.Second)
	t.Logf("m3 killed (SIGKILL): %s, settled %s after the kill (lease TTL %s)", f.describe("m1", "m4"),
		took.Round(time.Millisecond), mover.DefaultLeaseTTL)

	// Every message promoted exactly once, into its own shard's stream,
	// none early.
	require.Eventually(t, func() bool {
		for i := range shards {
			if n, err := rdb.ZCard(ctx, layout.Shard(i).Main().Delayed).Result(); err != nil || n > 0 {
				return false
			}
		}
		return true
	}, spread+10*time.Second, 20*time.Millisecond, "every delayed set drained")
	seen := make(map[string]int, n)
	perShard := make([]int, shards)
	var late []time.Duration
	for i := range shards {
		l := layout.Shard(i).Main()
		for _, e := range decodeAll(ctx, t, rdb, l.Stream) {
			id := e.Envelope.ID
			seen[id]++
			perShard[i]++
			late = append(late, e.Appended().Sub(e.Envelope.Due))
			due, ok := want[id]
			if !assert.True(t, ok, "unexpected message %q in shard %d", id, i) {
				continue
			}
			assert.Equal(t, layout.ShardOf(id), i, "%s promoted into shard %d", id, i)
			assert.True(t, due.Equal(e.Envelope.Due), "%s: due %v, scheduled %v", id, e.Envelope.Due, due)
			assert.False(t, e.Appended().Before(e.Envelope.Due), "%s early by %s", id, e.Envelope.Due.Sub(e.Appended()))
		}
		requireEmptyDelayed(ctx, t, rdb, l)
	}
	var lost, twice int
	for id := range want {
		switch seen[id] {
		case 0:
			lost++
		case 1:
		default:
			twice++
		}
	}
	assert.Zero(t, lost, "messages never promoted")
	assert.Zero(t, twice, "messages promoted more than once")
	assert.Len(t, seen, n)
	t.Logf("%d messages over %d shards %v: lost %d, promoted twice %d; lateness %s", n, shards, perShard, lost, twice, distOf(late))

	// The survivors stop cleanly too.
	for _, name := range []string{"m1", "m4"} {
		f.procs[name].signal(syscall.SIGTERM)
	}
	for _, name := range []string{"m1", "m4"} {
		require.NoError(t, f.procs[name].waitExit(t, 10*time.Second), "%s exits cleanly after SIGTERM", name)
	}
}

// fleet is a set of mover processes and what each last reported.
type fleet struct {
	t    *testing.T
	spec childSpec

	mu      sync.Mutex
	procs   map[string]*proc
	current map[string][]int     // last owned set reported
	changed map[string]time.Time // when it was reported
	first   map[string]time.Time // when the first line arrived
	seen    map[string][]string  // every line
}

func newFleet(t *testing.T, spec childSpec) *fleet {
	return &fleet{t: t, spec: spec, procs: map[string]*proc{}, current: map[string][]int{},
		changed: map[string]time.Time{}, first: map[string]time.Time{}, seen: map[string][]string{}}
}

// start starts mover name and follows its reports.
func (f *fleet) start(name string) {
	f.t.Helper()
	p := startProc(f.t, name, f.spec)
	f.mu.Lock()
	f.procs[name] = p
	f.mu.Unlock()
	go func() {
		for l := range p.lines {
			f.mu.Lock()
			if _, ok := f.first[name]; !ok {
				f.first[name] = l.at
			}
			f.seen[name] = append(f.seen[name], l.text)
			if rest, ok := strings.CutPrefix(l.text, lineOwned); ok {
				var owned []int
				for _, s := range strings.Fields(rest) {
					i, err := strconv.Atoi(s)
					if err == nil {
						owned = append(owned, i)
					}
				}
				f.current[name], f.changed[name] = owned, l.at
			}
			f.mu.Unlock()
		}
	}()
}

// firstLine waits for mover name's first report and returns when it came.
func (f *fleet) firstLine(t *testing.T, name string, limit time.Duration) time.Time {
	t.Helper()
	var at time.Time
	require.Eventually(t, func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		at = f.first[name]
		return !at.IsZero()
	}, limit, 2*time.Millisecond, "%s reported nothing", name)
	return at
}

func (f *fleet) owned(name string) []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.current[name])
}

func (f *fleet) saw(name, line string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Contains(f.seen[name], line)
}

// split reports whether the live movers' last reports cover every shard
// exactly once with shares that differ by at most one, and when the last
// report of that state came.
func (f *fleet) split(live []string) (bool, time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	shards := f.spec.Shards
	owner := make([]int, shards)
	var last time.Time
	for _, name := range live {
		owned := f.current[name]
		if len(owned) != shards/len(live) && len(owned) != (shards+len(live)-1)/len(live) {
			return false, time.Time{}
		}
		for _, i := range owned {
			if i < 0 || i >= shards {
				return false, time.Time{}
			}
			owner[i]++
		}
		if f.changed[name].After(last) {
			last = f.changed[name]
		}
	}
	for _, c := range owner {
		if c != 1 {
			return false, time.Time{}
		}
	}
	return true, last
}

// waitSplit waits until the live movers split the shards evenly and
// requires that the state was reached within limit of since; it returns
// how long after since it was reached (0 if it held already).
func (f *fleet) waitSplit(t *testing.T, live []string, since time.Time, limit time.Duration) time.Duration {
	t.Helper()
	var at time.Time
	require.Eventually(t, func() bool {
		ok, last := f.split(live)
		at = last
		return ok
	}, limit+5*time.Second, 2*time.Millisecond, "movers %v never split the shards evenly: %s", live, f.describe(live...))
	took := max(at.Sub(since), 0)
	if !margin.LessOrEqual(t, fmt.Sprintf("split of %v", live), took, limit,
		"movers %v split the shards evenly %s after the change: %s", live, took, f.describe(live...)) {
		t.FailNow()
	}
	return took
}

// describe returns each mover's last report.
func (f *fleet) describe(names ...string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	parts := make([]string, len(names))
	for i, name := range names {
		parts[i] = fmt.Sprintf("%s=%v", name, f.current[name])
	}
	return strings.Join(parts, " ")
}
