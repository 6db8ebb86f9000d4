package stream_test

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream/internal/stream"
)

// List the queues under the default prefix, on a single server or on
// every master of a Cluster. Compile-only: it needs a Redis server.
func ExampleDiscover() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()

	queues, err := stream.Discover(context.Background(), rdb, stream.DefaultPrefix)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, q := range queues {
		fmt.Printf("%s: %d shards (record %s)\n", q.Queue, q.Shards, q.Meta)
	}
}
