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
	for _, p := range loc.Places {
		switch p.Kind {
		case delaystream.PlaceWaiting:
			fmt.Println("waiting, due", p.Due, "attempt", p.Attempt)
		case delaystream.PlacePending:
			fmt.Println(p.Group, "pending in", p.Consumer, "idle", p.Idle)
		case delaystream.PlaceRetrying:
			fmt.Println(p.Group, "retrying at", p.Due)
		case delaystream.PlaceDeadLettered:
			fmt.Println(p.Group, "dead-lettered:", p.Reason, p.EntryID)
		case delaystream.PlaceHandled: // kept by a group built WithHandledRecords
			fmt.Println(p.Group, "handled at", p.HandledAt, "attempt", p.Attempt, "by", p.Consumer)
		default:
			fmt.Println(p.Kind, p.Group, p.EntryID)
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
