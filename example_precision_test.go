package delaystream_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/delaystream/delaystream"
)

// At a precision of 100 ms, the messages due within one 100 ms bucket of
// the Redis clock are promoted by one call, at the bucket's end: none
// early, none more than about 100 ms late.
func ExampleWithPrecision() {
	rdb, done := exampleClient()
	defer done()
	var calls atomic.Int64
	q, err := delaystream.New(rdb, "reminders", quiet,
		delaystream.WithPrecision(100*time.Millisecond),
		delaystream.WithMoverHooks(delaystream.MoverHooks{
			OnPromote: func(string, int, int, time.Duration) { calls.Add(1) },
		}))
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()

	// Five messages due 90, 70, 50, 30 and 10 ms before the end of a bucket
	// at least 1.5 s ahead (buckets are aligned on multiples of 100 ms).
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		fmt.Println(err)
		return
	}
	end := time.UnixMilli((now.Add(1500*time.Millisecond).UnixMilli()/100 + 1) * 100)
	for i := range 5 {
		due := end.Add(-time.Duration(90-20*i) * time.Millisecond)
		if _, err := q.Schedule(ctx, delaystream.Message{ID: fmt.Sprint("r", i)}, delaystream.At(due)); err != nil {
			fmt.Println(err)
			return
		}
	}
	var mu sync.Mutex
	handled, early := 0, 0
	_, err = q.Handle("mail", func(ctx context.Context, d *delaystream.Delivery) error {
		at, err := rdb.Time(ctx).Result() // the Redis clock
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		if at.Before(d.Due) {
			early++
		}
		if handled++; handled == 5 {
			stop()
		}
		return nil
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := q.Run(ctx); err != nil {
		fmt.Println(err)
	}
	fmt.Println("handled:", handled, "early:", early)
	fmt.Println("promote calls:", calls.Load())
	// Output:
	// handled: 5 early: 0
	// promote calls: 1
}
