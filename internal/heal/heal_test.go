package heal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	"github.com/delaystream/delaystream/internal/redistest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

type reply string

func (r reply) Error() string { return string(r) }
func (reply) RedisError()     {}

func TestSuggests(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  error
		want bool
	}{
		{io.EOF, true},
		{fmt.Errorf("dial tcp 127.0.0.1:1: connect: connection refused"), true},
		{context.DeadlineExceeded, true},
		{reply("CLUSTERDOWN The cluster is down"), true},
		{reply("READONLY You can't write against a read only replica."), true},
		{reply("MOVED 3999 127.0.0.1:6381"), true},
		{fmt.Errorf("promote: %w", reply("TRYAGAIN Multiple keys request during rehashing of slot")), true},
		{reply("WRONGTYPE Operation against a key holding the wrong kind of value"), false},
		{reply("ERR user_script:1: Script attempted to access nonexistent global variable"), false},
		{reply("NOGROUP No such key"), false},
	}
	for _, tt := range tests {
		if got := Suggests(tt.err); got != tt.want {
			t.Errorf("Suggests(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
	var _ redis.Error = reply("")
	if Suggests(errors.New("x")) != true {
		t.Errorf("a plain error (network) must suggest a reload")
	}
}

// cluster starts a cluster of 3 masters for t alone, and a client of it.
func cluster(t *testing.T) (*redistest.Cluster, *redis.ClusterClient) {
	t.Helper()
	c, err := redistest.SpawnCluster(3, 0)
	require.NoError(t, err, "a local cluster needs redis-server (apt-get install -y redis-server)")
	t.Cleanup(c.Stop)
	rdb := c.Client()
	t.Cleanup(func() { _ = rdb.Close() })
	require.NoError(t, rdb.Ping(context.Background()).Err())
	return c, rdb
}

func TestWatchOnAClusterFiresWhenTheSlotHasAnotherMaster(t *testing.T) {
	t.Parallel()
	_, rdb := cluster(t)
	ctx := context.Background()
	master := MasterOf(ctx, rdb, "k")
	require.NotEmpty(t, master)

	// From the master that serves the slot: nothing moves.
	var w Watch
	w.Start(ctx, rdb, "k", "")
	bctx, cancel := w.Bound(ctx)
	select {
	case <-w.Moved():
		t.Fatal("the watch fired while the slot kept its master")
	case <-bctx.Done():
		t.Fatal("the bound context ended while the slot kept its master")
	case <-time.After(700 * time.Millisecond): // several checks and reloads
	}
	cancel()
	w.End()
	require.Nil(t, w.Moved(), "an ended watch watches nothing")

	// From another address (the calls failed on a node that no longer
	// serves the slot): it fires at the first check, and ends a bound call.
	w.Start(ctx, rdb, "k", "127.0.0.1:1")
	defer w.End()
	bctx, cancel = w.Bound(ctx)
	defer cancel()
	select {
	case <-bctx.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("the bound context did not end once the slot had another master")
	}
	select {
	case <-w.Moved():
	default:
		t.Fatal("Moved is not closed")
	}
}

func TestWatchWithoutAClusterWatchesNothing(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	require.Empty(t, MasterOf(ctx, rdb, "k"))
	var w Watch
	w.Start(ctx, rdb, "k", "127.0.0.1:2")
	defer w.End()
	require.Nil(t, w.Moved())
	bctx, cancel := w.Bound(ctx)
	defer cancel()
	require.Equal(t, ctx, bctx, "no watch: the context is the caller's")
}

// TestCutIfMovedOnAResharding moves a slot to another master (CLUSTER
// SETSLOT on every master, the slot empty) while a "call" runs: the call's
// context is cancelled once the client's map says so, and not before.
func TestCutIfMovedOnAResharding(t *testing.T) {
	t.Parallel()
	c, rdb := cluster(t)
	ctx := context.Background()
	const key = "cut{k}"
	from := MasterOf(ctx, rdb, key)
	require.NotEmpty(t, from)

	call, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := CutIfMoved(call, cancel, rdb, key, from, 50*time.Millisecond)
	defer stop()
	select {
	case <-call.Done():
		t.Fatal("cut while the slot kept its master")
	case <-time.After(600 * time.Millisecond):
	}

	slot, err := rdb.ClusterKeySlot(ctx, key).Result()
	require.NoError(t, err)
	ids := map[string]string{} // address -> node id
	for _, a := range c.Addrs {
		n := redis.NewClient(redistest.Options(t, a))
		id, err := n.Do(ctx, "CLUSTER", "MYID").Text()
		require.NoError(t, err)
		ids[a] = id
		_ = n.Close()
	}
	var to string
	for a := range ids {
		if a != from {
			to = a
			break
		}
	}
	for _, a := range c.Addrs {
		n := redis.NewClient(redistest.Options(t, a))
		require.NoError(t, n.Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", ids[to]).Err())
		_ = n.Close()
	}
	moved := time.Now()
	select {
	case <-call.Done():
		t.Logf("cut %s after the slot moved", time.Since(moved).Round(time.Millisecond))
	case <-time.After(3 * time.Second):
		t.Fatal("not cut within 3 s of the slot's move")
	}
	require.Equal(t, to, MasterOf(ctx, rdb, key))

	// Disarmed before it fires: never cut.
	call2, cancel2 := context.WithCancel(ctx)
	defer cancel2()
	require.True(t, CutIfMoved(call2, cancel2, rdb, key, to, time.Hour)(), "a timer not yet fired is stopped")
	require.NoError(t, call2.Err())
}
