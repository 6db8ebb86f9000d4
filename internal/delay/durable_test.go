package delay_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/internal/delay"
	"github.com/delaystream/delaystream/internal/redistest"
)

// spawn starts a redis-server with extra arguments, stopped when t ends.
func spawn(t *testing.T, extra ...string) *redistest.Server {
	t.Helper()
	s, err := redistest.Spawn(extra...)
	require.NoError(t, err)
	t.Cleanup(s.Stop)
	return s
}

// client returns a client with options o (plus, in TLS mode, the TLS
// configuration), closed when t ends.
func client(t *testing.T, o redis.Options) *redis.Client {
	t.Helper()
	o.TLSConfig = redistest.TLSConfig(t)
	c := redis.NewClient(&o)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// masterWithReplica starts a master and a replica of it and returns their
// addresses once the replica's link to the master is up and the master
// counts it (bounded wait).
func masterWithReplica(t *testing.T) (master, replica string) {
	t.Helper()
	m := spawn(t, "--repl-diskless-sync-delay", "0")
	_, port, err := net.SplitHostPort(m.Addr)
	require.NoError(t, err)
	r := spawn(t, "--replicaof", "127.0.0.1", port)
	waitLinked(t, m.Addr, []string{r.Addr})
	return m.Addr, r.Addr
}

// waitLinked waits (at most 10 s) until every replica reports its link to
// its master up and master has them all online (a replica that has just
// loaded its copy is online, and counted by WAIT, only once the master
// got its first acknowledgement).
func waitLinked(t *testing.T, master string, replicas []string) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for _, addr := range append(replicas, master) {
		c := client(t, redis.Options{Addr: addr})
		require.EventuallyWithT(t, func(ct *assert.CollectT) {
			info, err := c.Info(ctx, "replication").Result()
			require.NoError(ct, err)
			if addr == master {
				assert.Equal(ct, len(replicas), strings.Count(info, ",state=online,"), info)
			} else {
				assert.Contains(ct, info, "master_link_status:up")
			}
		}, time.Until(deadline), 20*time.Millisecond, "%s: replication not up within 10s", addr)
	}
	// Even then, a fresh replica may not confirm the very first write
	// within a few hundred ms: write and WAIT until they all confirm.
	c := client(t, redis.Options{Addr: master})
	for {
		var wait *redis.IntCmd
		_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, "probe", "x", 0)
			wait = redis.NewIntCmd(ctx, "wait", len(replicas), 100)
			return p.Process(ctx, wait)
		})
		if err == nil && wait.Val() == int64(len(replicas)) {
			return
		}
		require.True(t, time.Now().Before(deadline), "%s: replicas do not confirm writes within 10s: %v", master, err)
	}
}

func TestWithReplicaAckOptions(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	failover := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"127.0.0.1:1"}})
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	t.Cleanup(func() {
		for _, c := range []redis.UniversalClient{rdb, cluster, failover, ring} {
			_ = c.Close()
		}
	})
	tests := []struct {
		name     string
		rdb      redis.UniversalClient
		replicas int
		timeout  time.Duration
		msg      string // substring of the error; "" = valid
	}{
		{name: "least", rdb: rdb, replicas: 1, timeout: time.Millisecond},
		{name: "most", rdb: rdb, replicas: 16, timeout: time.Minute},
		{name: "cluster client", rdb: cluster, replicas: 1, timeout: 100 * time.Millisecond},
		{name: "sentinel failover client", rdb: failover, replicas: 2, timeout: time.Second},
		{name: "no replicas", rdb: rdb, replicas: 0, timeout: time.Second, msg: "replicas to wait for must be 1..16, got 0"},
		{name: "negative replicas", rdb: rdb, replicas: -1, timeout: time.Second, msg: "replicas to wait for must be 1..16, got -1"},
		{name: "too many replicas", rdb: rdb, replicas: 17, timeout: time.Second, msg: "replicas to wait for must be 1..16, got 17"},
		{name: "zero timeout", rdb: rdb, replicas: 1, msg: "replica wait timeout must be 1ms..1m, got 0s"},
		{name: "negative timeout", rdb: rdb, replicas: 1, timeout: -time.Second, msg: "replica wait timeout must be 1ms..1m, got -1s"},
		{name: "timeout under 1ms", rdb: rdb, replicas: 1, timeout: 999 * time.Microsecond, msg: "replica wait timeout must be 1ms..1m, got 999µs"},
		{name: "timeout over 1m", rdb: rdb, replicas: 1, timeout: time.Minute + time.Millisecond, msg: "replica wait timeout must be 1ms..1m, got 1m0.001s"},
		{name: "ring client", rdb: ring, replicas: 1, timeout: time.Second, msg: "WithReplicaAck needs a *redis.Client or *redis.ClusterClient (WAIT must follow the writes on their connection), got *redis.Ring"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			q, err := delay.New(tt.rdb, "orders", delay.WithReplicaAck(tt.replicas, tt.timeout))
			if tt.msg == "" {
				require.NoError(t, err)
				require.NotNil(t, q)
				return
			}
			require.Error(t, err)
			assert.Nil(t, q)
			assert.ErrorIs(t, err, delay.ErrInvalidOption)
			assert.Equal(t, "delaystream: invalid option: "+tt.msg, err.Error())
		})
	}
}

// With a replica linked, every durable write is on the replica when the
// call returns: the test reads the replica at once, without waiting. Both
// ways of sending WAIT are covered: inside the pipeline, and after it on
// the same connection when the timeout does not fit in the client's read
// timeout.
func TestReplicaAckReplicated(t *testing.T) {
	t.Parallel()
	master, replicaAddr := masterWithReplica(t)
	replica := client(t, redis.Options{Addr: replicaAddr})
	for _, tc := range []struct {
		name string
		opts redis.Options
	}{
		{"WAIT in the pipeline", redis.Options{Addr: master}},
		{"WAIT after the pipeline", redis.Options{Addr: master, ReadTimeout: 500 * time.Millisecond}}, // 1 s + slack > 500 ms
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			rdb := client(t, tc.opts)
			q, err := delay.New(rdb, "orders", delay.WithPrefix(redistest.Prefix(t)),
				delay.WithReplicaAck(1, time.Second), delay.WithShards(4), delay.WithBatchSize(3))
			require.NoError(t, err)
			l := q.Layout()
			onReplica := func(id string) (time.Time, bool) {
				t.Helper()
				lane := l.Shard(l.ShardOf(id)).Main()
				score, err := replica.ZScore(ctx, lane.Delayed, id).Result()
				if errors.Is(err, redis.Nil) {
					return time.Time{}, false
				}
				require.NoError(t, err)
				ok, err := replica.HExists(ctx, lane.Envelopes, id).Result()
				require.NoError(t, err)
				require.True(t, ok, "%s: due time on the replica but no envelope", id)
				return time.UnixMilli(int64(score)), true
			}

			// The first call also loads the scripts: its EVALSHA is
			// answered NOSCRIPT, loaded, and sent again with its WAIT.
			for i := range 20 {
				id := fmt.Sprintf("order:%d", i)
				res, err := q.Schedule(ctx, delay.Message{ID: id, Payload: []byte("x")}, delay.After(time.Hour))
				require.NoError(t, err)
				due, ok := onReplica(id)
				require.True(t, ok, "%s not on the replica when Schedule returned", id)
				require.True(t, res.Due.Equal(due), "%s: due %v on the replica, %v scheduled", id, due, res.Due)
			}

			// A batch of caller and generated ids over 4 shards in calls of
			// 3 (both schedule scripts), once after the script cache is
			// flushed: every call answered NOSCRIPT is sent again.
			for round := range 2 {
				if round == 1 {
					require.NoError(t, rdb.ScriptFlush(ctx).Err())
				}
				items := make([]delay.Item, 30)
				for i := range items {
					items[i].When = delay.After(time.Hour)
					if i%3 != 0 {
						items[i].Message.ID = fmt.Sprintf("batch%d:%d", round, i)
					}
				}
				res, err := q.ScheduleBatch(ctx, items)
				require.NoError(t, err)
				var generated int
				for i, r := range res {
					require.Equal(t, delay.Created, r.Outcome, "item %d", i)
					if items[i].Message.ID == "" {
						generated++
						continue
					}
					_, ok := onReplica(r.ID)
					require.True(t, ok, "%s not on the replica when ScheduleBatch returned", r.ID)
				}
				require.Equal(t, 10, generated)
			}
			var onMaster, onRepl int64
			for s := range l.Shards() {
				n, err := rdb.ZCard(ctx, l.Shard(s).Main().Delayed).Result()
				require.NoError(t, err)
				onMaster += n
				n, err = replica.ZCard(ctx, l.Shard(s).Main().Delayed).Result()
				require.NoError(t, err)
				onRepl += n
			}
			assert.EqualValues(t, 80, onMaster)
			assert.Equal(t, onMaster, onRepl, "generated ids on the replica too")

			due, err := q.Reschedule(ctx, "order:1", delay.After(2*time.Hour))
			require.NoError(t, err)
			got, ok := onReplica("order:1")
			require.True(t, ok)
			assert.True(t, due.Equal(got), "rescheduled to %v, the replica has %v", due, got)

			gone, err := q.Cancel(ctx, "order:2")
			require.NoError(t, err)
			require.True(t, gone)
			_, ok = onReplica("order:2")
			assert.False(t, ok, "cancelled on the master, still waiting on the replica")
		})
	}
}

// Without a replica, a durable write still happens on the master, and the
// call reports it with its results and an error wrapping ErrNotReplicated
// after the timeout. Calls that wrote nothing report no such error.
func TestReplicaAckNotReplicated(t *testing.T) {
	t.Parallel()
	master := spawn(t).Addr
	for _, tc := range []struct {
		name string
		opts redis.Options
	}{
		{"WAIT in the pipeline", redis.Options{Addr: master}},
		{"WAIT after the pipeline", redis.Options{Addr: master, ReadTimeout: 500 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			rdb := client(t, tc.opts)
			const timeout = 100 * time.Millisecond
			q, err := delay.New(rdb, "orders", delay.WithPrefix(redistest.Prefix(t)), delay.WithReplicaAck(1, timeout))
			require.NoError(t, err)

			start := time.Now()
			res, err := q.Schedule(ctx, delay.Message{ID: "order:1", Payload: []byte("x")}, delay.After(time.Hour))
			took := time.Since(start)
			require.ErrorIs(t, err, delay.ErrNotReplicated)
			assert.Equal(t, "schedule orders: delaystream: write not confirmed by enough replicas: on master "+master+
				": 0 of 1 replicas confirmed within 100ms; the write is on the master but is lost if the master fails before a replica has it", err.Error())
			assert.GreaterOrEqual(t, took, timeout, "returned before the WAIT timed out")
			assert.Less(t, took, timeout+time.Second)
			assert.Equal(t, delay.Created, res.Outcome, "the result comes with the error")
			assert.Equal(t, "order:1", res.ID)
			env, err := q.Get(ctx, "order:1")
			require.NoError(t, err, "the message is on the master")
			assert.Equal(t, "x", string(env.Payload))
			assert.True(t, res.Due.Equal(env.Due))

			// A retry under Keep is safe and still not confirmed.
			again, err := q.Schedule(ctx, delay.Message{ID: "order:1", Payload: []byte("y")}, delay.After(time.Hour))
			require.ErrorIs(t, err, delay.ErrNotReplicated)
			assert.Equal(t, delay.Kept, again.Outcome)

			// Reject: the duplicate error and the replication one.
			_, err = q.Schedule(ctx, delay.Message{ID: "order:1", OnDuplicate: delay.Reject}, delay.After(time.Hour))
			require.ErrorIs(t, err, delay.ErrDuplicate)
			require.ErrorIs(t, err, delay.ErrNotReplicated)

			// A batch: every result, one error.
			items := []delay.Item{{When: delay.After(time.Hour)}, {Message: delay.Message{ID: "order:2"}, When: delay.After(time.Hour)}}
			results, err := q.ScheduleBatch(ctx, items)
			require.ErrorIs(t, err, delay.ErrNotReplicated)
			require.Len(t, results, 2)
			for i, r := range results {
				assert.Equal(t, delay.Created, r.Outcome, "item %d", i)
				assert.NotEmpty(t, r.ID, "item %d", i)
				_, err := q.Get(ctx, r.ID)
				assert.NoError(t, err, "item %d on the master", i)
			}

			due, err := q.Reschedule(ctx, "order:2", delay.After(2*time.Hour))
			require.ErrorIs(t, err, delay.ErrNotReplicated)
			assert.False(t, due.IsZero(), "the new due time comes with the error")
			_, err = q.Reschedule(ctx, "none", delay.After(time.Hour))
			require.ErrorIs(t, err, delay.ErrNotFound)
			assert.NotErrorIs(t, err, delay.ErrNotReplicated, "nothing written")

			ok, err := q.Cancel(ctx, "order:2")
			require.ErrorIs(t, err, delay.ErrNotReplicated)
			assert.True(t, ok)
			ok, err = q.Cancel(ctx, "order:2")
			require.NoError(t, err, "nothing written")
			assert.False(t, ok)
		})
	}

	t.Run("timeout rounded up to whole ms", func(t *testing.T) {
		t.Parallel()
		rdb := client(t, redis.Options{Addr: master})
		q, err := delay.New(rdb, "orders", delay.WithPrefix(redistest.Prefix(t)), delay.WithReplicaAck(3, 1500*time.Microsecond))
		require.NoError(t, err)
		_, err = q.Schedule(context.Background(), delay.Message{}, delay.After(time.Hour))
		require.ErrorIs(t, err, delay.ErrNotReplicated)
		assert.Contains(t, err.Error(), "0 of 3 replicas confirmed within 2ms")
	})
}

// pid returns the process id of the server at addr (INFO server).
func pid(t *testing.T, addr string) int {
	t.Helper()
	info, err := client(t, redis.Options{Addr: addr}).Info(context.Background(), "server").Result()
	require.NoError(t, err)
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "process_id:"); ok {
			n, err := strconv.Atoi(v)
			require.NoError(t, err)
			return n
		}
	}
	t.Fatalf("no process_id in INFO server of %s", addr)
	return 0
}

// A replica that is linked but does not keep up (stopped with SIGSTOP, as
// a stalled host would be) confirms nothing: a durable write returns
// ErrNotReplicated after the timeout, while a plain one returns at once.
// This tells a WAIT on the write's own connection from one sent elsewhere:
// on a connection that wrote nothing, WAIT answers at once with every
// replica that acknowledged anything.
func TestReplicaAckReplicaStalled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	master, replicaAddr := masterWithReplica(t)
	rdb := client(t, redis.Options{Addr: master})
	durableWaits := new(waitCount)
	rdb.AddHook(durableWaits)
	prefix := redistest.Prefix(t)
	durable, err := delay.New(rdb, "orders", delay.WithPrefix(prefix), delay.WithReplicaAck(1, 200*time.Millisecond))
	require.NoError(t, err)
	plainRdb := client(t, redis.Options{Addr: master})
	waits := new(waitCount)
	plainRdb.AddHook(waits)
	plain, err := delay.New(plainRdb, "orders", delay.WithPrefix(prefix))
	require.NoError(t, err)
	_, err = durable.Schedule(ctx, delay.Message{ID: "before"}, delay.After(time.Hour))
	require.NoError(t, err, "confirmed while the replica keeps up")

	p := pid(t, replicaAddr)
	require.NoError(t, syscall.Kill(p, syscall.SIGSTOP))
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			assert.NoError(t, syscall.Kill(p, syscall.SIGCONT))
		}
	}
	t.Cleanup(resume)

	_, err = plain.Schedule(ctx, delay.Message{ID: "plain"}, delay.After(time.Hour))
	require.NoError(t, err)
	assert.Zero(t, waits.n.Load(), "a plain write does not wait: it sends no WAIT")

	start := time.Now()
	res, err := durable.Schedule(ctx, delay.Message{ID: "durable"}, delay.After(time.Hour))
	took := time.Since(start)
	require.ErrorIs(t, err, delay.ErrNotReplicated)
	assert.Contains(t, err.Error(), "0 of 1 replicas confirmed within 200ms")
	assert.Equal(t, delay.Created, res.Outcome)
	assert.GreaterOrEqual(t, took, 200*time.Millisecond)
	assert.Positive(t, durableWaits.n.Load(), "a durable write sends WAIT (seen by the hook that saw none from the plain one)")

	resume()
	// Once the replica catches up, a retry that rewrites the message (the
	// same due time, Replace) is confirmed, and so covers the message.
	deadline := time.Now().Add(5 * time.Second)
	for {
		again, err := durable.Schedule(ctx, delay.Message{ID: "durable", OnDuplicate: delay.Replace}, delay.At(res.Due))
		if err == nil {
			assert.Equal(t, delay.Replaced, again.Outcome)
			assert.True(t, res.Due.Equal(again.Due))
			break
		}
		require.ErrorIs(t, err, delay.ErrNotReplicated)
		require.True(t, time.Now().Before(deadline), "not confirmed within 5s of the replica's resumption")
	}
}

// On a Redis Cluster, a durable batch of a sharded queue sends one pipeline
// per master, each ending with its WAIT: every shard's messages are on the
// replica of its master when the call returns. After a failover the
// client's stale slot map sends a call to the old master, which answers
// MOVED: the call is sent again to the new master, with its WAIT.
func TestReplicaAckCluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, err := redistest.SpawnCluster(3, 1)
	require.NoError(t, err)
	t.Cleanup(c.Stop)
	rdb := c.Client()
	t.Cleanup(func() { _ = rdb.Close() })

	q, err := delay.New(rdb, "orders", delay.WithPrefix(redistest.Prefix(t)), delay.WithShards(8), delay.WithReplicaAck(1, time.Second))
	require.NoError(t, err)
	l := q.Layout()

	// replicaOf returns a client of the replica of master (in Cluster mode
	// a replica serves reads only after READONLY).
	replicaOf := func(master string) *redis.Client {
		t.Helper()
		_, port, err := net.SplitHostPort(master)
		require.NoError(t, err)
		for _, a := range c.Addrs {
			info, err := client(t, redis.Options{Addr: a}).Info(ctx, "replication").Result()
			require.NoError(t, err)
			if strings.Contains(info, "role:slave") && strings.Contains(info, "master_port:"+port+"\r\n") {
				return client(t, redis.Options{Addr: a, OnConnect: func(ctx context.Context, cn *redis.Conn) error {
					return cn.ReadOnly(ctx).Err()
				}})
			}
		}
		t.Fatalf("no replica of %s", master)
		return nil
	}
	// check requires every result on a replica when the call returned
	// (each key lives on its master and that master's replica only), and
	// the batch to have spanned every master.
	check := func(res []delay.Result) {
		t.Helper()
		var replicas []*redis.Client
		for _, a := range c.Addrs {
			info, err := client(t, redis.Options{Addr: a}).Info(ctx, "replication").Result()
			require.NoError(t, err)
			if strings.Contains(info, "role:slave") {
				replicas = append(replicas, client(t, redis.Options{Addr: a, OnConnect: func(ctx context.Context, cn *redis.Conn) error {
					return cn.ReadOnly(ctx).Err()
				}}))
			}
		}
		require.Len(t, replicas, 3)
		used := map[int]bool{}
		for _, r := range res {
			require.Equal(t, delay.Created, r.Outcome)
			lane := l.Shard(l.ShardOf(r.ID)).Main()
			found := 0
			for k, rc := range replicas {
				due, err := rc.ZScore(ctx, lane.Delayed, r.ID).Result()
				if errors.Is(err, redis.Nil) || redis.HasErrorPrefix(err, "MOVED") { // not there; not its master's slot
					continue
				}
				require.NoError(t, err)
				require.EqualValues(t, r.Due.UnixMilli(), due)
				found++
				used[k] = true
			}
			require.Equal(t, 1, found, "%s on %d replicas when ScheduleBatch returned", r.ID, found)
		}
		require.Len(t, used, 3, "the batch spans every master")
	}
	batch := func(round int) []delay.Result {
		t.Helper()
		items := make([]delay.Item, 60)
		for i := range items {
			items[i] = delay.Item{Message: delay.Message{ID: fmt.Sprintf("r%d:%d", round, i)}, When: delay.After(time.Hour)}
		}
		res, err := q.ScheduleBatch(ctx, items)
		require.NoError(t, err)
		return res
	}
	check(batch(0))

	// Fail shard 0's master over (gracefully) and wait until the old
	// master is linked to the new one as its replica.
	key := l.Shard(0).Main().Delayed
	old, err := rdb.MasterForKey(ctx, key)
	require.NoError(t, err)
	oldAddr := old.Options().Addr
	promoted := replicaOf(oldAddr)
	require.NoError(t, promoted.ClusterFailover(ctx).Err())
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		info, err := promoted.Info(ctx, "replication").Result()
		require.NoError(ct, err)
		assert.Contains(ct, info, "role:master")
		assert.Contains(ct, info, "connected_slaves:1")
	}, 10*time.Second, 20*time.Millisecond, "no failover within 10s")
	waitLinked(t, promoted.Options().Addr, []string{oldAddr})
	stale, err := rdb.MasterForKey(ctx, key)
	require.NoError(t, err)
	require.Equal(t, oldAddr, stale.Options().Addr, "the client's slot map is stale: the old master will answer MOVED")

	res := batch(1)
	check(res)

	// The messages of shard 0 are on the new master's replica: the old
	// master.
	onOld := client(t, redis.Options{Addr: oldAddr, OnConnect: func(ctx context.Context, cn *redis.Conn) error {
		return cn.ReadOnly(ctx).Err()
	}})
	var n int
	for _, r := range res {
		if l.ShardOf(r.ID) == 0 {
			n++
			_, err := onOld.ZScore(ctx, key, r.ID).Result()
			require.NoError(t, err, "%s not on the new master's replica", r.ID)
		}
	}
	require.Positive(t, n, "shard 0 got messages")
}

// waitCount is a go-redis hook counting the WAIT commands a client sends,
// alone or in pipelines.
type waitCount struct{ n atomic.Int64 }

func (w *waitCount) DialHook(next redis.DialHook) redis.DialHook { return next }

func (w *waitCount) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		w.see(cmd)
		return next(ctx, cmd)
	}
}

func (w *waitCount) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			w.see(cmd)
		}
		return next(ctx, cmds)
	}
}

func (w *waitCount) see(cmd redis.Cmder) {
	if strings.EqualFold(cmd.Name(), "wait") {
		w.n.Add(1)
	}
}
