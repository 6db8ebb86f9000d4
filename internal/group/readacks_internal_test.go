package group

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Acknowledgements that ride with a read are settled even when Run was
// cancelled while the read was in flight and the server had to be given
// the ack script again (NOSCRIPT after a restart or SCRIPT FLUSH): the
// second call must not carry Run's ended context, or the entries would
// stay pending, be redelivered after the visibility timeout and a clean
// stop would log a failed XACK.
func TestReadAcksSettleAfterStop(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const n = 3
	rdb, layout, ids := readEntries(t, n)
	main := layout.Shard(0).Main().Stream
	require.NoError(t, rdb.ScriptFlush(ctx).Err())
	c, r, a := newAckerRun(rdb, layout)
	rd := newReader(r, &settler{r: r, ack: a, trim: a.trim})
	for _, id := range ids {
		a.add(ackReq{stream: main, id: id, success: true})
	}
	l := newReadLoop(rd, c.streams(), nil, nil)
	defer l.poll.Stop()
	defer l.retry.Stop()

	stopped, cancel := context.WithCancel(ctx)
	cancel() // Run was cancelled while the read was in flight
	nrs := rd.plan(stopped, l.streams, []int{0}, 1, &l.ackBuf)
	require.Len(t, nrs, 1)
	require.Len(t, nrs[0].acks.groups, 1, "the queued acknowledgements ride with the read")
	rd.exec(stopped, nrs[0], l.streams)
	_, _ = l.consume(stopped, nrs[0])

	assert.EqualValues(t, n, c.ctr.acked.Load(), "counted as acknowledged")
	p, err := rdb.XPending(ctx, main, "g").Result()
	require.NoError(t, err)
	assert.Zero(t, p.Count, "nothing left pending")
}
