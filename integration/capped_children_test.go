package integration

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/integration/internal/harness"
	"github.com/delaystream/delaystream/internal/stream"
)

// The capped children's group: cappedWorkers handlers per process, at most
// cappedLimit at once in all of them, each handling a message in
// cappedWork. The group runs at its default visibility timeout and
// reclaim interval.
const (
	cappedGroup   = "g"
	cappedLimit   = 10
	cappedWorkers = 8
	cappedWork    = 50 * time.Millisecond
)

// Keys of the capped children's records, after the prefix (one hash tag).
const (
	cappedRunning = ":{capped}:running" // HASH process -> handlers running now
	cappedMost    = ":{capped}:most"    // STRING the most handlers seen running at once, in all processes
	cappedLedger  = ":{capped}:ledger"  // LIST "<process> <entry id> <Redis µs>", one per handler start
)

// cappedStart records a handler's start: it counts it running, keeps the
// most running at once in all processes, and appends it to the ledger
// with the time by the Redis clock.
var cappedStart = redis.NewScript(`
redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
local n = 0
for _, v in ipairs(redis.call('HVALS', KEYS[1])) do
  n = n + tonumber(v)
end
if n > (tonumber(redis.call('GET', KEYS[2])) or 0) then
  redis.call('SET', KEYS[2], n)
end
local t = redis.call('TIME')
redis.call('RPUSH', KEYS[3], ARGV[1] .. ' ' .. ARGV[2] .. ' ' .. t[1] .. string.format('%06d', tonumber(t[2])))
return n
`)

// cappedChild returns the Run of a child that runs a Queue (promotion and
// the group) whose handlers record their starts (cappedStart) and their
// ends in Redis.
func cappedChild(cfg childSpec, tc *tls.Config, logger *slog.Logger) (func(context.Context) error, error) {
	rdb := redis.NewClient(&redis.Options{Addr: cfg.Addrs[0], TLSConfig: tc})
	q, err := delaystream.New(rdb, cfg.Queue, delaystream.WithPrefix(cfg.Prefix), delaystream.WithLogger(logger),
		delaystream.WithDrainTimeout(time.Second))
	if err != nil {
		return nil, err
	}
	keys := []string{cfg.Prefix + cappedRunning, cfg.Prefix + cappedMost, cfg.Prefix + cappedLedger}
	_, err = q.Handle(cappedGroup, func(ctx context.Context, d *delaystream.Delivery) error {
		if err := cappedStart.Run(ctx, rdb, keys, cfg.Name, d.EntryID).Err(); err != nil {
			return err
		}
		defer rdb.HIncrBy(context.WithoutCancel(ctx), keys[0], cfg.Name, -1) // ended: before its slot is freed
		select {
		case <-time.After(cappedWork):
		case <-ctx.Done():
		}
		return nil
	}, delaystream.WithWorkers(cappedWorkers), delaystream.WithConcurrencyLimit(cappedLimit), delaystream.WithConsumerName(cfg.Name))
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		defer rdb.Close()
		return q.Run(ctx)
	}, nil
}

// Crashed work goes first under a saturated concurrency cap, across
// processes: three processes of 8 workers share a cap of 10 over a
// backlog, and one is killed (SIGKILL) while it runs handlers. Every entry
// it left pending is handled again by the others within 4 s of the kill
// (the visibility timeout + the reclaim interval + one handler time, and
// a margin), while the backlog still waits, and never do more than 10
// handlers run at once in all processes.
func TestCappedChildrenKilled(t *testing.T) {
	t.Parallel()
	heavy.RLock() // timing is the subject
	defer heavy.RUnlock()
	ctx := t.Context()
	rdb, addr := harness.RedisAddr(t)
	prefix := harness.Prefix(t, rdb)
	const (
		queue   = "capped"
		backlog = 3000 // 15 s of work at the cap
		bound   = 4 * time.Second
	)
	q, err := delaystream.New(rdb, queue, delaystream.WithPrefix(prefix))
	require.NoError(t, err)
	items := make([]delaystream.Item, backlog)
	for i := range items {
		items[i] = delaystream.Item{Message: delaystream.Message{ID: fmt.Sprintf("m%d", i), Payload: []byte("x")}, When: delaystream.After(0)}
	}
	_, err = q.ScheduleBatch(ctx, items)
	require.NoError(t, err)

	spec := func(name string) childSpec {
		return childSpec{Role: "capped", Addrs: []string{addr}, Prefix: prefix, Queue: queue, Name: name}
	}
	victim := startProc(t, "victim", spec("victim"))
	startProc(t, "survivor-1", spec("survivor-1"))
	startProc(t, "survivor-2", spec("survivor-2"))

	// Kill the victim once the cap is full and it runs 4 handlers or more.
	require.Eventually(t, func() bool {
		run, err := rdb.HGetAll(ctx, prefix+cappedRunning).Result()
		if err != nil || len(run) < 3 {
			return false
		}
		n, _ := strconv.Atoi(run["victim"])
		total := 0
		for _, v := range run {
			k, _ := strconv.Atoi(v)
			total += k
		}
		return n >= 4 && total == cappedLimit
	}, 20*time.Second, time.Millisecond, "the cap is full, the victim runs 4 handlers or more")
	victim.kill()
	killed := redisNow(ctx, t, rdb)
	// Its handlers run no more; its slots in the group's flow state stay
	// counted until they lapse.
	require.NoError(t, rdb.HDel(ctx, prefix+cappedRunning, "victim").Err())
	layout, err := stream.NewLayout(prefix, queue, 1)
	require.NoError(t, err)
	main := layout.Shard(0).Main().Stream
	left, err := rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: main, Group: cappedGroup, Start: "-", End: "+",
		Count: 100, Consumer: "victim"}).Result()
	require.NoError(t, err)
	require.NotEmpty(t, left, "the victim left entries pending")

	// When each of them was handled again, by the ledger.
	again := map[string]time.Time{}
	var seen int64 // ledger lines read: handler starts
	var bad []string
	require.Eventually(t, func() bool {
		lines, err := rdb.LRange(ctx, prefix+cappedLedger, seen, -1).Result()
		if err != nil {
			return false
		}
		seen += int64(len(lines))
		for _, l := range lines {
			f := strings.Fields(l)
			var us int64
			if len(f) == 3 {
				us, err = strconv.ParseInt(f[2], 10, 64)
			}
			if len(f) != 3 || err != nil {
				bad = append(bad, l)
				continue
			}
			if _, ok := again[f[1]]; !ok && f[0] != "victim" {
				again[f[1]] = time.UnixMicro(us)
			}
		}
		return !slices.ContainsFunc(left, func(p redis.XPendingExt) bool { _, ok := again[p.ID]; return !ok })
	}, 20*time.Second, 10*time.Millisecond, "every entry the victim left is handled again")
	require.Empty(t, bad, "ledger lines that do not parse")

	var took []time.Duration
	for _, p := range left {
		d := again[p.ID].Sub(killed)
		took = append(took, d)
		assert.LessOrEqual(t, d, bound, "entry %s handled again late", p.ID)
	}
	slices.Sort(took)
	t.Logf("the victim left %d entries; handled again after %v; %d of %d messages started by then", len(left), took, seen, backlog)
	assert.Less(t, seen, int64(backlog), "the backlog still waits")
	most, err := rdb.Get(ctx, prefix+cappedMost).Int()
	require.NoError(t, err)
	assert.LessOrEqual(t, most, cappedLimit, "never more handlers at once than the cap")
	assert.Equal(t, cappedLimit, most, "the cap was full")
}
