// Command cluster runs one queue sharded over a Redis Cluster: 16 shards,
// each under its own hash tag, spread over the cluster's masters. It
// schedules 10,000 messages due over the next two seconds in one batch
// (one round trip per node), runs promotion and one consumer group through
// a delaystream.Queue, and prints how many messages each master promoted
// from how many shards (from the queue's MoverHooks, which name the stream
// each promotion appended to) and how late the messages were handled by
// the Redis clock.
//
//	REDIS_CLUSTER_ADDRS=127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002 go run ./examples/cluster
//
// A local cluster of three masters for trying it (Redis 7):
//
//	for p in 7000 7001 7002; do
//	  redis-server --port $p --cluster-enabled yes --cluster-config-file nodes-$p.conf \
//	    --cluster-node-timeout 1000 --save "" --appendonly no --daemonize yes
//	done
//	redis-cli --cluster create 127.0.0.1:7000 127.0.0.1:7001 127.0.0.1:7002 --cluster-yes
//
// Add --cluster-replicas 1 and three more servers for replicas; see
// docs/sharding.md for sharded queues and the "Failover" section of
// docs/reliability.md for failover.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream"
)

const (
	queueName = "cluster-example"
	groupName = "worker"
	shards    = 16
	messages  = 10_000
	spread    = 2 * time.Second  // due times are spread over this
	timeout   = 30 * time.Second // give up if not all arrived by then
)

func main() {
	if err := start(); err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
}

func start() error {
	addrs := os.Getenv("REDIS_CLUSTER_ADDRS")
	if addrs == "" {
		return errors.New("set REDIS_CLUSTER_ADDRS to the cluster's seed addresses (host:port,host:port,...); the package doc says how to start a local cluster")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// go-redis's defaults, as a new user would write it.
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(addrs, ","), MaxRedirects: 8})
	defer rdb.Close()
	_, err := run(ctx, rdb, os.Stdout)
	return err
}

// report is what run measured.
type report struct {
	Delivered int            // distinct messages handled
	Early     int            // handled before their due time (Redis clock): must be 0
	Promoted  map[string]int // messages promoted, by the master holding their shard
	ShardsOn  map[string]int // shards that promoted messages, by master
	P50, P99  time.Duration  // lateness: handler start minus due time
}

// run schedules the messages and runs the queue until every one was
// handled, writing what happens to out.
func run(ctx context.Context, rdb *redis.ClusterClient, out io.Writer) (report, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var prom promotions
	q, err := delaystream.New(rdb, queueName, delaystream.WithShards(shards), delaystream.WithMoverHooks(prom.hooks()))
	if err != nil {
		return report{}, err
	}
	lat := newLateness(rdb)
	worker, err := q.Handle(groupName, lat.handle, delaystream.WithWorkers(32))
	if err != nil {
		return report{}, err
	}
	if err := schedule(ctx, q, out); err != nil {
		return report{}, err
	}
	if err := runUntil(ctx, q, lat.done); err != nil {
		return report{}, err
	}
	rep := lat.report()
	if rep.Delivered < messages {
		return rep, fmt.Errorf("only %d of %d messages delivered in %s", rep.Delivered, messages, timeout)
	}
	if err := prom.byMaster(ctx, rdb, &rep); err != nil {
		return rep, err
	}
	for _, m := range sortedKeys(rep.Promoted) {
		fmt.Fprintf(out, "master %s promoted %d messages from %d of %d shards\n", m, rep.Promoted[m], rep.ShardsOn[m], shards)
	}
	c := worker.Counters()
	fmt.Fprintf(out, "%s: delivered %d, acked %d; distinct %d, early %d, lateness p50 %s p99 %s\n",
		groupName, c.Delivered, c.Acked, rep.Delivered, rep.Early,
		rep.P50.Round(100*time.Microsecond), rep.P99.Round(100*time.Microsecond))
	return rep, nil
}

// schedule schedules the messages, due over the next spread, in one batch:
// one round trip per master.
func schedule(ctx context.Context, q *delaystream.Queue, out io.Writer) error {
	items := make([]delaystream.Item, messages)
	for i := range items {
		items[i] = delaystream.Item{
			Message: delaystream.Message{ID: fmt.Sprintf("job:%05d", i), Payload: []byte("work")},
			When:    delaystream.After(time.Duration(i) * spread / messages),
		}
	}
	began := time.Now()
	if _, err := q.ScheduleBatch(ctx, items); err != nil {
		return err
	}
	fmt.Fprintf(out, "scheduled %d messages over %d shards in %s\n", messages, shards, time.Since(began).Round(time.Millisecond))
	return nil
}

// runUntil runs q until done is closed or ctx ends, and returns Run's
// error.
func runUntil(ctx context.Context, q *delaystream.Queue, done <-chan struct{}) error {
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	runErr := make(chan error, 1)
	go func() { runErr <- q.Run(runCtx) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
	stop()
	return <-runErr
}

// promotions counts what each lane promoted, from the queue's MoverHooks.
// A lane is the stream a promotion appended to: one per shard here, each
// under its shard's hash tag, so the cluster client tells its master.
type promotions struct {
	mu    sync.Mutex
	moved map[string]int // by lane
}

func (p *promotions) hooks() delaystream.MoverHooks {
	return delaystream.MoverHooks{
		// Hooks run on the mover's goroutines and must return quickly.
		OnPromote: func(lane string, moved, _ int, _ time.Duration) {
			p.mu.Lock()
			defer p.mu.Unlock()
			if p.moved == nil {
				p.moved = map[string]int{}
			}
			p.moved[lane] += moved
		},
	}
}

// byMaster adds the promotions, and the lanes that promoted, to rep by
// the master that holds each lane.
func (p *promotions) byMaster(ctx context.Context, rdb *redis.ClusterClient, rep *report) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	rep.Promoted, rep.ShardsOn = map[string]int{}, map[string]int{}
	for lane, n := range p.moved {
		node, err := rdb.MasterForKey(ctx, lane)
		if err != nil {
			return err
		}
		rep.Promoted[node.Options().Addr] += n
		rep.ShardsOn[node.Options().Addr]++
	}
	return nil
}

// lateness records how late each message was first handled, by the Redis
// clock, and closes done once every message was.
type lateness struct {
	rdb  *redis.ClusterClient
	mu   sync.Mutex
	late map[string]time.Duration // by message id
	done chan struct{}
}

func newLateness(rdb *redis.ClusterClient) *lateness {
	return &lateness{rdb: rdb, late: make(map[string]time.Duration, messages), done: make(chan struct{})}
}

// handle is the group's handler.
func (l *lateness) handle(ctx context.Context, d *delaystream.Delivery) error {
	now, err := l.rdb.Time(ctx).Result() // the Redis clock decides lateness
	if err != nil {
		return err // retried
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, seen := l.late[d.ID]; !seen {
		l.late[d.ID] = now.Sub(d.Due)
		if len(l.late) == messages {
			close(l.done)
		}
	}
	return nil
}

// report returns the deliveries, early ones and lateness percentiles.
func (l *lateness) report() report {
	l.mu.Lock()
	defer l.mu.Unlock()
	late := slices.Sorted(maps.Values(l.late))
	rep := report{Delivered: len(late)}
	for _, d := range late {
		if d < 0 {
			rep.Early++
		}
	}
	if len(late) > 0 {
		rep.P50, rep.P99 = late[len(late)/2], late[len(late)*99/100]
	}
	return rep
}

func sortedKeys(m map[string]int) []string { return slices.Sorted(maps.Keys(m)) }
