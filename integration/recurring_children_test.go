package integration

import (
	"cmp"
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/integration/internal/harness"
)

// The recurring children's schedule and groups.
const (
	recurSchedule = "tick"
	recurLedger   = ":ledger" // after the prefix: a LIST of "<group>|<occurrence>|<message id>|<entry id>"
)

var recurGroups = []string{"a", "b"}

// lineDefined is the line a recurring child prints once it defined its
// schedule: "defined <outcome>".
const lineDefined = "defined"

// recurringChild returns the Run of a child that serves a recurring
// schedule of cfg.Every (default 1 s) and cfg.Version: it defines it (kept
// after the first child), prints lineDefined, handles it in two groups
// that push each delivery to a ledger in Redis before acknowledging, and
// promotes and tops up.
func recurringChild(cfg childSpec, tc *tls.Config, logger *slog.Logger) (func(context.Context) error, error) {
	rdb := redis.NewClient(&redis.Options{Addr: cfg.Addrs[0], TLSConfig: tc})
	q, err := delaystream.New(rdb, cfg.Queue, delaystream.WithPrefix(cfg.Prefix), delaystream.WithShards(cfg.Shards),
		delaystream.WithRecurringHorizon(2*time.Second), delaystream.WithLogger(logger), delaystream.WithDrainTimeout(time.Second))
	if err != nil {
		return nil, err
	}
	for _, g := range recurGroups {
		_, err := q.Handle(g, func(ctx context.Context, d *delaystream.Delivery) error {
			rec := strings.Join([]string{g, d.Headers[delaystream.HeaderOccurrence], d.ID, d.EntryID}, "|")
			return rdb.RPush(ctx, cfg.Prefix+recurLedger, rec).Err()
		}, delaystream.WithVisibilityTimeout(2*time.Second))
		if err != nil {
			return nil, err
		}
	}
	return func(ctx context.Context) error {
		defer rdb.Close()
		every := cmp.Or(cfg.Every, time.Second)
		out, err := q.DefineRecurring(ctx, delaystream.Recurring{ID: recurSchedule, Spec: delaystream.Every(every), Payload: []byte("t"), Version: cfg.Version})
		if err != nil {
			return err
		}
		fmt.Println(lineDefined, out) // the only line before Run returns
		return q.Run(ctx)
	}, nil
}

// Two processes serve a 1 s schedule for about 40 s while one of them at a
// time is killed (SIGKILL) at a random moment and restarted after a random
// while: every group gets every occurrence from one stream entry (a
// killed handler's entry may be delivered again, never created again), and
// none is skipped.
func TestRecurringChildrenKilled(t *testing.T) {
	t.Parallel()
	for _, shards := range []int{1, 4} {
		t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) {
			t.Parallel()
			testRecurringChildrenKilled(t, shards)
		})
	}
}

func testRecurringChildrenKilled(t *testing.T, shards int) {
	ctx := t.Context()
	rdb, addr := harness.RedisAddr(t)
	prefix := harness.Prefix(t, rdb)
	spec := childSpec{Role: "recurring", Addrs: []string{addr}, Prefix: prefix, Queue: "ticks", Shards: shards}
	procs := []*proc{startProc(t, "recurring-1", spec), startProc(t, "recurring-2", spec)}
	kills := 0
	end := time.Now().Add(40 * time.Second)
	for time.Now().Before(end) {
		i := rand.IntN(2)
		time.Sleep(time.Duration(500+rand.IntN(3500)) * time.Millisecond) // a random moment
		procs[i].kill()
		kills++
		time.Sleep(time.Duration(rand.IntN(2000)) * time.Millisecond) // down for a random while
		procs[i] = startProc(t, fmt.Sprintf("recurring-%d.%d", i+1, kills), spec)
	}
	q, err := delaystream.New(rdb, "ticks", delaystream.WithPrefix(prefix), delaystream.WithShards(shards))
	require.NoError(t, err)
	require.NoError(t, q.DeleteRecurring(ctx, recurSchedule))
	deleted := redisNow(ctx, t, rdb)

	type rec struct{ entries map[string]bool }
	var got map[string]map[string]*rec // group -> occurrence -> its stream entries
	read := func() {
		lines, err := rdb.LRange(ctx, prefix+recurLedger, 0, -1).Result()
		require.NoError(t, err)
		got = map[string]map[string]*rec{}
		for _, l := range lines {
			f := strings.Split(l, "|")
			require.Len(t, f, 4, l)
			if got[f[0]] == nil {
				got[f[0]] = map[string]*rec{}
			}
			r := got[f[0]][f[1]]
			if r == nil {
				r = &rec{entries: map[string]bool{}}
				got[f[0]][f[1]] = r
			}
			r.entries[f[3]] = true
		}
	}
	times := func(g string) []time.Time {
		var ts []time.Time
		for occ := range got[g] {
			at, err := time.Parse(time.RFC3339Nano, occ)
			require.NoError(t, err)
			ts = append(ts, at)
		}
		slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
		return ts
	}
	// Everything due before the delete reaches both groups (a killed
	// handler's entry after its visibility timeout).
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		read()
		for _, g := range recurGroups {
			ts := times(g)
			if assert.NotEmpty(c, ts, g) {
				assert.GreaterOrEqual(c, ts[len(ts)-1], deleted.Add(-1500*time.Millisecond).Truncate(time.Second), g)
			}
		}
	}, 30*time.Second, 100*time.Millisecond)
	for _, p := range procs {
		p.signal(syscall.SIGTERM)
	}
	read()
	for _, g := range recurGroups {
		ts := times(g)
		require.GreaterOrEqual(t, len(ts), 30, "group %s", g)
		for i := 1; i < len(ts); i++ {
			assert.Equal(t, time.Second, ts[i].Sub(ts[i-1]), "group %s: skipped after %s", g, ts[i-1])
		}
		for occ, r := range got[g] {
			assert.Len(t, r.entries, 1, "group %s: occurrence %s created more than once", g, occ)
		}
	}
	t.Logf("%d kills, %d occurrences", kills, len(got["a"]))
}

// A rollout from Every(1s) at version 1 to Every(2s) at version 2, with
// real processes: an old-version process killed and restarted after the
// new one defined its schedule defines the old one again, which is kept
// out; and once the new process is gone, the old one alone keeps serving
// the new definition (it reads it from Redis). Every occurrence from the
// restart on is at an even second, of the same revision.
func TestRecurringRollout(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	rdb, addr := harness.RedisAddr(t)
	prefix := harness.Prefix(t, rdb)
	oldSpec := childSpec{Role: "recurring", Addrs: []string{addr}, Prefix: prefix, Queue: "ticks", Shards: 1,
		Every: time.Second, Version: 1}
	newSpec := oldSpec
	newSpec.Every, newSpec.Version = 2*time.Second, 2
	q, err := delaystream.New(rdb, "ticks", delaystream.WithPrefix(prefix), delaystream.WithoutPromotion())
	require.NoError(t, err)

	old := startProc(t, "old-1", oldSpec)
	requireLine(t, old, lineDefined+" "+delaystream.OutcomeCreated.String())
	newer := startProc(t, "new-1", newSpec)
	requireLine(t, newer, lineDefined+" "+delaystream.OutcomeReplaced.String())
	st, err := q.GetRecurring(ctx, recurSchedule)
	require.NoError(t, err)
	require.Equal(t, uint64(2), st.Version)
	rev := st.Revision

	// The old process crashes and comes back after the new one defined.
	old.kill()
	old = startProc(t, "old-2", oldSpec)
	requireLine(t, old, lineDefined+" "+delaystream.OutcomeKept.String())
	restarted := redisNow(ctx, t, rdb)
	// The new process goes: the old one serves the schedule alone.
	newer.kill()
	alone := redisNow(ctx, t, rdb)

	st, err = q.GetRecurring(ctx, recurSchedule)
	require.NoError(t, err)
	assert.Equal(t, "2s", st.SpecText)
	assert.Equal(t, uint64(2), st.Version)
	assert.Equal(t, rev, st.Revision, "no new revision")

	suffix := "#" + strconv.FormatInt(rev, 10)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		lines, err := rdb.LRange(ctx, prefix+recurLedger, 0, -1).Result()
		require.NoError(c, err)
		after := 0
		for _, l := range lines {
			f := strings.Split(l, "|")
			if !assert.Len(c, f, 4, l) || f[0] != "a" {
				continue
			}
			occ, err := time.Parse(time.RFC3339Nano, f[1])
			require.NoError(c, err)
			if occ.Before(restarted) {
				continue
			}
			assert.Zero(c, occ.UnixMilli()%2000, "occurrence %s (%s) after the old process came back", f[1], f[2])
			assert.True(c, strings.HasSuffix(f[2], suffix), "occurrence %s of revision %d", f[2], rev)
			if occ.After(alone) {
				after++
			}
		}
		assert.GreaterOrEqual(c, after, 3, "occurrences served by the old process alone")
	}, 30*time.Second, 100*time.Millisecond)
	old.signal(syscall.SIGTERM)
	require.NoError(t, old.waitExit(t, 10*time.Second))
}

// requireLine waits until child p prints line.
func requireLine(t *testing.T, p *proc, line string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-p.lines:
			require.True(t, ok, "child %s exited before printing %q; stderr:\n%s", p.name, line, p.stderr.String())
			if l.text == line {
				return
			}
			require.False(t, strings.HasPrefix(l.text, lineDefined), "child %s: %q, want %q", p.name, l.text, line)
		case <-deadline:
			t.Fatalf("child %s did not print %q within 30 s; stderr:\n%s", p.name, line, p.stderr.String())
		}
	}
}
