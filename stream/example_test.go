package stream_test

import (
	"errors"
	"fmt"

	"github.com/delaystream/delaystream/stream"
)

// The keys of an unsharded queue: every key carries the hash tag {orders}.
func ExampleNewKeys() {
	k, err := stream.NewKeys(stream.DefaultPrefix, "orders", 0, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	main := k.Main()
	fmt.Println(main.Delayed)
	fmt.Println(main.Envelopes)
	fmt.Println(main.Stream)
	fmt.Println(main.Quarantine)
	fmt.Println(k.Retry("billing").Stream)
	fmt.Println(k.DeadLetters("billing"))
	// Output:
	// ds:1:{orders}:z
	// ds:1:{orders}:m
	// ds:1:{orders}:s
	// ds:1:{orders}:x
	// ds:1:{orders}:r:billing:s
	// ds:1:{orders}:d:billing
}

func ExampleValidateName() {
	fmt.Println(stream.ValidateName("queue", "orders"))
	err := stream.ValidateName("queue", "my{queue}")
	fmt.Println(errors.Is(err, stream.ErrInvalidName))
	// Output:
	// <nil>
	// true
}
