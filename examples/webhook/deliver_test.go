package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/dstest"
)

// The handler alone, on a queue whose clock the test moves: a 429 with
// Retry-After: 1 is retried one second later, not after the backoff; the
// 503 that follows waits for the backoff; the third attempt succeeds.
func TestDeliverHonoursRetryAfter(t *testing.T) {
	ctx := context.Background()
	q := dstest.New(t, queueName)
	_, err := q.Schedule(ctx, delaystream.Message{ID: "delivery:1", Headers: map[string]string{"url": flakyURL}}, delaystream.After(0))
	require.NoError(t, err)
	eps := &endpoints{calls: map[string]int{}}
	delivered := make(chan string, 1)
	h := deliver(eps, func(string, ...any) {}, delivered)
	_, err = q.Handle(groupName, h, delaystream.WithMaxAttempts(3), delaystream.WithBackoff(delaystream.ConstantBackoff(time.Minute)))
	require.NoError(t, err)

	done, err := q.Work(ctx, groupName)
	require.NoError(t, err)
	require.Len(t, done, 1)
	assert.Equal(t, delaystream.HandlerRetried, done[0].Outcome)
	assert.Equal(t, q.Now().Add(time.Second), done[0].RetryAt, "Retry-After: 1, not the 1 min backoff")

	q.Advance(time.Second)
	done, err = q.Work(ctx, groupName)
	require.NoError(t, err)
	require.Len(t, done, 1)
	assert.Equal(t, 2, done[0].Attempt)
	assert.Equal(t, delaystream.HandlerRetried, done[0].Outcome)
	assert.Equal(t, q.Now().Add(time.Minute), done[0].RetryAt, "a 503 waits for the backoff")

	q.Advance(time.Minute)
	done, err = q.Work(ctx, groupName)
	require.NoError(t, err)
	require.Len(t, done, 1)
	assert.Equal(t, 3, done[0].Attempt)
	assert.Equal(t, delaystream.HandlerAcked, done[0].Outcome)
	assert.Equal(t, "delivery:1", <-delivered)
}
