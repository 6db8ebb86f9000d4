package delaystream_test

import (
	"context"
	"fmt"
	"log"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream"
)

// Where is order 5001's cancellation? Compile-only: it needs a server.
func ExampleQueue_Locate() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	q, err := delaystream.New(rdb, "orders")
	if err != nil {
		log.Fatal(err)
	}
	loc, err := q.Locate(context.Background(), "order:5001:cancel")
	if err != nil {
		log.Fatal(err)
	}
	if w := loc.Waiting; w != nil {
		fmt.Println("waiting, due", w.Due, "attempt", w.Attempt)
	}
	for _, g := range loc.Groups {
		switch g.Place {
		case delaystream.PlacePending:
			fmt.Println(g.Group, "pending in", g.Consumer, "idle", g.Idle)
		case delaystream.PlaceRetrying:
			fmt.Println(g.Group, "retrying at", g.NextAttempt)
		case delaystream.PlaceDeadLettered:
			fmt.Println(g.Group, "dead-lettered:", g.Reason, g.EntryID)
		default:
			fmt.Println(g.Group, g.Place)
		}
	}
	if !loc.Found() {
		fmt.Println("handled by every group, or never scheduled")
	}
}
