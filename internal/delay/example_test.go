package delay_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream/codec"
	"github.com/delaystream/delaystream/internal/delay"
	"github.com/delaystream/delaystream/internal/stream"
)

// Compile-only: needs a Redis server, so no Output line.
func ExampleNew() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()

	q, err := delay.New(rdb, "orders")
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	res, err := q.Schedule(ctx, delay.Message{
		ID:      "order:5001:cancel", // deterministic: scheduling again is a no-op
		Payload: []byte(`{"order":5001}`),
	}, delay.After(30*time.Minute))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Outcome, "due", res.Due)
}

// With the default policy (Keep), scheduling the same id twice is
// idempotent: the first message stays as it was.
func ExampleQueue_Schedule() {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		fmt.Println(err)
		return
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	q, _ := delay.New(rdb, "orders")
	ctx := context.Background()
	msg := delay.Message{ID: "order:5001:cancel", Payload: []byte("cancel 5001")}
	first, _ := q.Schedule(ctx, msg, delay.After(30*time.Minute))
	again, _ := q.Schedule(ctx, msg, delay.After(45*time.Minute)) // a producer's retry
	fmt.Println(first.Outcome, again.Outcome, again.Due.Equal(first.Due))

	_, err := q.Schedule(ctx, delay.Message{ID: msg.ID, OnDuplicate: delay.Reject}, delay.After(time.Minute))
	fmt.Println(errors.Is(err, delay.ErrDuplicate))
	// Output:
	// created kept true
	// true
}

// After is measured by the Redis clock, whatever this host's clock says.
func ExampleAfter() {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		fmt.Println(err)
		return
	}
	defer mr.Close()
	mr.SetTime(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)) // the server's clock
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	q, _ := delay.New(rdb, "mail")
	res, _ := q.Schedule(context.Background(), delay.Message{ID: "welcome:ann"}, delay.After(24*time.Hour))
	fmt.Println(res.Due.UTC())
	// Output:
	// 2030-01-02 12:00:00 +0000 UTC
}

// Each message of a batch gets its own result, duplicates included.
func ExampleQueue_ScheduleBatch() {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		fmt.Println(err)
		return
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	q, _ := delay.New(rdb, "webhooks", delay.WithBatchSize(2))
	res, err := q.ScheduleBatch(context.Background(), []delay.Item{
		{Message: delay.Message{ID: "hook:1"}, When: delay.After(5 * time.Second)},
		{Message: delay.Message{ID: "hook:2"}, When: delay.After(10 * time.Second)},
		{Message: delay.Message{ID: "hook:1", OnDuplicate: delay.Replace}, When: delay.After(time.Minute)},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range res {
		fmt.Println(r.ID, r.Outcome)
	}
	// Output:
	// hook:1 created
	// hook:2 created
	// hook:1 replaced
}

func ExampleQueue_Cancel() {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		fmt.Println(err)
		return
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	q, _ := delay.New(rdb, "orders")
	ctx := context.Background()
	_, _ = q.Schedule(ctx, delay.Message{ID: "order:5001:cancel"}, delay.After(30*time.Minute))
	ok, _ := q.Cancel(ctx, "order:5001:cancel") // the order was paid
	again, _ := q.Cancel(ctx, "order:5001:cancel")
	_, err := q.Get(ctx, "order:5001:cancel")
	fmt.Println(ok, again, errors.Is(err, delay.ErrNotFound))
	// Output:
	// true false true
}

// A typed producer encodes values with the queue's codec.
func ExampleTyped() {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		fmt.Println(err)
		return
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	type Reminder struct {
		User string `json:"user"`
		Text string `json:"text"`
	}
	q, _ := delay.New(rdb, "reminders", delay.WithCodec(codec.JSON))
	reminders := delay.NewTyped[Reminder](q)
	ctx := context.Background()
	_, _ = reminders.Schedule(ctx, "ann:standup", Reminder{User: "ann", Text: "stand up"}, delay.After(time.Hour))

	r, env, _ := reminders.Get(ctx, "ann:standup")
	fmt.Printf("%+v %s\n", r, env.Payload)
	// Output:
	// {User:ann Text:stand up} {"user":"ann","text":"stand up"}
}

// Invalid options fail at wiring time.
func ExampleWithDuplicatePolicy() {
	rdb := redis.NewClient(&redis.Options{})
	defer rdb.Close()
	_, err := delay.New(rdb, "orders", delay.WithDuplicatePolicy(delay.Policy(9)))
	fmt.Println(errors.Is(err, delay.ErrInvalidOption))
	fmt.Println(err)
	// Output:
	// true
	// delaystream: invalid option: unknown duplicate policy 9
}

// A sharded queue keeps each message in the shard of its id. The shard
// count is recorded in Redis on first use: a part built with another
// count is refused and writes nothing.
func ExampleWithShards() {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		fmt.Println(err)
		return
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	q, err := delay.New(rdb, "orders", delay.WithShards(4))
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	_, err = q.ScheduleBatch(ctx, []delay.Item{
		{Message: delay.Message{ID: "order:5001:cancel"}, When: delay.After(30 * time.Minute)},
		{Message: delay.Message{ID: "order:5002:cancel"}, When: delay.After(30 * time.Minute)},
		{Message: delay.Message{Payload: []byte("generated id")}, When: delay.After(time.Hour)},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	l := q.Layout()
	for _, id := range []string{"order:5001:cancel", "order:5002:cancel"} {
		fmt.Println(id, "waits in", l.Shard(l.ShardOf(id)).Main().Delayed)
	}
	n, _ := q.Len(ctx) // every shard
	fmt.Println(q.Shards(), "shards,", n, "waiting")

	other, _ := delay.New(rdb, "orders", delay.WithShards(8))
	_, err = other.Cancel(ctx, "order:5001:cancel")
	fmt.Println(errors.Is(err, stream.ErrShardCount))
	// Output:
	// order:5001:cancel waits in ds:1:{orders:3.123}:z
	// order:5002:cancel waits in ds:1:{orders:0.1}:z
	// 4 shards, 3 waiting
	// true
}

// Under WithReplicaAck every write waits (WAIT) until replicas of its
// master have it, so that it survives a failover. A server without
// replicas (here miniredis, whose WAIT answers 0 at once) cannot confirm:
// the write is made and its result returned, with an error wrapping
// ErrNotReplicated. Scheduling again with the same id under Keep is safe.
func ExampleWithReplicaAck() {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		fmt.Println(err)
		return
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	q, err := delay.New(rdb, "orders", delay.WithReplicaAck(1, 100*time.Millisecond))
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	res, err := q.Schedule(ctx, delay.Message{ID: "order:5001:cancel"}, delay.After(30*time.Minute))
	switch {
	case errors.Is(err, delay.ErrNotReplicated):
		// "... on master <addr>: 0 of 1 replicas confirmed within 100ms; the write is on the master but ..."
		_, detail, _ := strings.Cut(err.Error(), mr.Addr()+": ")
		detail, _, _ = strings.Cut(detail, ";")
		fmt.Println(res.Outcome, "on the master, but", detail)
	case err != nil:
		fmt.Println(err)
		return
	}
	_, err = q.Get(ctx, "order:5001:cancel")
	fmt.Println("waiting:", err == nil)
	// Output:
	// created on the master, but 0 of 1 replicas confirmed within 100ms
	// waiting: true
}

// A reminder that is worthless an hour after it was due: a consumer that
// gets it later dead-letters it with the reason "expired" instead of
// handling it. WithExpireAfter gives every message without a Deadline one.
func ExampleWithExpireAfter() {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		fmt.Println(err)
		return
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	q, _ := delay.New(rdb, "reminders", delay.WithExpireAfter(time.Hour))
	ctx := context.Background()
	due := time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC)
	_, _ = q.Schedule(ctx, delay.Message{ID: "standup"}, delay.At(due))
	_, _ = q.Schedule(ctx, delay.Message{ID: "report", Deadline: due.Add(24 * time.Hour)}, delay.At(due))

	for _, id := range []string{"standup", "report"} {
		e, _ := q.Get(ctx, id)
		fmt.Println(id, "expires", e.Deadline.UTC().Format(time.DateTime))
	}
	_, err := q.Schedule(ctx, delay.Message{ID: "late", Deadline: due}, delay.At(due))
	fmt.Println(errors.Is(err, delay.ErrInvalidMessage))
	// Output:
	// standup expires 2030-01-01 10:00:00
	// report expires 2030-01-02 09:00:00
	// true
}

// Concurrent Schedule calls share script calls by default (group commit).
// A producer whose go-redis hooks must see one command per message, or
// whose callers' deadlines must bound their own socket I/O, can turn that
// off; each call then makes its own script call.
func ExampleWithoutGroupCommit() {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		fmt.Println(err)
		return
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	q, err := delay.New(rdb, "webhooks", delay.WithoutGroupCommit())
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			_, _ = q.Schedule(ctx, delay.Message{ID: fmt.Sprint("hook:", i)}, delay.After(5*time.Second))
		})
	}
	wg.Wait()
	n, _ := q.Len(ctx)
	fmt.Println(n, "waiting")
	// Output:
	// 4 waiting
}
