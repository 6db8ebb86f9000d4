// Command cluster runs one queue sharded over a Redis Cluster: 16 shards,
// each under its own hash tag, spread over the cluster's masters. It
// schedules 10,000 messages due over the next two seconds in one batch
// (one round trip per node), runs a mover and one consumer group through
// a delaystream.Queue, and prints where the shards live, how many
// messages each master delivered and how late they were by the Redis
// clock.
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
// "Sharded queues" in the README for failover.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/internal/group"
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
	PerMaster map[string]int // messages handled, by the master holding their shard
	ShardsOn  map[string]int // shards, by master
	P50, P99  time.Duration  // lateness: handler start minus due time
}

// run schedules the messages and runs the queue until every one was
// handled, writing what happens to out.
func run(ctx context.Context, rdb *redis.ClusterClient, out io.Writer) (report, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	q, err := delaystream.New(rdb, queueName, delaystream.WithShards(shards))
	if err != nil {
		return report{}, err
	}
	rep := report{PerMaster: map[string]int{}, ShardsOn: map[string]int{}}
	masterOf := make([]string, shards)
	for i := range shards {
		node, err := rdb.MasterForKey(ctx, q.Layout().Shard(i).Main().Stream)
		if err != nil {
			return rep, err
		}
		masterOf[i] = node.Options().Addr
		rep.ShardsOn[masterOf[i]]++
	}
	for _, m := range sortedKeys(rep.ShardsOn) {
		fmt.Fprintf(out, "master %s holds %d of %d shards\n", m, rep.ShardsOn[m], shards)
	}

	var mu sync.Mutex
	seen := map[string]bool{}
	var late []time.Duration
	done := make(chan struct{})
	_, err = q.Handle(groupName, func(ctx context.Context, m *group.Message) error {
		now, err := rdb.Time(ctx).Result() // the Redis clock decides lateness
		if err != nil {
			return err // retried
		}
		mu.Lock()
		defer mu.Unlock()
		if !seen[m.ID] {
			seen[m.ID] = true
			late = append(late, now.Sub(m.Due))
			rep.PerMaster[masterOf[q.Layout().ShardOf(m.ID)]]++
			if len(seen) == messages {
				close(done)
			}
		}
		return nil
	}, group.WithWorkers(32))
	if err != nil {
		return rep, err
	}

	items := make([]delaystream.Item, messages)
	for i := range items {
		items[i] = delaystream.Item{
			Message: delaystream.Message{ID: fmt.Sprintf("job:%05d", i), Payload: []byte("work")},
			When:    delaystream.After(time.Duration(i) * spread / messages),
		}
	}
	start := time.Now()
	if _, err := q.ScheduleBatch(ctx, items); err != nil {
		return rep, err
	}
	fmt.Fprintf(out, "scheduled %d messages over %d shards in %s\n", messages, shards, time.Since(start).Round(time.Millisecond))

	runCtx, stopRun := context.WithCancel(ctx)
	runErr := make(chan error, 1)
	go func() { runErr <- q.Run(runCtx) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
	stopRun()
	if err := <-runErr; err != nil {
		return rep, err
	}
	mu.Lock()
	defer mu.Unlock()
	rep.Delivered = len(seen)
	if rep.Delivered < messages {
		return rep, fmt.Errorf("only %d of %d messages delivered in %s", rep.Delivered, messages, timeout)
	}
	slices.Sort(late)
	for _, l := range late {
		if l < 0 {
			rep.Early++
		}
	}
	rep.P50, rep.P99 = late[len(late)/2], late[len(late)*99/100]
	for _, m := range sortedKeys(rep.PerMaster) {
		fmt.Fprintf(out, "master %s delivered %d messages\n", m, rep.PerMaster[m])
	}
	fmt.Fprintf(out, "delivered %d, early %d, lateness p50 %s p99 %s\n", rep.Delivered, rep.Early,
		rep.P50.Round(100*time.Microsecond), rep.P99.Round(100*time.Microsecond))
	return rep, nil
}

func sortedKeys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
