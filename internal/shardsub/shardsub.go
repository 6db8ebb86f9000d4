// Package shardsub subscribes to the shard channels of a sharded queue
// (SSUBSCRIBE) with one pub/sub connection per node.
//
// A sharded queue's scripts announce wake-ups and arrivals with SPUBLISH on
// channels under each shard's hash tag. On a Redis Cluster a classic PUBLISH
// is relayed to every node over the cluster bus, which costs every node CPU
// and, measured on Redis 7.0, adds up to ~40 ms to a message received on
// another node; SPUBLISH reaches only the subscribers of the node that owns
// the channel's slot, in well under a millisecond.
//
// SSUBSCRIBE takes channels of one slot per call, and go-redis resubscribes
// all of a connection's shard channels in one call after a reconnection,
// which a Cluster refuses (CROSSSLOT). So this package does not use
// go-redis's reconnection: it subscribes slot by slot on one connection per
// node, checks each connection's health with PING, and after a failure
// rebuilds that connection's subscriptions only (finding their nodes anew:
// a failover moves slots to the promoted replica), calling the reset
// function because messages may have been lost meanwhile.
//
// A server without shard channels (miniredis, which tests use) gets the same
// channels through classic SUBSCRIBE, which the scripts' fallback from
// SPUBLISH to PUBLISH reaches.
package shardsub

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/delaystream/delaystream/internal/heal"
	"github.com/redis/go-redis/v9"
)

// Config is what Run needs.
type Config struct {
	// Groups are the channels, grouped so that the channels of one group
	// share a hash slot (one SSUBSCRIBE each). Must not be empty.
	Groups [][]string
	// OnMessage is called with every message, from one goroutine per node
	// (none if nil).
	OnMessage func(channel, payload string)
	// OnReset is called when a node's subscriptions are in place, at the
	// start and after every rebuild: messages published while they were not
	// may have been lost. Called from one goroutine per node (none if nil).
	OnReset func()
	// OnLost is called when a node's subscriptions failed, or could not be
	// made, with the groups they were for, before they are rebuilt: the
	// node may be down, and calls to keys of those slots may hang until
	// the cluster fails over. Called from one goroutine per node (none if
	// nil).
	OnLost func(groups [][]string)
	// Health is how long a connection may stay silent before it is pinged;
	// a ping unanswered for as long again fails it. Default 30 s.
	Health time.Duration
	// Logger gets a warning per rebuild, at most one per 10 s.
	Logger *slog.Logger
	// Classic subscribes the channels with SUBSCRIBE instead of SSUBSCRIBE:
	// then Groups must be one group, and it need not share a slot (a
	// classic PUBLISH reaches every node of a Cluster).
	Classic bool
}

// Run keeps the subscriptions until ctx ends and returns nil then. Each
// node's connection is kept on its own: a node's failure rebuilds only
// the subscriptions of its slots (with a jittered backoff, 100 ms doubling
// to 5 s; on a Cluster, cut short once their slots' master changes), found
// anew on whichever nodes serve them by then, while the other nodes'
// connections go on.
func Run(ctx context.Context, rdb redis.UniversalClient, cfg Config) error {
	if cfg.Health <= 0 {
		cfg.Health = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.OnMessage == nil {
		cfg.OnMessage = func(string, string) {}
	}
	if cfg.OnReset == nil {
		cfg.OnReset = func() {}
	}
	if cfg.OnLost == nil {
		cfg.OnLost = func([][]string) {}
	}
	s := &sub{rdb: rdb, cfg: cfg}
	s.classic.Store(cfg.Classic)
	s.spawn(ctx, cfg.Groups)
	s.wg.Wait()
	return nil
}

// sub is one Run.
type sub struct {
	rdb     redis.UniversalClient
	cfg     Config
	wg      sync.WaitGroup
	classic atomic.Bool // the server has no shard channels
}

func (s *sub) spawn(ctx context.Context, groups [][]string) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.keep(ctx, groups)
	}()
}

// keep subscribes groups until ctx ends. While one node serves them all,
// they share a connection, rebuilt after each failure; when they turn out
// to be served by several nodes (at the start, or after a failover or a
// resharding), each node's share gets a keeper of its own.
func (s *sub) keep(ctx context.Context, groups [][]string) {
	backoff := 100 * time.Millisecond
	var lastLog time.Time
	// After a failure, on a Cluster: whether the groups' slots moved from
	// the failed node. An attempt still trying that node (go-redis dials
	// it again and again) ends when they do, and so does the wait.
	var watch heal.Watch
	defer watch.End()
	for ctx.Err() == nil {
		ns, err := nodes(ctx, s.rdb, groups)
		if err == nil && len(ns) > 1 {
			for _, n := range ns {
				s.spawn(ctx, n.groups)
			}
			return
		}
		start := time.Now()
		failed := ""
		if err == nil {
			failed = ns[0].c.Options().Addr
			actx, cancel := watch.Bound(ctx)
			err = ns[0].run(actx, s.cfg, s.classic.Load(), watch.End)
			moved := actx.Err() != nil
			cancel()
			if ctx.Err() != nil {
				return
			}
			if moved {
				watch.End()
				backoff = 100 * time.Millisecond
				continue // to the slots' new master
			}
			if errors.Is(err, errNoShardChannels) {
				s.classic.Store(true)
				continue
			}
		}
		if ctx.Err() != nil {
			// Failed as ctx ended (a shutdown): not a loss to report,
			// nor a subscription to rebuild.
			return
		}
		heal.After(s.rdb, err)
		s.cfg.OnLost(groups)
		if time.Since(start) > time.Minute {
			backoff = 100 * time.Millisecond // it ran well for a while
		}
		if time.Since(lastLog) >= 10*time.Second {
			lastLog = time.Now()
			s.cfg.Logger.WarnContext(ctx, "pub/sub subscription failed; resubscribing",
				slog.Any("err", err), slog.Duration("retry_in", backoff))
		}
		if heal.Suggests(err) {
			watch.Start(ctx, s.rdb, groups[0][0], failed)
		}
		d := backoff/2 + rand.N(backoff/2+1)
		moved := watch.Moved()
		if !s.wait(ctx, d, moved) {
			return
		}
		select {
		case <-moved:
			watch.End()
			backoff = 100 * time.Millisecond
		default:
			backoff = min(2*backoff, 5*time.Second)
		}
	}
}

// wait waits d, or less if moved is closed (the slots' master changed:
// see [heal.Moved]): the subscriptions move to a promoted replica then,
// rather than after a backoff grown while the master was down. It reports
// false if ctx ended.
func (s *sub) wait(ctx context.Context, d time.Duration, moved <-chan struct{}) bool {
	end := time.NewTimer(d)
	defer end.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-end.C:
	case <-moved:
	}
	return true
}

var errNoShardChannels = errors.New("delaystream: server has no shard channels")

// node is a connection's share of the groups.
type node struct {
	c      *redis.Client
	groups [][]string
}

// nodes assigns the groups to the clients of the nodes that serve them.
func nodes(ctx context.Context, rdb redis.UniversalClient, groups [][]string) ([]node, error) {
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		c, ok := rdb.(*redis.Client)
		if !ok {
			return nil, errors.New("delaystream: sharded queues need a *redis.Client or *redis.ClusterClient")
		}
		return []node{{c: c, groups: groups}}, nil
	}
	byAddr := map[string]int{}
	var out []node
	for _, g := range groups {
		c, err := cc.MasterForKey(ctx, g[0])
		if err != nil {
			return nil, err
		}
		addr := c.Options().Addr
		i, ok := byAddr[addr]
		if !ok {
			i = len(out)
			byAddr[addr] = i
			out = append(out, node{c: c})
		}
		out[i].groups = append(out[i].groups, g)
	}
	return out, nil
}

// run subscribes the node's groups on one connection and reads it until
// ctx ends (nil) or anything fails.
func (n node) run(ctx context.Context, cfg Config, classic bool, up func()) error {
	ps := n.c.Subscribe(ctx) // no channels yet: nothing is sent
	defer ps.Close()
	// A read in progress does not see ctx end; closing the connection
	// ends it.
	defer context.AfterFunc(ctx, func() { _ = ps.Close() })()
	rest, err := n.subscribeFirst(ctx, ps, classic)
	if err != nil {
		return err
	}
	rd := &receiver{ps: ps, cfg: cfg, classic: classic, up: up,
		first: len(n.groups[0]), rest: rest, want: n.channels()}
	for {
		msg, err := ps.ReceiveTimeout(ctx, cfg.Health)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			if err := rd.receiveFailed(ctx, err); err != nil {
				return err
			}
			continue
		}
		rd.pinged = false
		if err := rd.handle(ctx, msg); err != nil {
			return err
		}
	}
}

// channels returns the number of the node's channels.
func (n node) channels() int {
	count := 0
	for _, g := range n.groups {
		count += len(g)
	}
	return count
}

// subscribeFirst sends the node's first subscription, and returns the
// groups left to subscribe once it is confirmed. Classic channels (a
// server without shard channels is not a Cluster) go in one SUBSCRIBE.
// Shard channels go one slot per SSUBSCRIBE, the first alone: its reply
// tells whether the server has shard channels before anything else is
// sent (and a connection without buffering, like the net.Pipe of tests,
// never has a reply and a command waiting for each other).
func (n node) subscribeFirst(ctx context.Context, ps *redis.PubSub, classic bool) ([][]string, error) {
	if classic {
		var all []string
		for _, g := range n.groups {
			all = append(all, g...)
		}
		return nil, ps.Subscribe(ctx, all...)
	}
	if err := ps.SSubscribe(ctx, n.groups[0]...); err != nil {
		return nil, err
	}
	return n.groups[1:], nil
}

// receiver reads a node's connection.
type receiver struct {
	ps      *redis.PubSub
	cfg     Config
	classic bool
	up      func()     // called with OnReset once every channel is subscribed
	first   int        // channels of the first subscription
	rest    [][]string // groups subscribed once the first is confirmed
	want    int        // channels in all
	got     int        // subscriptions confirmed
	pinged  bool       // a ping was sent since the last reply
}

// receiveFailed returns the error that ends the connection after a failed
// receive, or nil once it pinged a connection that was only silent.
func (rd *receiver) receiveFailed(ctx context.Context, err error) error {
	var rerr redis.Error
	if errors.As(err, &rerr) {
		if !rd.classic && strings.Contains(strings.ToLower(err.Error()), "unknown command") {
			return errNoShardChannels
		}
		return err
	}
	var nerr interface{ Timeout() bool }
	if errors.As(err, &nerr) && nerr.Timeout() && !rd.pinged {
		// Silent for a while: a live connection answers a ping.
		if err := rd.ps.Ping(ctx); err != nil {
			return err
		}
		rd.pinged = true
		return nil
	}
	return err
}

// handle handles a message received on the connection.
func (rd *receiver) handle(ctx context.Context, msg any) error {
	switch msg := msg.(type) {
	case *redis.Message:
		rd.cfg.OnMessage(msg.Channel, msg.Payload)
	case *redis.Subscription:
		return rd.subscribed(ctx, msg)
	}
	return nil
}

// subscribed handles a change of the connection's subscriptions: it
// subscribes the rest once the first subscription is confirmed, and
// reports the subscriptions in place once all are.
func (rd *receiver) subscribed(ctx context.Context, msg *redis.Subscription) error {
	switch msg.Kind {
	case "ssubscribe", "subscribe":
	default:
		// The server dropped a subscription: its slot moved to
		// another node (a failover or a resharding).
		return errors.New("delaystream: " + msg.Kind + " " + msg.Channel + " from the server (slot moved)")
	}
	rd.got++
	if rd.got == rd.first && len(rd.rest) > 0 {
		for _, g := range rd.rest {
			if err := rd.ps.SSubscribe(ctx, g...); err != nil {
				return err
			}
		}
	}
	if rd.got == rd.want {
		rd.up()
		rd.cfg.OnReset()
	}
	return nil
}
