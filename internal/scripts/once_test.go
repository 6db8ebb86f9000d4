package scripts_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/internal/redistest"
	"github.com/delaystream/delaystream/internal/scripts"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// A call sent twice with its token (go-redis re-sends a command whose reply
// was lost) returns the first run's reply and changes nothing, even when
// what the first run wrote is gone by then (promoted): for schedule.lua
// with created, replaced, kept and refused messages and relative and
// absolute due times, schedule_generated.lua, cancel.lua and
// reschedule.lua.
func TestCallTokenReplays(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	p := redistest.Prefix(t) + ":1:{q}"
	z, m, tok := p+":z", p+":m", p+":k:"
	const ttl = 60000
	run := func(s *redis.Script, keys []string, args ...any) []any {
		t.Helper()
		v, err := s.Run(ctx, rdb, keys, args...).Slice()
		require.NoError(t, err)
		return v
	}
	snapshot := func() map[string]string { return redistest.Keys(t, rdb, redistest.Prefix(t)) }

	// Already waiting: "kept" (policy keep) and "refused" (policy refuse).
	require.NoError(t, rdb.ZAdd(ctx, z, redis.Z{Score: 4e12, Member: "kept"}, redis.Z{Score: 4.1e12, Member: "refused"},
		redis.Z{Score: 4.2e12, Member: "replaced"}).Err())
	require.NoError(t, rdb.HSet(ctx, m, "kept", "\xd5\x01x", "refused", "\xd5\x01y", "replaced", "\xd5\x01z").Err())
	args := []any{"", // no wake channel
		"new", "\xd5\x01a", "r5000", "k",
		"kept", "\xd5\x01b", "r5000", "k",
		"refused", "\xd5\x01c", "a3000000000000", "e",
		"replaced", "\xd5\x01d", "a3000000000001", "r",
		"", "\x01ABCDEFGHJKMNPQRS\xd5\x01e", "r100", "k",
		ttl}
	keys := []string{z, m, tok + "s1"}
	first := run(scripts.Schedule, keys, args...)
	require.Len(t, first, 10)
	assert.Equal(t, []any{int64(1), int64(3), int64(4), int64(2), int64(1)}, []any{first[0], first[2], first[4], first[6], first[8]})
	assert.EqualValues(t, 4e12, first[3], "kept: its stored due time")
	assert.EqualValues(t, 4.1e12, first[5], "refused: its stored due time")
	assert.EqualValues(t, 3000000000001, first[7])
	// What the first run wrote is promoted away; a second run of the call
	// answers the same and writes nothing.
	require.NoError(t, rdb.Del(ctx, z, m).Err())
	before := snapshot()
	again := run(scripts.Schedule, keys, args...)
	assert.Equal(t, first, again)
	assert.Equal(t, before, snapshot(), "the second run wrote something")

	gargs := []any{"", "\x01ABCDEFGHJKMNPQRS\xd5\x01e", "r100", "\x01BBCDEFGHJKMNPQRS\xd5\x01f", "a3000000000002", ttl}
	gkeys := []string{z, tok + "g1"}
	first = run(scripts.ScheduleGenerated, gkeys, gargs...)
	require.NoError(t, rdb.Del(ctx, z).Err())
	before = snapshot()
	assert.Equal(t, first, run(scripts.ScheduleGenerated, gkeys, gargs...))
	assert.Equal(t, before, snapshot(), "the second run wrote something")

	require.NoError(t, rdb.ZAdd(ctx, z, redis.Z{Score: 4e12, Member: "c"}).Err())
	require.NoError(t, rdb.HSet(ctx, m, "c", "\xd5\x01x").Err())
	ckeys := []string{z, m, tok + "c1"}
	n, err := scripts.Cancel.Run(ctx, rdb, ckeys, "c", ttl).Int64()
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	n, err = scripts.Cancel.Run(ctx, rdb, ckeys, "c", ttl).Int64()
	require.NoError(t, err)
	assert.EqualValues(t, 1, n, "a second run of a cancel that removed the message says so")

	require.NoError(t, rdb.ZAdd(ctx, z, redis.Z{Score: 4e12, Member: "r"}).Err())
	require.NoError(t, rdb.HSet(ctx, m, "r", "\xd5\x01x").Err())
	rkeys := []string{z, m, tok + "r1"}
	due, err := scripts.Reschedule.Run(ctx, rdb, rkeys, "r", "r1000", "", ttl).Int64()
	require.NoError(t, err)
	require.Positive(t, due)
	require.NoError(t, rdb.Del(ctx, z, m).Err()) // promoted
	again2, err := scripts.Reschedule.Run(ctx, rdb, rkeys, "r", "r1000", "", ttl).Int64()
	require.NoError(t, err)
	assert.Equal(t, due, again2, "a second run of a reschedule that moved the message says so")

	pttl, err := rdb.PTTL(ctx, tok+"s1").Result()
	require.NoError(t, err)
	assert.Positive(t, pttl)
	assert.LessOrEqual(t, pttl.Milliseconds(), int64(ttl))
	v, err := rdb.Get(ctx, tok+"s1").Result()
	require.NoError(t, err)
	assert.Less(t, len(v), 64, "a token holds a few bytes (now, statuses, kept due times), not the reply: %q", v)
}

// A token key holding bytes this library did not write there (or a record
// that does not fit the call) does not make the call fail: it runs as a
// first run and overwrites it.
func TestCallTokenForeignValues(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	p := redistest.Prefix(t) + ":1:{q}"
	z, m, tok := p+":z", p+":m", p+":k:"
	const ttl = 60000
	for i, v := range []string{"", "garbage", "\x00\xff", "123|9|", "123|11|", "123|3|", "-5", "1|2|3|4"} {
		k := tok + "f" + string(rune('a'+i))
		require.NoError(t, rdb.Set(ctx, k, v, 0).Err())
		out, err := scripts.Schedule.Run(ctx, rdb, []string{z, m, k}, "", "id"+string(rune('a'+i)), "\xd5\x01a", "r1000", "k", ttl).Slice()
		require.NoError(t, err, "value %q", v)
		require.Len(t, out, 2, "value %q", v)
		assert.EqualValues(t, 1, out[0], "value %q: created by this run", v)
		n, err := rdb.ZScore(ctx, z, "id"+string(rune('a'+i))).Result()
		require.NoError(t, err, "value %q: written", v)
		assert.Positive(t, n)

		gk := tok + "g" + string(rune('a'+i))
		require.NoError(t, rdb.Set(ctx, gk, v, 0).Err())
		_, err = scripts.ScheduleGenerated.Run(ctx, rdb, []string{z, gk}, "", "\x01ABCDEFGHJKMNPQR"+string(rune('A'+i))+"\xd5\x01e", "r100", ttl).Slice()
		require.NoError(t, err, "value %q", v)

		ck := tok + "c" + string(rune('a'+i))
		require.NoError(t, rdb.Set(ctx, ck, v, 0).Err())
		c, err := scripts.Cancel.Run(ctx, rdb, []string{z, m, ck}, "id"+string(rune('a'+i)), ttl).Int64()
		require.NoError(t, err, "value %q", v)
		assert.EqualValues(t, 1, c, "value %q: cancelled by this run", v)

		rk := tok + "r" + string(rune('a'+i))
		require.NoError(t, rdb.Set(ctx, rk, v, 0).Err())
		_, err = scripts.Reschedule.Run(ctx, rdb, []string{z, m, rk}, "missing", "r1000", "", ttl).Int64()
		require.NoError(t, err, "value %q", v)
	}
}

// schedule_generated.lua stores its call record before it adds (one SET
// NX GET), so a delayed set of the wrong type must fail the call before
// the record is stored: otherwise the call sent again would report
// messages created that never were. So must it when the call spares the
// head check (no wake channel, or a message due beyond the wake horizon).
func TestCallTokenNotStoredWhenTheCallFails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	p := redistest.Prefix(t) + ":1:{q}"
	z := p + ":z"
	require.NoError(t, rdb.Set(ctx, z, "not a sorted set", 0).Err())
	far := fmt.Sprintf("r%d", (scripts.WakeHorizon + time.Second).Milliseconds())
	for i, c := range [][2]string{{"", "r100"}, {"w", "r100"}, {"w", far}, {"", far}} {
		tok := fmt.Sprintf("%s:k:g%d", p, i)
		args := []any{c[0], "\x01ABCDEFGHJKMNPQRS\xd5\x01e", c[1], 60000}
		for range 2 { // the call, and the same call sent again
			_, err := scripts.ScheduleGenerated.Run(ctx, rdb, []string{z, tok}, args...).Slice()
			require.ErrorContains(t, err, "WRONGTYPE", "channel %q, when %s", c[0], c[1])
		}
		n, err := rdb.Exists(ctx, tok).Result()
		require.NoError(t, err)
		assert.Zero(t, n, "no call record for a call that failed (channel %q, when %s)", c[0], c[1])
	}
}
