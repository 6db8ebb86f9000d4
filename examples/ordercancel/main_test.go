package main

import (
	"bytes"
	"fmt"
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
	s := out.String()
	t.Logf("output:\n%s", s)

	for _, o := range orders {
		if o.paidAt > 0 {
			// Paid in time: the auto-cancel was withdrawn and never delivered.
			assert.Contains(t, s, fmt.Sprintf("order %d  paid; auto-cancel withdrawn: true", o.id))
			assert.NotContains(t, s, cancelID(o.id))
			assert.Contains(t, s, fmt.Sprintf("order %d: paid\n", o.id))
		} else {
			assert.Equal(t, 1, strings.Count(s, fmt.Sprintf("order %d  unpaid at the deadline: cancelled (%s)", o.id, cancelID(o.id))))
			assert.Contains(t, s, fmt.Sprintf("order %d: cancelled\n", o.id))
		}
	}
	assert.Contains(t, s, "auto-cancels still waiting: 0")

	// Nothing waits any more, and the group acknowledged every entry.
	examplecheck.Settled(t, rdb, queueName, groupName)
}
