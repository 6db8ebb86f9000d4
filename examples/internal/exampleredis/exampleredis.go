// Package exampleredis connects the example programs to Redis: the server
// in REDIS_URL when it is set, else an embedded miniredis, so the examples
// run with no set-up.
package exampleredis

import (
	"fmt"
	"os"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// Connect returns a client for REDIS_URL (e.g. redis://localhost:6379/0),
// or for an embedded miniredis when REDIS_URL is unset, and a function that
// closes the client (and stops the miniredis). The program owns the client.
func Connect() (*redis.Client, func(), error) {
	if url := os.Getenv("REDIS_URL"); url != "" {
		opt, err := redis.ParseURL(url)
		if err != nil {
			return nil, nil, fmt.Errorf("REDIS_URL: %w", err)
		}
		rdb := redis.NewClient(opt)
		return rdb, func() { _ = rdb.Close() }, nil
	}
	mr, err := miniredis.Run()
	if err != nil {
		return nil, nil, fmt.Errorf("start miniredis: %w", err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	return rdb, func() { _ = rdb.Close(); mr.Close() }, nil
}
