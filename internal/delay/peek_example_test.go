package delay_test

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream/internal/delay"
)

// Show the next messages due, overdue ones first. Compile-only: it needs a
// Redis server.
func ExampleQueue_Peek() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()

	q, err := delay.New(rdb, "orders")
	if err != nil {
		fmt.Println(err)
		return
	}
	waiting, err := q.Peek(context.Background(), 10)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, w := range waiting {
		switch {
		case w.Problem != "":
			fmt.Println(w.ID, "unreadable:", w.Problem)
		case w.Overdue:
			fmt.Println(w.ID, "overdue since", w.Due)
		default:
			fmt.Println(w.ID, "due", w.Due, len(w.Envelope.Payload), "bytes")
		}
	}
}
