package delaystream_test

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/internal/margin"
	"github.com/delaystream/delaystream/internal/redistest"
)

// stallLimit is how long a full-Redis test lets its queue go without
// handling anything before it calls the queue stuck.
const stallLimit = 30 * time.Second

// A queue filled until a noeviction server refuses Schedule drains by
// itself: every accepted message is delivered to every group exactly once,
// the server's used memory falls back under maxmemory as the groups
// acknowledge and the stream is trimmed, and Schedule is accepted again,
// with nobody raising maxmemory. One group fails every message once, so
// retries (and their promotion from the retry lane) run over the limit
// too; a third group dead-letters everything it reads.
func TestFullRedisDrains(t *testing.T) {
	t.Parallel()
	rdb, _ := memoryServer(t, "--maxmemory", "8mb", "--maxmemory-policy", "noeviction")
	testFullRedisDrains(t, rdb, func(context.Context, string) *redis.Client { return rdb })
}

// The same on a Cluster whose master that holds the queue's slot is at its
// limit.
func TestFullRedisDrainsCluster(t *testing.T) {
	t.Parallel()
	c, err := redistest.SpawnCluster(3, 0)
	require.NoError(t, err)
	t.Cleanup(c.Stop)
	rdb := c.Client()
	t.Cleanup(func() { _ = rdb.Close() })
	testFullRedisDrains(t, rdb, func(ctx context.Context, key string) *redis.Client {
		// The master of the queue's slot gets a limit a few MiB above
		// what it uses now: the fill reaches it in a few batches.
		addr, err := masterOf(ctx, rdb, key)
		require.NoError(t, err)
		master := redis.NewClient(redistest.Options(t, addr))
		t.Cleanup(func() { _ = master.Close() })
		used, _, err := usedMemory(ctx, master)
		require.NoError(t, err)
		require.NoError(t, master.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err())
		require.NoError(t, master.ConfigSet(ctx, "maxmemory", fmt.Sprint(used+6<<20)).Err())
		return master
	})
}

// testFullRedisDrains runs the scenario on rdb; server is called with one
// of the queue's keys before the fill, and returns a client of the server
// that holds it, with its limit set.
func testFullRedisDrains(t *testing.T, rdb redis.UniversalClient, server func(context.Context, string) *redis.Client) {
	ctx := context.Background()
	var logs logBuf
	running := map[string]*delaystream.Group{}   // the groups of the last start, for a failure's report
	started := map[string][]*delaystream.Group{} // every start's, by name
	prefix := redistest.Prefix(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the queue's log:\n%s", logs.String())
			t.Logf("the queue's state:\n%s", queueState(rdb, prefix))
			for name, g := range running {
				t.Logf("group %s's counters in this process: %+v", name, g.Counters())
			}
		}
	})
	// Every kind of group: plain, one that fails every first attempt (its
	// retries and their promotion from the retry lane), one that
	// dead-letters a tenth of the messages (those whose id ends in 0), one
	// under a concurrency cap and a rate limit, one with a per-key rate
	// limit.
	groups := []string{"billing", "flaky", "dead", "capped", "keyed"}
	var mu sync.Mutex
	got := map[string]map[string]int{}
	for _, name := range groups {
		got[name] = map[string]int{}
	}
	// start builds the queue and runs it, as a process does; it is called
	// again mid-episode, as a deployment would.
	var deadGroup *delaystream.Group
	start := func() (*delaystream.Queue, func()) {
		q, err := delaystream.New(rdb, "orders", delaystream.WithPrefix(prefix), delaystream.WithLogger(logs.logger()))
		require.NoError(t, err)
		for _, name := range groups {
			opts := []delaystream.GroupOption{delaystream.WithWorkers(8), delaystream.WithBackoff(delaystream.ConstantBackoff(10 * time.Millisecond))}
			switch name {
			case "dead":
				opts = append(opts, delaystream.WithMaxAttempts(1))
			case "capped":
				opts = append(opts, delaystream.WithConcurrencyLimit(4), delaystream.WithRateLimit(100000, time.Second, 1000))
			case "keyed":
				opts = append(opts, delaystream.WithKeyRateLimit(func(d *delaystream.Delivery) string { return d.ID }, 1000, time.Second, 1))
			}
			g, err := q.Handle(name, func(_ context.Context, d *delaystream.Delivery) error {
				if (name == "flaky" && d.Attempt == 1) || (name == "dead" && strings.HasSuffix(d.ID, "0")) {
					return fmt.Errorf("attempt %d of %s fails", d.Attempt, d.ID)
				}
				mu.Lock()
				defer mu.Unlock()
				got[name][d.ID]++
				return nil
			}, opts...)
			require.NoError(t, err)
			running[name] = g
			started[name] = append(started[name], g)
			if name == "dead" {
				deadGroup = g
			}
		}
		return q, startRun(t, q)
	}
	q, stop := start()
	// A first message delivered to every group: the groups exist and read.
	_, err := q.Schedule(ctx, delaystream.Message{ID: "canary"}, delaystream.After(0))
	require.NoError(t, err)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		mu.Lock()
		defer mu.Unlock()
		for _, name := range groups {
			assert.Equal(c, 1, got[name]["canary"], name)
		}
	}, 30*time.Second, 10*time.Millisecond)
	var srv *redis.Client
	for k := range redistest.Keys(t, rdb, prefix) {
		// The queue's record: every key of the queue is in its slot, and
		// it does not expire (a per-key rate limit's state does).
		if strings.HasSuffix(k, "}:q") {
			srv = server(ctx, k)
			break
		}
	}
	require.NotNil(t, srv, "the queue has keys")
	mem := func(ctx context.Context) (int64, int64, error) { return usedMemory(ctx, srv) }

	now, err := rdb.Time(ctx).Result()
	require.NoError(t, err)
	ids, err := fill(ctx, t, q, now.Add(2*time.Second))
	require.ErrorIs(t, err, delaystream.ErrOutOfMemory)
	require.NotEmpty(t, ids)
	dead := 0 // messages the group "dead" dead-letters
	for _, id := range ids {
		if strings.HasSuffix(id, "0") {
			dead++
		}
	}
	used, max, err := mem(ctx)
	require.NoError(t, err)
	t.Logf("%d messages accepted; used %d of %d bytes", len(ids), used, max)
	// A refused write leaves the server at its limit, but not always over
	// it: the last batch accepted may have ended just below. Promotion
	// growing the stream before trimming frees the set takes it over. The
	// limit is set a tenth under what is used, so that the drain starts
	// with every write that adds data refused.
	require.NoError(t, srv.ConfigSet(ctx, "maxmemory", fmt.Sprint(used*9/10)).Err())
	// A process restarted while the server is full starts, and drains.
	stop()
	q, stop = start()
	defer stop()

	// No manual step: the queue drains by itself. Its pace is the test
	// machine's (the capped group, four at a time, is the slowest), so the
	// wait fails only when no group handles anything for stallLimit.
	handled := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, name := range groups {
			n += len(got[name])
		}
		return n
	}
	complete := func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, name := range groups {
			want := len(ids) + 1
			if name == "dead" {
				want -= dead
			}
			if len(got[name]) != want {
				return false
			}
		}
		return true
	}
	drained := margin.Progress(t, "drain", complete, handled, stallLimit, 4*time.Minute, 100*time.Millisecond)
	if !drained {
		// Where a stalled group waits, while it still runs.
		mu.Lock()
		for _, name := range groups {
			t.Logf("group %s handled %d of %d", name, len(got[name]), len(ids)+1)
		}
		mu.Unlock()
		t.Logf("consumers' goroutines:\n%s", consumerStacks())
		t.Logf("the queue's state while it runs:\n%s", queueState(rdb, prefix))
		for name, g := range running {
			t.Logf("group %s's intake:\n%s", name, delaystream.DebugIntake(g))
		}
		t.FailNow()
	}
	mu.Lock()
	for _, name := range groups {
		// Each message once per group, but for entries a consumer's hold on
		// lapsed (its extensions late or failing while the full server was
		// slow): another consumer, or its own reclaimer, takes those over
		// and may run them again (at least once), and counts each takeover
		// as reclaimed. More runs than takeovers would be a duplicate the
		// design does not allow.
		var reclaimed uint64
		for _, g := range started[name] {
			reclaimed += g.Counters().Reclaimed
		}
		twice := 0
		for _, id := range ids {
			if name == "dead" && strings.HasSuffix(id, "0") {
				continue
			}
			if n := got[name][id]; n > 1 {
				twice += n - 1
				t.Logf("%s: %s handled %d times", name, id, n)
			}
		}
		assert.LessOrEqual(t, uint64(twice), reclaimed, "%s: runs beyond the first (%d) are at most the takeovers (%d)", name, twice, reclaimed)
	}
	mu.Unlock()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		used, max, err := mem(ctx)
		assert.NoError(c, err)
		assert.Less(c, used, max, "used memory under maxmemory")
	}, 30*time.Second, 100*time.Millisecond, "memory freed as the groups acknowledge")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		_, err := q.Schedule(ctx, delaystream.Message{ID: "after", Payload: []byte("x")}, delaystream.After(0))
		assert.NoError(c, err)
	}, 30*time.Second, 100*time.Millisecond, "Schedule accepted again")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		mu.Lock()
		defer mu.Unlock()
		for _, name := range groups {
			assert.Equal(c, 1, got[name]["after"], name)
		}
	}, 30*time.Second, 10*time.Millisecond, "the message scheduled after the episode delivered")
	// The group that fails a tenth dead-lettered each of them once.
	st, err := deadGroup.Stats(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(dead), st.DeadLetters, "dead letters")
	assert.Zero(t, deadGroup.Counters().MemoryRefused)
}

// queueState describes, for a failure's report, every stream of the keys
// under prefix (length, and each group's pending, lag and last delivered
// id) and every hash of flow state (its fields).
func queueState(rdb redis.UniversalClient, prefix string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var b strings.Builder
	var keys []string
	scan := func(ctx context.Context, c *redis.Client) error {
		it := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for it.Next(ctx) {
			keys = append(keys, it.Val())
		}
		return it.Err()
	}
	var err error
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		var mu sync.Mutex
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			mu.Lock()
			defer mu.Unlock()
			return scan(ctx, c)
		})
	} else {
		err = scan(ctx, rdb.(*redis.Client))
	}
	if err != nil {
		return "scan: " + err.Error()
	}
	for _, k := range keys {
		switch typ, _ := rdb.Type(ctx, k).Result(); typ {
		case "stream":
			n, _ := rdb.XLen(ctx, k).Result()
			fmt.Fprintf(&b, "%s: %d entries\n", k, n)
			gs, _ := rdb.XInfoGroups(ctx, k).Result()
			for _, g := range gs {
				fmt.Fprintf(&b, "  group %s: pending %d, lag %d, last delivered %s, consumers %d\n", g.Name, g.Pending, g.Lag, g.LastDeliveredID, g.Consumers)
				if g.Pending > 0 {
					ps, _ := rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: k, Group: g.Name, Start: "-", End: "+", Count: 10}).Result()
					for _, p := range ps {
						fmt.Fprintf(&b, "    pending %s: consumer %s, idle %s, deliveries %d\n", p.ID, p.Consumer, p.Idle, p.RetryCount)
					}
				}
			}
		case "zset":
			n, _ := rdb.ZCard(ctx, k).Result()
			fmt.Fprintf(&b, "%s: %d members\n", k, n)
		case "string":
			v, _ := rdb.Get(ctx, k).Result()
			ttl, _ := rdb.PTTL(ctx, k).Result()
			fmt.Fprintf(&b, "%s: %q, ttl %s\n", k, v, ttl)
		case "hash":
			if strings.Contains(k, ":f:") || strings.HasSuffix(k, ":q") || strings.HasSuffix(k, ":p") {
				all, _ := rdb.HGetAll(ctx, k).Result()
				fmt.Fprintf(&b, "%s: %v\n", k, all)
			}
		}
	}
	return b.String()
}

// consumerStacks returns the stacks of the goroutines that run in the
// consumers (intake, flow limits, workers), where a stalled group waits.
func consumerStacks() string {
	buf := make([]byte, 8<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "delaystream/internal/group.") {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}

// usedMemory returns a server's used_memory and maxmemory.
func usedMemory(ctx context.Context, rdb *redis.Client) (used, limit int64, err error) {
	info, err := rdb.InfoMap(ctx, "memory").Result()
	if err != nil {
		return 0, 0, err
	}
	m := info["Memory"]
	if _, err := fmt.Sscan(m["used_memory"], &used); err != nil {
		return 0, 0, err
	}
	if _, err := fmt.Sscan(m["maxmemory"], &limit); err != nil {
		return 0, 0, err
	}
	return used, limit, nil
}

// masterOf returns the address of the Cluster master that holds key (a
// key that exists): the others answer MOVED.
func masterOf(ctx context.Context, rdb *redis.ClusterClient, key string) (string, error) {
	var mu sync.Mutex
	var addr string
	err := rdb.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		if n, err := m.Exists(ctx, key).Result(); err == nil && n == 1 {
			mu.Lock()
			addr = m.Options().Addr
			mu.Unlock()
		}
		return nil
	})
	if err == nil && addr == "" {
		err = fmt.Errorf("no master holds %s", key)
	}
	return addr, err
}

// On a full server the calls that add data are refused with the
// ErrOutOfMemory text, never Redis's raw reply, and write nothing: a
// queue's first record (a new queue), pausing the queue, pausing a group,
// defining a recurring schedule.
func TestAddingWritesRefusedSayWhy(t *testing.T) {
	t.Parallel()
	rdb, _ := memoryServer(t, "--maxmemory-policy", "noeviction")
	ctx := context.Background()
	prefix := redistest.Prefix(t)
	q, err := delaystream.New(rdb, "orders", delaystream.WithPrefix(prefix), delaystream.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	g, err := q.Handle("billing", func(context.Context, *delaystream.Delivery) error { return nil })
	require.NoError(t, err)
	fresh, err := delaystream.New(rdb, "fresh", delaystream.WithPrefix(prefix), delaystream.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	_, err = q.Schedule(ctx, delaystream.Message{ID: "first"}, delaystream.After(time.Hour)) // the queue's record
	require.NoError(t, err)
	before := redistest.Keys(t, rdb, prefix)
	require.NoError(t, rdb.ConfigSet(ctx, "maxmemory", "1").Err())

	for name, call := range map[string]func() error{
		"pause the queue": func() error { return q.Pause(ctx) },
		"pause the group": func() error { return g.Pause(ctx) },
		"define recurring": func() error {
			_, err := q.DefineRecurring(ctx, delaystream.Recurring{ID: "tick", Spec: delaystream.Every(time.Minute)})
			return err
		},
		"a new queue": func() error {
			_, err := fresh.Schedule(ctx, delaystream.Message{ID: "x"}, delaystream.After(time.Hour))
			return err
		},
		"schedule": func() error {
			_, err := q.Schedule(ctx, delaystream.Message{ID: "y"}, delaystream.After(time.Hour))
			return err
		},
	} {
		err := call()
		require.ErrorIs(t, err, delaystream.ErrOutOfMemory, name)
		assert.Contains(t, err.Error(), "delaystream: write refused, nothing written: used ", name)
		assert.Equal(t, 1, strings.Count(err.Error(), "OOM command not allowed"), "%s: Redis's reply once, inside ours: %v", name, err)
	}
	require.NoError(t, rdb.ConfigSet(ctx, "maxmemory", "0").Err())
	assert.Equal(t, before, redistest.Keys(t, rdb, prefix), "nothing written")
}
