package delaystream_test

import (
	"context"
	"fmt"
	"log"
	"time"

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
		case delaystream.PlaceHandled: // kept by a group built WithHandledRecords
			fmt.Println(g.Group, "handled at", g.HandledAt, "attempt", g.Attempt, "by", g.Consumer)
		default:
			fmt.Println(g.Group, g.Place)
		}
	}
	if !loc.Found() {
		fmt.Println("handled by every group, or never scheduled")
	}
}

// Billing keeps a record of each message it handled for a day, so that
// Locate answers "handled by billing at …, attempt 2" after the stream
// entry is gone. Compile-only: it needs a server.
func ExampleWithHandledRecords() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	q, err := delaystream.New(rdb, "orders")
	if err != nil {
		log.Fatal(err)
	}
	_, err = q.Handle("billing", func(ctx context.Context, d *delaystream.Delivery) error {
		return nil // charge the order
	}, delaystream.WithHandledRecords(24*time.Hour))
	if err != nil {
		log.Fatal(err)
	}
}

// A process that must not count its work in the queue's history (every
// process of the queue should then be built the same way). Compile-only.
func ExampleWithoutHistory() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	if _, err := delaystream.New(rdb, "orders", delaystream.WithoutHistory()); err != nil {
		log.Fatal(err)
	}
}
