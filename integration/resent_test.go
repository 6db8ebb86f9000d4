package integration

import (
	"context"
	"io"
	"net"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/internal/delay"
	"github.com/delaystream/delaystream/internal/mover"
	"github.com/delaystream/delaystream/internal/redistest"
	"github.com/delaystream/delaystream/internal/stream"
)

// lossyConn loses the first reply read after armed is set, once ready()
// returns (true: what the test waits for happened; false: it did not), as
// a connection killed after Redis ran the command and before its reply
// arrived would: go-redis then sends the command again on a new connection
// (MaxRetries, 3 by default).
type lossyConn struct {
	net.Conn
	armed *atomic.Bool
	ready func() bool
	hit   *atomic.Bool // ready() returned true when the reply was lost
}

func (c *lossyConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.armed.CompareAndSwap(true, false) {
		if c.ready() {
			c.hit.Store(true)
		}
		_ = c.Conn.Close()
		return 0, io.EOF
	}
	return n, err
}

// within returns a ready function for lossyClient that waits up to 3 s for
// done to be closed and reports whether it was.
func within(done <-chan struct{}) func() bool {
	return func() bool {
		select {
		case <-done:
			return true
		case <-time.After(3 * time.Second):
			return false
		}
	}
}

// lossyClient returns a client with go-redis's defaults whose connections
// lose one reply when armed is set (see lossyConn); hit reports that the
// reply lost was one after which ready() held.
func lossyClient(t *testing.T, addr string, armed, hit *atomic.Bool, ready func() bool) *redis.Client {
	opt := redistest.Options(t, addr)
	d := &net.Dialer{Timeout: time.Second}
	opt.Dialer = redistest.WrapDialer(t, func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &lossyConn{Conn: c, armed: armed, ready: ready, hit: hit}, nil
	})
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// resentServer returns a test server's address, a client of it, a prefix
// of the test's own and the main lane of queue under that prefix.
func resentServer(t *testing.T, queue string) (addr string, ctl *redis.Client, prefix string, lane stream.Lane) {
	t.Helper()
	addr, ctl, prefix = redistest.Addr(t), redistest.Client(t), redistest.Prefix(t)
	keys, err := stream.NewKeys(prefix, queue, 0, 1)
	require.NoError(t, err)
	return addr, ctl, prefix, keys.Main()
}

// A Schedule that go-redis sends again after its reply was lost, when the
// message of its first run was promoted in between, creates nothing more:
// one stream entry, at the due time the call returned. Found by the chaos
// program: without call tokens the second run created the message again,
// and it was delivered twice, the first time before the due time returned.
func TestScheduleSentAgainAfterPromotion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const queue = "resent"
	addr, ctl, prefix, lane := resentServer(t, queue)

	var armed, hit atomic.Bool
	promoted := newTally(2) // the warm-up + ours
	rdb := lossyClient(t, addr, &armed, &hit, within(promoted.done))
	startMover(t, ctl, prefix, queue, mover.WithHooks(promoted.hooks()))

	q, err := delay.New(rdb, queue, delay.WithPrefix(prefix))
	require.NoError(t, err)
	// Warm up: the shard-count check and the script load happen now.
	_, err = q.Schedule(ctx, delay.Message{ID: "warm-up"}, delay.After(0))
	require.NoError(t, err)
	require.Eventually(t, func() bool { n, _ := ctl.XLen(ctx, lane.Stream).Result(); return n == 1 }, 3*time.Second, 5*time.Millisecond)

	armed.Store(true)
	res, err := q.Schedule(ctx, delay.Message{ID: "order:1", Payload: []byte("x")}, delay.After(50*time.Millisecond))
	require.NoError(t, err)
	require.True(t, hit.Load(), "the call's reply was not lost after its first run: the test tested nothing")
	assert.Equal(t, delay.Created, res.Outcome)

	// A second run would have set a due time 50 ms after it ran, before the
	// call returned: a marker due 100 ms after now is promoted after it.
	_, err = q.Schedule(ctx, delay.Message{ID: "marker"}, delay.After(100*time.Millisecond))
	require.NoError(t, err)
	waitPromoted(ctx, t, ctl, lane.Stream, "marker")
	entries, err := ctl.XRange(ctx, lane.Stream, "-", "+").Result()
	require.NoError(t, err)
	var ours []redis.XMessage
	for _, e := range entries {
		if e.Values["i"] == "order:1" {
			ours = append(ours, e)
		}
	}
	require.Len(t, ours, 1, "one Schedule call, one message")
	assert.False(t, stream.EntryTime(ours[0].ID).Before(res.Due), "appended before the due time Schedule returned (%s)", res.Due.Format("15:04:05.000"))
	assert.Equal(t, ours[0].Values["d"], strconvMs(res.Due), "the entry's due time is the one Schedule returned")
}

// A Cancel sent again after its reply was lost reports what its first run
// did: true, the message was removed (a second run finds nothing and would
// say false, and a caller would think the message fired).
func TestCancelSentAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const queue = "resent-cancel"
	addr, ctl, prefix, lane := resentServer(t, queue)

	var armed, hit atomic.Bool
	rdb := lossyClient(t, addr, &armed, &hit, func() bool { n, _ := ctl.ZCard(ctx, lane.Delayed).Result(); return n == 0 })
	q, err := delay.New(rdb, queue, delay.WithPrefix(prefix))
	require.NoError(t, err)
	_, err = q.Schedule(ctx, delay.Message{ID: "order:2"}, delay.After(time.Hour))
	require.NoError(t, err)
	_, err = q.Cancel(ctx, "warm-up") // loads the script: the reply lost below is the call's
	require.NoError(t, err)

	armed.Store(true)
	ok, err := q.Cancel(ctx, "order:2")
	require.NoError(t, err)
	require.True(t, hit.Load(), "the call's reply was not lost after its first run: the test tested nothing")
	assert.True(t, ok, "Cancel removed the message and said it did not")
	n, err := ctl.ZCard(ctx, lane.Delayed).Result()
	require.NoError(t, err)
	assert.Zero(t, n)
}

// A Reschedule sent again after its reply was lost, when the message was
// promoted at its new due time in between, reports the new due time, not
// ErrNotFound.
func TestRescheduleSentAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const queue = "resent-reschedule"
	addr, ctl, prefix, lane := resentServer(t, queue)

	var armed, hit atomic.Bool
	promoted := newTally(1)
	rdb := lossyClient(t, addr, &armed, &hit, within(promoted.done))
	q, err := delay.New(rdb, queue, delay.WithPrefix(prefix))
	require.NoError(t, err)
	_, err = q.Schedule(ctx, delay.Message{ID: "order:3"}, delay.After(time.Hour))
	require.NoError(t, err)
	_, err = q.Reschedule(ctx, "warm-up", delay.After(time.Hour)) // loads the script
	require.ErrorIs(t, err, delay.ErrNotFound)
	startMover(t, ctl, prefix, queue, mover.WithHooks(promoted.hooks()))

	armed.Store(true)
	due, err := q.Reschedule(ctx, "order:3", delay.After(20*time.Millisecond))
	require.NoError(t, err, "the first run moved the message; the call must say so")
	require.True(t, hit.Load(), "the call's reply was not lost after its first run: the test tested nothing")
	// A second run would have set a due time 20 ms after it ran, before the
	// call returned: a marker due 100 ms after now is promoted after it.
	_, err = q.Schedule(ctx, delay.Message{ID: "marker"}, delay.After(100*time.Millisecond))
	require.NoError(t, err)
	waitPromoted(ctx, t, ctl, lane.Stream, "marker")
	entries, err := ctl.XRange(ctx, lane.Stream, "-", "+").Result()
	require.NoError(t, err)
	var ours []redis.XMessage
	for _, e := range entries {
		if e.Values["i"] == "order:3" {
			ours = append(ours, e)
		}
	}
	require.Len(t, ours, 1, "one Reschedule call, one entry")
	assert.Equal(t, strconvMs(due), ours[0].Values["d"])
}

// waitPromoted waits until the message id has an entry in the stream at key.
func waitPromoted(ctx context.Context, t *testing.T, rdb redis.UniversalClient, key, id string) {
	t.Helper()
	require.Eventually(t, func() bool {
		entries, err := rdb.XRange(ctx, key, "-", "+").Result()
		return err == nil && slices.ContainsFunc(entries, func(e redis.XMessage) bool { return e.Values["i"] == id })
	}, 5*time.Second, 5*time.Millisecond, "%s promoted within 5s", id)
}

// strconvMs is t as the stream entries' due field: Unix ms.
func strconvMs(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

// A Schedule of a generated id due After twice the call-token window
// carries no token; sent again after its reply was lost, its second run
// finds the message still waiting (nobody else knows the id, and it is not
// due): still one message, at the due time the call returned, and no token
// written.
func TestScheduleWithoutTokenSentAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const queue = "resent-far"
	addr, ctl, prefix, lane := resentServer(t, queue)

	var armed, hit atomic.Bool
	rdb := lossyClient(t, addr, &armed, &hit, func() bool { return true })
	q, err := delay.New(rdb, queue, delay.WithPrefix(prefix))
	require.NoError(t, err)
	// Warm up: the shard-count check and the script load happen now.
	_, err = q.Schedule(ctx, delay.Message{ID: "warm-up"}, delay.After(time.Hour))
	require.NoError(t, err)
	before, err := ctl.Keys(ctx, prefix+":*").Result()
	require.NoError(t, err)

	armed.Store(true)
	res, err := q.Schedule(ctx, delay.Message{Payload: []byte("x")}, delay.After(time.Hour))
	require.NoError(t, err)
	require.True(t, hit.Load(), "the call's reply was not lost after its first run: the test tested nothing")
	assert.Equal(t, delay.Created, res.Outcome)

	members, err := ctl.ZRangeWithScores(ctx, lane.Delayed, 0, -1).Result()
	require.NoError(t, err)
	require.Len(t, members, 2, "the warm-up and one message: %v", members)
	var ours []redis.Z
	for _, m := range members {
		if m.Member != "warm-up" {
			ours = append(ours, m)
		}
	}
	require.Len(t, ours, 1)
	assert.Equal(t, float64(res.Due.UnixMilli()), ours[0].Score, "the stored due time is the one Schedule returned")
	env, err := q.Get(ctx, res.ID)
	require.NoError(t, err)
	assert.Equal(t, "x", string(env.Payload))
	after, err := ctl.Keys(ctx, prefix+":*").Result()
	require.NoError(t, err)
	assert.ElementsMatch(t, before, after, "no call token written")
}
