package delay

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/delaystream/delaystream/internal/errs"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream/internal/optcheck"
	"github.com/delaystream/delaystream/internal/scripts"
)

// ErrNotReplicated is wrapped by the error of a write made under
// [WithReplicaAck] when fewer replicas than asked confirmed it within the
// timeout, or when their confirmation could not be read. The write itself
// was made on the master and the call's other results (ids, due times,
// outcomes) are valid; what is not known is whether it survives a failover:
// if the master fails before a replica has the write, the promoted replica
// does not have it and the message is lost. The error says how many
// replicas of how many confirmed, on which master.
//
// Scheduling the same messages again with their own ids under the [Keep]
// policy is safe (a message still waiting is kept, one that was lost is
// written again); messages with generated ids would be scheduled twice.
// A retry that finds its message waiting (Kept) writes nothing, so its
// WAIT covers only what its connection wrote before: for a confirmation
// that covers the message itself, retry with [Replace] and the due time
// the first call returned ([At]), which rewrites the same message.
var ErrNotReplicated = errs.ErrNotReplicated

// Bounds of WithReplicaAck.
const (
	maxAckReplicas = 16
	minAckTimeout  = time.Millisecond
	maxAckTimeout  = time.Minute
)

// ackConfig is the replication a write waits for; replicas 0 = none.
type ackConfig struct {
	replicas int
	timeout  time.Duration // whole milliseconds (WAIT's unit)
}

// WithReplicaAck makes every write of the producer (Schedule,
// ScheduleBatch, Cancel, Reschedule; also through [Typed]) wait until at
// least replicas replicas of the master that took it have confirmed it, or
// until timeout, with Redis's WAIT: the write's script calls and a WAIT
// are sent in one pipeline on one connection of that master (WAIT covers
// only the writes of its own connection). replicas must be 1 to 16 and
// timeout 1 ms to 1 min (rounded up to a whole millisecond). Default:
// off, a write returns as soon as the master has it.
//
// Redis replicates asynchronously: without this option a write the master
// acknowledged can be lost when the master dies and a replica that had not
// received it yet is promoted. With it, a call that returns a nil error
// has its write on at least replicas replicas, so it survives the failover
// of its master (a promoted replica is one of them unless more replicas
// fail). When fewer confirm within the timeout, the call returns its
// normal results and an error wrapping [ErrNotReplicated]; it does not
// undo the write. A call that reports nothing written (a Cancel that
// returns false, a Reschedule of a message that is not waiting) does not
// report it. WAIT does not make Redis strongly consistent: a write
// confirmed by a replica can still be lost if that replica also fails, or
// is not the one promoted.
//
// Cost: the master's round trip to its replicas, added to every call;
// a batch pays it once per master, not per message.
//
// The client must be a *redis.Client (a single server, or a Sentinel
// client from redis.NewFailoverClient, which is a *redis.Client talking to
// the current master) or a *redis.ClusterClient. With a Cluster client
// each call goes to the master of its keys (ClusterClient.MasterForKey)
// and a batch spanning several masters sends one pipeline per master, at
// once, each ending with its WAIT; calls a master refuses with MOVED (its
// slot moved, as after a failover) are sent again to the node the reply
// names, with the cluster's slot map reloaded, up to 3 times (an ASK
// reply, during a slot migration, is not followed: the call did not run
// and fails with it). Those node pipelines bypass hooks added to the
// ClusterClient itself (not those added with its OnNewNode). Any other
// client (a redis.Ring, a wrapper) cannot guarantee that WAIT follows the
// write on the same connection, so New refuses it with an error wrapping
// [ErrInvalidOption].
//
// If the timeout does not fit in the client's ReadTimeout (with a second
// to spare), the WAIT follows the pipeline as its own command on the same
// connection, one more round trip. The record of the queue's shard count,
// written once on the queue's first use, is not waited for.
func WithReplicaAck(replicas int, timeout time.Duration) Option {
	return func(c *config) error {
		if err := optcheck.Range(ErrInvalidOption, "replicas to wait for", replicas, 1, maxAckReplicas); err != nil {
			return err
		}
		if err := optcheck.Range(ErrInvalidOption, "replica wait timeout", timeout, minAckTimeout, maxAckTimeout); err != nil {
			return err
		}
		if r := timeout % time.Millisecond; r != 0 {
			timeout += time.Millisecond - r
		}
		c.ack = ackConfig{replicas: replicas, timeout: timeout}
		return nil
	}
}

// checkAckClient refuses, under WithReplicaAck, a client on which the
// producer cannot send a WAIT on the connection of its writes.
func checkAckClient(rdb redis.UniversalClient, c *config) error {
	if c.ack.replicas == 0 {
		return nil
	}
	switch rdb.(type) {
	case *redis.Client, *redis.ClusterClient:
		return nil
	}
	return fmt.Errorf("%w: WithReplicaAck needs a *redis.Client or *redis.ClusterClient (WAIT must follow the writes on their connection), got %T", ErrInvalidOption, rdb)
}

// maxAckRedirects bounds how often a durable write is sent again after a
// MOVED, CLUSTERDOWN or TRYAGAIN reply (after the last two with a pause of
// 100 ms doubling to 1 s: 2.5 s in all, a failover's usual length).
const maxAckRedirects = 5

// pipelineSlack is the time a pipeline's replies other than WAIT's may
// take: a WAIT goes inside the pipeline only if its timeout plus this fits
// in the client's ReadTimeout, which bounds reading every reply.
const pipelineSlack = time.Second

// replicaAck makes a Queue's writes under WithReplicaAck: each on the
// master of its keys, followed by WAIT on the same connection, sent again
// to another node where a Cluster master refuses it (MOVED, CLUSTERDOWN,
// TRYAGAIN).
type replicaAck struct {
	rdb     redis.UniversalClient // a *redis.Client or *redis.ClusterClient (checkAckClient)
	cluster *redis.ClusterClient  // rdb, when it is a Cluster client
	cfg     ackConfig
}

// newReplicaAck returns the replicaAck of cfg, nil when writes do not wait
// for replicas.
func newReplicaAck(rdb redis.UniversalClient, cfg ackConfig) *replicaAck {
	if cfg.replicas == 0 {
		return nil
	}
	cluster, _ := rdb.(*redis.ClusterClient)
	return &replicaAck{rdb: rdb, cluster: cluster, cfg: cfg}
}

// ackedCalls is the script calls of one replicaAck.run and their replies.
type ackedCalls struct {
	scriptOf func(i int) *redis.Script // the script of call i
	calls    []scripts.Call
	cmds     []*redis.Cmd // cmds[i] is call i's reply, its error in it
}

// waitResult is what the WAITs after one master's calls said.
type waitResult struct {
	addr      string
	confirmed int64 // fewest replicas a counted WAIT confirmed; -1 when none counted
	err       error // a counted WAIT failed
}

// run runs call i with scriptOf(i), each call on the master of its keys:
// every master's calls in one pipeline that ends with WAIT on the same
// connection, the masters' pipelines at once. Calls a master refuses with
// MOVED are sent again to the node the reply names, with the slot map
// reloaded, and calls refused with CLUSTERDOWN or TRYAGAIN after a pause
// (Cluster client only, up to maxAckRedirects times). It returns each
// call's reply (its error in it, as scripts.RunPipelined does) and an error
// wrapping ErrNotReplicated when a master's WAIT fell short or failed.
// A WAIT counts only if at least one call before it on its connection
// succeeded: a round whose calls all failed wrote nothing to wait for.
func (a *replicaAck) run(ctx context.Context, scriptOf func(i int) *redis.Script, calls []scripts.Call) ([]*redis.Cmd, error) {
	b := &ackedCalls{scriptOf: scriptOf, calls: calls, cmds: make([]*redis.Cmd, len(calls))}
	pending := make([]int, len(calls))
	for i := range pending {
		pending[i] = i
	}
	var (
		waits []waitResult
		moved map[int]string // call -> the address its last MOVED named
		down  bool           // a call was refused with CLUSTERDOWN or TRYAGAIN
	)
	for attempt := 0; ; attempt++ {
		nodes, idx := a.byMaster(ctx, b, pending, a.redirects(ctx, moved))
		waits = append(waits, a.sendAll(ctx, b, nodes, idx)...)
		if a.cluster == nil || attempt == maxAckRedirects || ctx.Err() != nil {
			break
		}
		pending, moved, down = refused(b.cmds, idx, pending[:0])
		if len(pending) == 0 {
			break
		}
		if down {
			a.cluster.ReloadState(ctx)
			pause(ctx, attempt)
		}
	}
	return b.cmds, a.replicationError(waits)
}

// refused appends to pending the calls of idx that a node refused without
// running them, to be sent again. moved maps the calls refused with MOVED
// to the address the reply names; down reports calls refused with
// CLUSTERDOWN or TRYAGAIN (a failover in progress), to be sent again
// after a pause, on the master the reloaded slot map names.
func refused(cmds []*redis.Cmd, idx [][]int, pending []int) (_ []int, moved map[int]string, down bool) {
	moved = map[int]string{}
	for _, ix := range idx {
		for _, i := range ix {
			err := cmds[i].Err()
			// MOVED <slot> <addr>: refused, the call did not run.
			if f := strings.Fields(errString(err)); len(f) == 3 && f[0] == "MOVED" {
				pending = append(pending, i)
				moved[i] = f[2]
			} else if redis.HasErrorPrefix(err, "CLUSTERDOWN") || redis.HasErrorPrefix(err, "TRYAGAIN") {
				pending = append(pending, i)
				down = true
			}
		}
	}
	return pending, moved, down
}

// pause waits before the round after attempt when a master was down:
// 100 ms doubling to 1 s, or until ctx ends.
func pause(ctx context.Context, attempt int) {
	select {
	case <-ctx.Done():
	case <-time.After(min(100*time.Millisecond<<attempt, time.Second)):
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// redirects returns, for the calls of moved, the client of the node their
// MOVED reply named, and reloads the cluster's slot map: ForEachShard
// reloads it before it visits the nodes (ReloadState only schedules a
// reload), so MasterForKey then answers from the new map too. The node
// named is used even if the map, read from a node that has not heard of
// the failover yet, still says otherwise. Nil when moved is empty.
func (a *replicaAck) redirects(ctx context.Context, moved map[int]string) map[int]*redis.Client {
	if len(moved) == 0 {
		return nil
	}
	var mu sync.Mutex
	byAddr := map[string]*redis.Client{}
	_ = a.cluster.ForEachShard(ctx, func(_ context.Context, node *redis.Client) error {
		mu.Lock()
		byAddr[node.Options().Addr] = node
		mu.Unlock()
		return nil
	})
	out := make(map[int]*redis.Client, len(moved))
	for i, addr := range moved {
		if node := byAddr[addr]; node != nil {
			out[i] = node
		}
	}
	return out
}

// byMaster groups the calls pending by the master of their keys (or the
// node in to, where a MOVED reply named one): idx[n] holds the calls of
// nodes[n], in order. A call whose master cannot be found gets the error
// as its reply and is left out.
func (a *replicaAck) byMaster(ctx context.Context, b *ackedCalls, pending []int, to map[int]*redis.Client) (nodes []*redis.Client, idx [][]int) {
	switch c := a.rdb.(type) {
	case *redis.Client:
		return []*redis.Client{c}, [][]int{append([]int(nil), pending...)}
	case *redis.ClusterClient:
		at := map[*redis.Client]int{}
		for _, i := range pending {
			node := to[i]
			if node == nil {
				var err error
				if node, err = c.MasterForKey(ctx, b.calls[i].Keys[0]); err != nil {
					b.cmds[i] = failedCmd(ctx, fmt.Errorf("master of %s: %w", b.calls[i].Keys[0], err))
					continue
				}
			}
			n, ok := at[node]
			if !ok {
				n = len(nodes)
				at[node] = n
				nodes = append(nodes, node)
				idx = append(idx, nil)
			}
			idx[n] = append(idx[n], i)
		}
		return nodes, idx
	}
	// New refuses other clients under WithReplicaAck.
	for _, i := range pending {
		b.cmds[i] = failedCmd(ctx, fmt.Errorf("%w: client %T", ErrInvalidOption, a.rdb))
	}
	return nil, nil
}

func failedCmd(ctx context.Context, err error) *redis.Cmd {
	cmd := redis.NewCmd(ctx)
	cmd.SetErr(err)
	return cmd
}

// sendAll sends nodes[n] its calls idx[n] (sendNode), the nodes at once,
// and returns what their WAITs said.
func (a *replicaAck) sendAll(ctx context.Context, b *ackedCalls, nodes []*redis.Client, idx [][]int) []waitResult {
	res := make([]waitResult, len(nodes))
	if len(nodes) == 1 {
		res[0] = a.sendNode(ctx, b, nodes[0], idx[0])
		return res
	}
	var wg sync.WaitGroup
	for n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[n] = a.sendNode(ctx, b, nodes[n], idx[n])
		}()
	}
	wg.Wait()
	return res
}

// sendNode sends the calls idx to node, followed by WAIT. EVALSHA does not
// fall back to EVAL inside a pipeline: calls answered NOSCRIPT (they did
// not run: the node never saw the script, or its cache was flushed) are
// sent again with EVAL, which carries the script (and caches it), with
// their own WAIT, as Script.Run falls back for scripts.RunPipelined.
func (a *replicaAck) sendNode(ctx context.Context, b *ackedCalls, node *redis.Client, idx []int) waitResult {
	res := waitResult{addr: node.Options().Addr, confirmed: -1}
	a.sendRound(ctx, b, node, idx, &res, false)
	var retry []int
	for _, i := range idx {
		if redis.HasErrorPrefix(b.cmds[i].Err(), "NOSCRIPT") {
			retry = append(retry, i)
		}
	}
	if len(retry) > 0 {
		a.sendRound(ctx, b, node, retry, &res, true)
	}
	for _, i := range idx {
		if err := b.cmds[i].Err(); err != nil {
			b.cmds[i].SetErr(explain(ctx, node, err, b.calls[i].Keys))
		}
	}
	return res
}

// sendRound sends the calls idx (with EVALSHA, or EVAL if eval) and a
// WAIT on one connection of node and notes in res what the WAIT said, if
// it counts.
func (a *replicaAck) sendRound(ctx context.Context, b *ackedCalls, node *redis.Client, idx []int, res *waitResult, eval bool) {
	fill := func(p redis.Pipeliner) error {
		for _, i := range idx {
			if eval {
				b.cmds[i] = b.scriptOf(i).Eval(ctx, p, b.calls[i].Keys, b.calls[i].Args...)
			} else {
				b.cmds[i] = b.scriptOf(i).EvalSha(ctx, p, b.calls[i].Keys, b.calls[i].Args...)
			}
		}
		return nil
	}
	ack := a.cfg
	var wait *redis.IntCmd
	if rt := node.Options().ReadTimeout; rt <= 0 || ack.timeout+pipelineSlack <= rt {
		// A *redis.Client pipeline is written and read on one connection.
		pipe := node.Pipeline()
		_ = fill(pipe)
		// Pipeliner lacks Wait; the reply is read under the pipeline's deadline.
		wait = redis.NewIntCmd(ctx, "wait", ack.replicas, ack.timeout.Milliseconds())
		_ = pipe.Process(ctx, wait)
		_, _ = pipe.Exec(ctx) // each reply keeps its error
	} else {
		// The WAIT would outlast the pipeline's read deadline: send it
		// alone (with its own deadline) on the same, pinned connection.
		conn := node.Conn()
		defer conn.Close()
		_, _ = conn.Pipelined(ctx, fill)
		if !anySucceeded(idx, b.cmds) {
			return
		}
		wait = conn.Wait(ctx, ack.replicas, ack.timeout)
	}
	if !anySucceeded(idx, b.cmds) {
		return
	}
	n, err := wait.Result()
	switch {
	case err != nil:
		if res.err == nil {
			res.err = err
		}
	case res.confirmed < 0 || n < res.confirmed:
		res.confirmed = n
	}
}

func anySucceeded(idx []int, cmds []*redis.Cmd) bool {
	for _, i := range idx {
		if cmds[i].Err() == nil {
			return true
		}
	}
	return false
}

// replicationError returns an error wrapping ErrNotReplicated describing
// the masters whose WAIT fell short or failed, nil when there are none.
func (a *replicaAck) replicationError(waits []waitResult) error {
	want := int64(a.cfg.replicas)
	masters := map[string]bool{}
	var short []waitResult
	for _, w := range waits {
		if w.err == nil && w.confirmed < 0 {
			continue // nothing written there
		}
		masters[w.addr] = true
		if w.err != nil || w.confirmed < want {
			short = append(short, w)
		}
	}
	if len(short) == 0 {
		return nil
	}
	where := "master " + short[0].addr
	if len(masters) > 1 {
		where = fmt.Sprintf("%d of %d masters, the first %s", len(short), len(masters), short[0].addr)
	}
	const lost = "the write is on the master but is lost if the master fails before a replica has it"
	if w := short[0]; w.err != nil {
		return fmt.Errorf("%w: on %s: WAIT failed (%d of %d replicas confirmed as far as known); %s: %w",
			ErrNotReplicated, where, max(w.confirmed, 0), want, lost, w.err)
	}
	return fmt.Errorf("%w: on %s: %d of %d replicas confirmed within %s; %s",
		ErrNotReplicated, where, short[0].confirmed, want, a.cfg.timeout, lost)
}
