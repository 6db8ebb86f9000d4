package delaystream_test

import (
	"context"
	"errors"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream"
)

// A queue that must not run on a Redis that can evict its keys, and a
// write refused because Redis is full. Compile-only: it needs a server.
func ExampleWithNoEvictionRequired() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	q, err := delaystream.New(rdb, "orders", delaystream.WithNoEvictionRequired())
	if err != nil {
		log.Fatal(err)
	}
	_, err = q.Schedule(context.Background(), delaystream.Message{ID: "order:5001:cancel"}, delaystream.After(30*time.Minute))
	switch {
	case errors.Is(err, delaystream.ErrEvictionPolicy):
		log.Fatal("configure Redis with maxmemory-policy noeviction: ", err)
	case errors.Is(err, delaystream.ErrOutOfMemory):
		log.Print("Redis is full, nothing written; try again later: ", err)
	case err != nil:
		log.Fatal(err)
	}
}
