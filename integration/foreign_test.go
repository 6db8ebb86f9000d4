package integration

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/codec"
	"github.com/delaystream/delaystream/integration/internal/harness"
	"github.com/delaystream/delaystream/internal/group"
	"github.com/delaystream/delaystream/internal/stream"
	"github.com/delaystream/delaystream/internal/wire"
)

// foreignEntry is an entry someone else appended to one of our streams,
// and what its dead letter must say.
type foreignEntry struct {
	name   string
	retry  bool   // appended to g1's retry lane instead of the queue's stream
	values any    // XADD values
	errHas string // in the dead letter's LastError
	id     string // the entry id XADD returned
}

// TestForeignStreamEntries appends entries that this library never writes
// to a running queue's stream and to one group's retry lane: missing
// fields, garbage values, an unknown envelope version, a 16 MiB field and
// an entry of 5000 fields. Each ends in the dead letters of every group
// that reads it (the retry lane's in g1's only) with the reason
// "undecodable entry" and a short error saying what was wrong, the good
// messages around them are all delivered to both groups, and no log
// line or dead-letter error quotes a huge value. What a dead letter keeps
// of the entry is its known fields ("i", "d", "e", "p") as found, whatever
// their size (so that it can be inspected, or redriven by a build that
// reads it), and nothing of its unknown fields.
func TestForeignStreamEntries(t *testing.T) {
	t.Parallel()
	heavy.Lock() // a load test: 16 MiB entries (see heavy)
	t.Cleanup(heavy.Unlock)
	ctx := context.Background()
	rdb := harness.Redis(t)
	prefix := harness.Prefix(t, rdb)
	w := startWTQueue(t, rdb, prefix, "f", []string{"g1", "g2"})
	layout, err := stream.NewLayout(prefix, "f", 1)
	require.NoError(t, err)
	keys := layout.Shard(0)

	good := func(from, to int) []string {
		var out []string
		for i := from; i < to; i++ {
			out = append(out, "good-"+strconv.Itoa(i))
		}
		return out
	}
	before, after := good(0, 50), good(50, 100)
	w.schedule(ctx, t, before...)
	w.waitAcked(t, "g1", before, 20*time.Second)
	w.waitAcked(t, "g2", before, 20*time.Second)

	valid := wire.MarshalEnvelope(&codec.Envelope{Payload: []byte("p"), Attempt: 1, Created: time.Now()})
	newer := append([]byte(nil), valid...)
	newer[1] = 99 // a future envelope version
	const huge = 16 << 20
	many := make([]any, 0, 2*5000)
	for i := range 5000 {
		many = append(many, "f"+strconv.Itoa(i), strings.Repeat("v", 100))
	}
	due := strconv.FormatInt(time.Now().UnixMilli(), 10)
	entries := []*foreignEntry{
		{name: "no fields we know", values: []any{"x", "1"}, errHas: `field "d" missing`},
		{name: "no id", values: []any{"d", due, "e", string(valid)}, errHas: `field "i" missing`},
		{name: "no envelope", values: []any{"d", due, "i", "lonely"}, errHas: `field "e" missing`},
		{name: "garbage due", values: []any{"d", "soon", "i", "x", "e", string(valid)}, errHas: "is not an integer"},
		{name: "garbage envelope", values: []any{"d", due, "i", "x", "e", "garbage"}, errHas: "missing envelope magic byte"},
		{name: "truncated envelope", values: []any{"d", due, "i", "x", "e", string(valid[:3])}, errHas: "corrupt envelope"},
		{name: "unknown envelope version", values: []any{"d", due, "i", "x", "e", string(newer)}, errHas: "envelope version 99"},
		{name: "garbage packed member", values: []any{"d", due, "p", "\x01not-base32-at-all!" + string(valid)}, errHas: "not base32"},
		{name: "16 MiB due", values: []any{"d", strings.Repeat("9x", huge/2), "i", "x", "e", string(valid)}, errHas: "more bytes)"},
		{name: "16 MiB envelope", values: []any{"d", due, "i", "big", "e", strings.Repeat("\xff", huge)}, errHas: "missing envelope magic byte"},
		{name: "5000 fields", values: many, errHas: `field "d" missing`},
		{name: "retry lane: no fields we know", retry: true, values: []any{"x", "1"}, errHas: `field "d" missing`},
		{name: "retry lane: unknown envelope version", retry: true, values: []any{"d", due, "i", "x", "e", string(newer)}, errHas: "envelope version 99"},
	}
	for _, e := range entries {
		key := keys.Main().Stream
		if e.retry {
			key = keys.Retry("g1").Stream
		}
		id, err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: key, Values: e.values}).Result()
		require.NoError(t, err, e.name)
		e.id = id
	}
	w.schedule(ctx, t, after...)

	// Every good message is delivered to both groups.
	w.waitAcked(t, "g1", after, 30*time.Second)
	w.waitAcked(t, "g2", after, 30*time.Second)

	// Every foreign entry is dead-lettered, with a reason, by every group
	// that reads it.
	for _, g := range []string{"g1", "g2"} {
		want := 0
		for _, e := range entries {
			if !e.retry || g == "g1" {
				want++
			}
		}
		dl := w.dead(g)
		var got []group.DeadEntry
		require.Eventually(t, func() bool {
			var err error
			got, err = dl.List(ctx, "", 100)
			return err == nil && len(got) >= want
		}, 30*time.Second, 50*time.Millisecond, "group %s: %d dead letters", g, want)
		require.Len(t, got, want, "group %s: nothing else is dead-lettered", g)
		bySource := map[string]group.DeadEntry{}
		for _, d := range got {
			bySource[d.SourceID] = d
		}
		for _, e := range entries {
			if e.retry && g != "g1" {
				continue
			}
			d, ok := bySource[e.id]
			if !assert.True(t, ok, "group %s: %s (%s) dead-lettered", g, e.name, e.id) {
				continue
			}
			assert.Equal(t, group.ReasonUndecodable, d.Reason, "%s: %s", g, e.name)
			assert.Contains(t, d.LastError, e.errHas, "%s: %s", g, e.name)
			assert.Less(t, len(d.LastError), 1024, "%s: %s: the error quotes no huge value", g, e.name)
			assert.False(t, d.Decoded, "%s: %s", g, e.name)
			switch e.name {
			case "16 MiB envelope":
				assert.Len(t, d.Raw, huge, "the envelope is kept as found")
			case "5000 fields":
				// Only the dead letter's own fields: none of the 5000.
				raw, err := rdb.XRangeN(ctx, dl.Key(), d.EntryID, d.EntryID, 1).Result()
				require.NoError(t, err)
				require.Len(t, raw, 1)
				assert.Less(t, len(raw[0].Values), 12, "fields kept of a 5000-field entry")
			}
		}
		c := w.cons[g].Counters()
		assert.EqualValues(t, want, c.DeadLettered, "group %s: counted", g)
	}

	// Nothing was lost (delivery is at least once: a slow run may reclaim
	// and deliver an entry twice), and nothing is left pending.
	for _, g := range []string{"g1", "g2"} {
		assert.Empty(t, w.acks.missing(g, append(before, after...)), g)
		require.Eventually(t, func() bool {
			st, err := w.cons[g].Stats(ctx)
			return err == nil && st.Pending == 0
		}, 10*time.Second, 50*time.Millisecond, "group %s: nothing pending", g)
	}
	// No log line carries a huge value.
	w.log.mu.Lock()
	assert.Less(t, w.log.max, 4096, "the longest log record, as text")
	w.log.mu.Unlock()
}
