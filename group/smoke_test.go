package group_test

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/delay"
	"github.com/delaystream/delaystream/group"
	"github.com/delaystream/delaystream/internal/redistest"
	"github.com/delaystream/delaystream/mover"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

func TestSmokeFanOutRetry(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	p := redistest.Prefix(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	q, err := delay.New(rdb, "q", delay.WithPrefix(p))
	require.NoError(t, err)
	const n = 500
	items := make([]delay.Item, n)
	for i := range items {
		items[i] = delay.Item{Message: delay.Message{Payload: []byte("x")}, When: delay.After(time.Duration(i%200) * time.Millisecond)}
	}
	_, err = q.ScheduleBatch(ctx, items)
	require.NoError(t, err)
	mv, err := mover.New(rdb, "q", mover.WithPrefix(p))
	require.NoError(t, err)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = mv.Run(ctx) }()
	type key struct {
		g  string
		id string
		a  int
	}
	var mu sync.Mutex
	seen := map[key]int{}
	var cons []*group.Consumer
	for _, g := range []string{"a", "b", "c"} {
		c, err := group.New(rdb, "q", g, func(ctx context.Context, m *group.Message) error {
			mu.Lock()
			seen[key{g, m.ID, m.Attempt}]++
			mu.Unlock()
			if g == "a" && m.Attempt == 1 {
				return errors.New("first attempt fails")
			}
			return nil
		}, group.WithPrefix(p), group.WithBackoff(group.ConstantBackoff(100*time.Millisecond)))
		require.NoError(t, err)
		cons = append(cons, c)
		wg.Add(1)
		go func() { defer wg.Done(); require.NoError(t, c.Run(ctx)) }()
	}
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == 4*n
	}, 20*time.Second, 20*time.Millisecond)
	mu.Lock()
	for k, v := range seen {
		require.Equal(t, 1, v, "%+v", k)
	}
	mu.Unlock()
	st, err := cons[0].Stats(ctx)
	require.NoError(t, err)
	t.Logf("stats a: %+v counters %+v", st, cons[0].Counters())
	cancel()
	wg.Wait()
}
