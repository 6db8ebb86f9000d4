package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/admin"
	"github.com/delaystream/delaystream/internal/redistest"
	"github.com/delaystream/delaystream/internal/shards"
	"github.com/delaystream/delaystream/internal/stream"
)

// OldestPendingEntryAgeMs is what its name says: the age of the oldest
// pending entry since it was appended to its stream, however recently it
// was delivered (an entry that waited 3 s to be read and was read just
// now is 3 s old).
func TestOldestPendingEntryAge(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	ctx := context.Background()
	l, err := stream.NewLayout(prefix, "q", 1)
	require.NoError(t, err)
	require.NoError(t, shards.NewGuard(l, "producer").Check(ctx, rdb))
	key := l.Shard(0).Main().Stream
	now, err := rdb.Time(ctx).Result()
	require.NoError(t, err)
	appended := now.UnixMilli() - 3000
	require.NoError(t, rdb.XAdd(ctx, &redis.XAddArgs{Stream: key, ID: fmt.Sprintf("%d-0", appended), Values: []string{"i", "x"}}).Err())
	require.NoError(t, rdb.XGroupCreate(ctx, key, "g", "0").Err())
	require.NoError(t, rdb.XGroupCreateMkStream(ctx, l.Shard(0).Retry("g").Stream, "g", "0").Err()) // as a consumer makes it
	require.NoError(t, rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: "c", Streams: []string{key, ">"}, Count: 1, Block: -1}).Err())

	// The entry's idle time (since delivered), read before the age: the
	// age is at least 3 s more whatever the time between the calls, since
	// the entry was appended 3 s before it was read.
	p, err := rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: key, Group: "g", Start: "-", End: "+", Count: 1}).Result()
	require.NoError(t, err)
	require.Len(t, p, 1)
	in, err := admin.New(rdb, prefix)
	require.NoError(t, err)
	gs, err := in.Groups(ctx, "q")
	require.NoError(t, err)
	require.Len(t, gs, 1)
	assert.EqualValues(t, 1, gs[0].Pending)
	// 1 ms less: both are whole milliseconds.
	assert.GreaterOrEqual(t, gs[0].OldestPendingEntryAgeMs, p[0].Idle.Milliseconds()+3000-1, "since appended, not since delivered")
	assert.Less(t, gs[0].OldestPendingEntryAgeMs, int64(60000))

	b, err := json.Marshal(gs[0])
	require.NoError(t, err)
	assert.Contains(t, string(b), `"oldest_pending_entry_age_ms":`)
}
