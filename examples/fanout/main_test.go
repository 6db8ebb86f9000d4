package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/examples/internal/examplecheck"
)

func TestRun(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })

	var out bytes.Buffer
	require.NoError(t, run(t.Context(), rdb, &out))
	t.Logf("output:\n%s", out.String())

	// Each group handled each message exactly once.
	for _, u := range users {
		id := "trial:" + u + ":end"
		assert.Equal(t, 1, strings.Count(out.String(), "billing  charged "+u+" for the first month ("+id+")"), u)
		assert.Equal(t, 1, strings.Count(out.String(), "email    sent \"Your trial has ended\" to "+u+" ("+id+")"), u)
	}
	assert.Contains(t, out.String(), "done: billing acked 3, email acked 3")

	// Both groups read the whole stream and acknowledged everything.
	examplecheck.Settled(t, rdb, queueName, "billing", "email")
}
