package admin_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/admin"
	"github.com/delaystream/delaystream/internal/loctest"
	"github.com/delaystream/delaystream/internal/redistest"
	"github.com/delaystream/delaystream/internal/seedtest"
)

// Locate finds a message of a queue by name: dead-lettered in one group,
// handled by the other; an unknown queue wraps ErrNotFound.
func TestLocate(t *testing.T) {
	t.Parallel()
	in, _ := seed(t)
	loc, err := locate(t, in, "jobs", "job-3")
	require.NoError(t, err)
	require.Len(t, loctest.InGroups(loc), 1)
	assert.Equal(t, "billing", loctest.InGroups(loc)[0].Group)
	assert.Equal(t, delaystream.PlaceDeadLettered, loctest.InGroups(loc)[0].Kind)
	assert.Equal(t, delaystream.ReasonHandler, loctest.InGroups(loc)[0].Reason)

	loc, err = locate(t, in, "orders", "later")
	require.NoError(t, err)
	require.NotNil(t, loctest.Waiting(loc))

	_, err = locate(t, in, "nosuch", "x")
	require.ErrorIs(t, err, delaystream.ErrNotFound)
}

// Once the Operator's Queue knows a queue's groups, Locate reads the
// queue's record and searches the message's shard in one script, nothing
// more: the Operator keeps the Queue between calls.
func TestLocateCalls(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	seedtest.Seed(t, rdb, prefix)
	var log redistest.CommandLog
	counted := redis.NewClient(redistest.Options(t, redistest.Addr(t)))
	t.Cleanup(func() { _ = counted.Close() })
	counted.AddHook(&log)
	in, err := admin.New(counted, prefix)
	require.NoError(t, err)
	_, err = locate(t, in, "jobs", "job-3") // learns the groups
	require.NoError(t, err)
	for range 2 {
		log.Take()
		loc, err := locate(t, in, "jobs", "job-3")
		require.NoError(t, err)
		assert.Equal(t, []string{"hget", "evalsha"}, log.Take(), "the kept Queue knows the groups")
		require.Len(t, loctest.InGroups(loc), 1)
		assert.Equal(t, delaystream.PlaceDeadLettered, loctest.InGroups(loc)[0].Kind)
	}
}

// locate locates message id in queue through in's Queue.
func locate(t *testing.T, in *admin.Operator, queue, id string) (delaystream.Location, error) {
	t.Helper()
	ctx := context.Background()
	q, err := in.Queue(ctx, queue)
	if err != nil {
		return delaystream.Location{}, err
	}
	return q.Locate(ctx, id)
}
