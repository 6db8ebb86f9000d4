package stream_test

import (
	"errors"
	"fmt"

	"github.com/delaystream/delaystream/internal/stream"
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

// A key of the wrong type (someone SET the delayed set) is reported by name;
// callers and hooks branch on it with errors.As or errors.Is.
func ExampleKeyTypeError() {
	err := fmt.Errorf("promote ds:1:{orders}:z: %w",
		&stream.KeyTypeError{Key: "ds:1:{orders}:z", Want: "zset", Got: "string"})
	var kerr *stream.KeyTypeError
	fmt.Println(errors.As(err, &kerr), kerr.Key, errors.Is(err, stream.ErrWrongType))
	fmt.Println(err)
	// Output:
	// true ds:1:{orders}:z true
	// promote ds:1:{orders}:z: key ds:1:{orders}:z holds a string, want a zset: delaystream: key holds the wrong type
}
