// Package resent reproduces, alone, what the chaos run found: a Schedule
// call that go-redis re-sends after its connection dropped runs the
// schedule script twice. When the first run's message is promoted before
// the second run, the second creates the message again: two deliveries of
// one id, the first before the due time Schedule returned (After is
// resolved from Redis TIME at each run).
//
// It lives under testdata so that `go test ./...` does not run it while it
// fails; run it with
//
//	cd integration && go test -count=1 ./chaos/testdata/resent/
package resent

import (
	"context"
	"io"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/delay"
	"github.com/delaystream/delaystream/internal/redistest"
	"github.com/delaystream/delaystream/mover"
	"github.com/delaystream/delaystream/stream"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// dropConn loses the first reply read after armed is set, once promoted()
// is true (or after 3 s), as a connection killed after Redis ran the
// command and before the reply arrived would.
type dropConn struct {
	net.Conn
	armed    *atomic.Bool
	promoted func() bool
}

func (c *dropConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.armed.CompareAndSwap(true, false) {
		for deadline := time.Now().Add(3 * time.Second); !c.promoted() && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
		c.Conn.Close()
		return 0, io.EOF
	}
	return n, err
}

func TestScheduleResentAfterPromotion(t *testing.T) {
	ctx := context.Background()
	addr := redistest.Addr(t)
	ctl := redistest.Client(t)
	prefix := redistest.Prefix(t)
	const queue = "resent"
	keys, err := stream.NewKeys(prefix, queue, 0, 1)
	require.NoError(t, err)
	lane := keys.Main()

	var armed atomic.Bool
	promoted := func() bool { n, _ := ctl.XLen(ctx, lane.Stream).Result(); return n >= 2 } // the warm-up + ours
	opt := redistest.Options(t, addr)
	d := &net.Dialer{Timeout: time.Second}
	opt.Dialer = redistest.WrapDialer(t, func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &dropConn{Conn: c, armed: &armed, promoted: promoted}, nil
	})
	rdb := redis.NewClient(opt) // go-redis's defaults otherwise: MaxRetries 3
	t.Cleanup(func() { _ = rdb.Close() })

	m, err := mover.New(ctl, queue, mover.WithPrefix(prefix))
	require.NoError(t, err)
	mctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- m.Run(mctx) }()
	t.Cleanup(func() { stop(); <-done })

	q, err := delay.New(rdb, queue, delay.WithPrefix(prefix))
	require.NoError(t, err)
	// Warm up: the shard-count check and the script load happen now.
	_, err = q.Schedule(ctx, delay.Message{ID: "warm-up"}, delay.After(0))
	require.NoError(t, err)
	require.Eventually(t, func() bool { n, _ := ctl.XLen(ctx, lane.Stream).Result(); return n == 1 }, 3*time.Second, 5*time.Millisecond)

	armed.Store(true)
	res, err := q.Schedule(ctx, delay.Message{ID: "order:1", Payload: []byte("x")}, delay.After(50*time.Millisecond))
	require.NoError(t, err)
	t.Logf("Schedule returned %s, due %s", res.Outcome, res.Due.Format("15:04:05.000"))

	time.Sleep(500 * time.Millisecond) // past both due times
	entries, err := ctl.XRange(ctx, lane.Stream, "-", "+").Result()
	require.NoError(t, err)
	var ours []redis.XMessage
	for _, e := range entries {
		if e.Values["i"] == "order:1" {
			ours = append(ours, e)
			t.Logf("entry %s: due %v", e.ID, e.Values["d"])
		}
	}
	assert.Len(t, ours, 1, "one Schedule call, one message")
	for _, e := range ours {
		assert.False(t, stream.EntryTime(e.ID).Before(res.Due), "entry %s appended before the due time Schedule returned (%s)", e.ID, res.Due.Format("15:04:05.000"))
	}
}
