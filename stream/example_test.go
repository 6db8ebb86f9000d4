package stream_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/delaystream/delaystream/codec"
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

// A queue split into four shards: a message's shard comes from its id.
func ExampleShardOf() {
	id := "order:5001"
	i := stream.ShardOf(id, 4)
	k, _ := stream.NewKeys("ds", "orders", i, 4)
	fmt.Println(i, k.Tag(), k.Main().Delayed)
	// Output:
	// 1 orders:1 ds:1:{orders:1}:z
}

func ExampleValidateName() {
	fmt.Println(stream.ValidateName("queue", "orders"))
	err := stream.ValidateName("queue", "my{queue}")
	fmt.Println(errors.Is(err, stream.ErrInvalidName))
	// Output:
	// <nil>
	// true
}

// Decode turns the fields the mover writes (here built with Encode, as
// go-redis would return them) back into an envelope.
func ExampleDecode() {
	fields := stream.Encode(&codec.Envelope{ID: "order:5001", Due: time.UnixMilli(1_700_000_000_000),
		Payload: []byte("cancel"), Attempt: 1})
	values := map[string]any{}
	for i := 0; i < len(fields); i += 2 {
		switch v := fields[i+1].(type) {
		case string:
			values[fields[i].(string)] = v
		case []byte:
			values[fields[i].(string)] = string(v)
		}
	}
	e, err := stream.Decode("ds:1:{orders}:s", "1700000000003-0", values)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(e.Envelope.ID, string(e.Envelope.Payload), e.Envelope.Due.UnixMilli())
	fmt.Println("late by", e.Appended().Sub(e.Envelope.Due))

	_, err = stream.Decode("ds:1:{orders}:s", "1700000000004-0", map[string]any{"i": "x"})
	fmt.Println(errors.Is(err, stream.ErrMalformed), err)
	// Output:
	// order:5001 cancel 1700000000000
	// late by 3ms
	// true decode ds:1:{orders}:s/1700000000004-0: stream: malformed entry: field "d" missing
}
