package shardsub

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/delaystream/delaystream/internal/redistest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// recorder collects what Run reports.
type recorder struct {
	mu     sync.Mutex
	msgs   map[string][]string
	resets int
	lost   map[string]int // first channel of a group -> OnLost calls naming it
}

func newRecorder() *recorder { return &recorder{msgs: map[string][]string{}, lost: map[string]int{}} }

func (r *recorder) config(groups [][]string) Config {
	return Config{
		Groups: groups,
		OnMessage: func(ch, p string) {
			r.mu.Lock()
			r.msgs[ch] = append(r.msgs[ch], p)
			r.mu.Unlock()
		},
		OnReset: func() {
			r.mu.Lock()
			r.resets++
			r.mu.Unlock()
		},
		OnLost: func(groups [][]string) {
			r.mu.Lock()
			for _, g := range groups {
				r.lost[g[0]]++
			}
			r.mu.Unlock()
		},
		Health: time.Second,
	}
}

// lostGroups returns the first channel of each group OnLost named.
func (r *recorder) lostGroups() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for ch := range r.lost {
		out = append(out, ch)
	}
	sort.Strings(out)
	return out
}

// lostCount returns how many OnLost calls named the group whose first
// channel is ch: the failed attempts to subscribe it.
func (r *recorder) lostCount(ch string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lost[ch]
}

func (r *recorder) got(ch string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.msgs[ch]...)
}

func (r *recorder) resetCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.resets
}

// groupsOf returns n groups of two channels each, one hash tag per group.
func groupsOf(prefix string, n int) [][]string {
	var gs [][]string
	for i := range n {
		tag := fmt.Sprintf("{%s:%d}", prefix, i)
		gs = append(gs, []string{tag + ":a", tag + ":b"})
	}
	return gs
}

// start runs Run until the test ends and waits for every node's first
// reset (all subscribed).
func start(t *testing.T, rdb redis.UniversalClient, cfg Config, r *recorder, nodes int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, rdb, cfg) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(5 * time.Second):
			t.Error("Run did not return within 5 s of its context's end")
		}
	})
	require.Eventually(t, func() bool { return r.resetCount() >= nodes }, 10*time.Second, 5*time.Millisecond)
}

// publishAll publishes tag i's two channels, with pub.
func publishAll(t *testing.T, ctx context.Context, groups [][]string, pub func(ch, msg string) error, round int) {
	t.Helper()
	for _, g := range groups {
		for _, ch := range g {
			require.NoError(t, pub(ch, fmt.Sprint(round)))
		}
	}
}

func waitAll(t *testing.T, r *recorder, groups [][]string, want int) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, g := range groups {
			for _, ch := range g {
				if len(r.got(ch)) < want {
					return false
				}
			}
		}
		return true
	}, 10*time.Second, 5*time.Millisecond)
}

func TestStandaloneResubscribesAfterKill(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	groups := groupsOf(prefix, 5)
	r := newRecorder()
	start(t, rdb, r.config(groups), r, 1)
	require.Equal(t, 1, r.resetCount())

	pub := func(ch, m string) error { return rdb.SPublish(ctx, ch, m).Err() }
	publishAll(t, ctx, groups, pub, 1)
	waitAll(t, r, groups, 1)

	// Kill the subscriber's connection: Run resubscribes and reports a reset.
	n, err := rdb.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Int()
	require.NoError(t, err)
	require.Positive(t, n)
	require.Eventually(t, func() bool { return r.resetCount() >= 2 }, 10*time.Second, 5*time.Millisecond)
	publishAll(t, ctx, groups, pub, 2)
	waitAll(t, r, groups, 2)
	for _, g := range groups {
		for _, ch := range g {
			require.Equal(t, "2", r.got(ch)[len(r.got(ch))-1], ch)
		}
	}
}

func TestClusterOneConnectionPerNode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, err := redistest.SpawnCluster(3, 0)
	require.NoError(t, err, "a local cluster needs redis-server (apt-get install -y redis-server)")
	t.Cleanup(c.Stop)
	rdb := c.Client()
	t.Cleanup(func() { _ = rdb.Close() })
	groups := groupsOf("q", 24) // 24 slots spread over the 3 masters
	nodesUsed := map[string]bool{}
	for _, g := range groups {
		m, err := rdb.MasterForKey(ctx, g[0])
		require.NoError(t, err)
		nodesUsed[m.Options().Addr] = true
	}
	require.Len(t, nodesUsed, 3, "the groups' slots should cover every master")

	r := newRecorder()
	start(t, rdb, r.config(groups), r, 3)
	pub := func(ch, m string) error { return rdb.SPublish(ctx, ch, m).Err() }
	publishAll(t, ctx, groups, pub, 1)
	waitAll(t, r, groups, 1)

	// One pub/sub connection on each master, whatever the number of slots.
	subscribers := func() map[string][]string {
		out := map[string][]string{}
		var mu sync.Mutex
		err := rdb.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			list, err := m.ClientList(ctx).Result()
			if err != nil {
				return err
			}
			for _, line := range strings.Split(list, "\n") {
				if strings.Contains(line, "ssub=") && !strings.Contains(line, "ssub=0") {
					mu.Lock()
					out[m.Options().Addr] = append(out[m.Options().Addr], strings.Fields(line)[0]) // id=N
					mu.Unlock()
				}
			}
			return nil
		})
		require.NoError(t, err)
		return out
	}
	before := subscribers()
	require.Len(t, before, 3)
	for addr, ids := range before {
		require.Len(t, ids, 1, addr)
	}

	// A connection that fails is rebuilt alone: the other nodes' stay.
	var victim string
	for addr := range before {
		victim = addr
		break
	}
	m := redis.NewClient(redistest.Options(t, victim))
	t.Cleanup(func() { _ = m.Close() })
	require.NoError(t, m.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err())
	require.Eventually(t, func() bool { return r.resetCount() >= 4 }, 10*time.Second, 5*time.Millisecond)
	defer func() { assert.Equal(t, 4, r.resetCount(), "only the rebuilt connection reports a reset") }()
	// OnLost named the killed connection's groups, and only those.
	var onVictim []string
	for _, g := range groups {
		m, err := rdb.MasterForKey(ctx, g[0])
		require.NoError(t, err)
		if m.Options().Addr == victim {
			onVictim = append(onVictim, g[0])
		}
	}
	sort.Strings(onVictim)
	require.NotEmpty(t, onVictim)
	assert.Equal(t, onVictim, r.lostGroups(), "the groups of the failed connection are reported lost")
	after := subscribers()
	for addr, ids := range after {
		require.Len(t, ids, 1, addr)
		if addr == victim {
			require.NotEqual(t, before[addr], ids, "the killed connection was replaced")
		} else {
			require.Equal(t, before[addr], ids, "the other nodes' connections were kept")
		}
	}
	publishAll(t, ctx, groups, pub, 2)
	waitAll(t, r, groups, 2)
}

func TestClassicFallbackWithoutShardChannels(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	groups := groupsOf("q", 3)
	r := newRecorder()
	start(t, rdb, r.config(groups), r, 1)
	pub := func(ch, m string) error { return rdb.Publish(ctx, ch, m).Err() }
	publishAll(t, ctx, groups, pub, 7)
	waitAll(t, r, groups, 1)
	require.Equal(t, []string{"7"}, r.got(groups[2][1]))
}

// TestClusterFollowsPromotedReplica kills the master that serves the
// subscriptions, keeps its replica from taking over by itself until the
// resubscription's backoff has grown to its cap, then promotes it: the
// subscriptions move to it within a second of the promotion, not after
// another backoff (2.5 s or more at the cap) and a second one for the
// slot map that the failed attempt reloaded.
func TestClusterFollowsPromotedReplica(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, err := redistest.SpawnCluster(3, 1)
	require.NoError(t, err, "a local cluster needs redis-server (apt-get install -y redis-server)")
	t.Cleanup(c.Stop)
	rdb := c.Client()
	t.Cleanup(func() { _ = rdb.Close() })

	all := groupsOf("f", 24)
	m, err := rdb.MasterForKey(ctx, all[0][0])
	require.NoError(t, err)
	victim := m.Options().Addr
	var groups [][]string
	for _, g := range all {
		m, err := rdb.MasterForKey(ctx, g[0])
		require.NoError(t, err)
		if m.Options().Addr == victim {
			groups = append(groups, g)
		}
	}
	var replica *redis.Client
	var victimServer *redistest.Server
	for _, s := range c.Servers() {
		if s.Addr == victim {
			victimServer = s
			continue
		}
		n := redis.NewClient(redistest.Options(t, s.Addr))
		t.Cleanup(func() { _ = n.Close() })
		role, err := n.Do(ctx, "ROLE").Slice()
		require.NoError(t, err)
		if role[0] == "slave" && fmt.Sprintf("%v:%v", role[1], role[2]) == victim {
			replica = n
		}
	}
	require.NotNil(t, replica, "the victim's replica")
	require.NotNil(t, victimServer)
	require.NoError(t, replica.ConfigSet(ctx, "cluster-replica-no-failover", "yes").Err())

	r := newRecorder()
	start(t, rdb, r.config(groups), r, 1)
	victimServer.Stop()
	// The backoff doubles from 100 ms after each failed attempt: after the
	// 7th it is at its 5 s cap (a wait of 2.5 to 5 s).
	require.Eventually(t, func() bool { return r.lostCount(groups[0][0]) >= 7 }, 30*time.Second, 5*time.Millisecond,
		"the resubscription fails, and backs off, 7 times")
	resets := r.resetCount()
	require.Equal(t, 1, resets, "no subscription while the master is down and not replaced")

	require.NoError(t, replica.Do(ctx, "CLUSTER", "FAILOVER", "FORCE").Err())
	require.Eventually(t, func() bool {
		role, err := replica.Do(ctx, "ROLE").Slice()
		return err == nil && role[0] == "master"
	}, 10*time.Second, 10*time.Millisecond)
	promoted := time.Now()
	require.Eventually(t, func() bool { return r.resetCount() > resets }, 15*time.Second, 5*time.Millisecond)
	took := time.Since(promoted)
	t.Logf("resubscribed %s after the replica's promotion", took.Round(time.Millisecond))
	assert.Less(t, took, 1500*time.Millisecond, "subscriptions follow the promoted replica")

	pub := func(ch, m string) error { return replica.SPublish(ctx, ch, m).Err() }
	publishAll(t, ctx, groups, pub, 1)
	waitAll(t, r, groups, 1)
}
