// Package examplecheck holds what the example programs' tests check in
// Redis once a program has finished, through the delaystream API as any
// program would.
package examplecheck

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
)

// Settled checks that queue (unsharded, default prefix) has no message
// waiting and that each of groups exists and has nothing pending, nothing
// waiting for a retry and no dead letters. It returns the groups' figures,
// by name, for further checks.
func Settled(t *testing.T, rdb redis.UniversalClient, queue string, groups ...string) map[string]delaystream.GroupStats {
	t.Helper()
	q, err := delaystream.New(rdb, queue, delaystream.WithoutPromotion())
	require.NoError(t, err)
	waiting, err := q.Len(t.Context())
	require.NoError(t, err)
	assert.Zero(t, waiting, "messages still waiting in %s", queue)

	out := make(map[string]delaystream.GroupStats, len(groups))
	for _, name := range groups {
		// Handle only names the group: the queue never runs, so this
		// handler never does.
		g, err := q.Handle(name, func(context.Context, *delaystream.Delivery) error { return nil })
		require.NoError(t, err)
		st, err := g.Stats(t.Context())
		require.NoError(t, err)
		assert.Positive(t, st.Consumers, "group %s has no consumer: it never ran", name)
		assert.Zero(t, st.Pending, "group %s left entries unacknowledged", name)
		assert.Zero(t, st.RetryWaiting, "group %s has retries waiting", name)
		assert.Zero(t, st.DeadLetters, "group %s has dead letters", name)
		out[name] = st
	}
	return out
}
