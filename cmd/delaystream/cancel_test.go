package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/admin"
	"github.com/delaystream/delaystream/internal/redistest"
)

// cancel takes many ids and an id prefix; --dry-run and a refusal write
// nothing; ids not waiting are reported and exit 3.
func TestCancelMany(t *testing.T) {
	t.Parallel()
	tg := single(t)
	seed(t, tg)
	rdb := tg.client(t)
	q, err := delaystream.New(rdb, "orders", delaystream.WithPrefix(tg.prefix))
	require.NoError(t, err)
	for _, id := range []string{"order:1:a", "order:1:b", "order:2:a", "order*x"} {
		_, err := q.Schedule(context.Background(), delaystream.Message{ID: id}, delaystream.After(time.Hour))
		require.NoError(t, err)
	}
	before := redistest.Keys(t, rdb, tg.prefix)

	var res admin.ActionResult
	tg.json(t, &res, "cancel", "orders", "--id-prefix", "order:1:", "--dry-run")
	assert.True(t, res.DryRun)
	assert.Equal(t, 2, res.Matched)
	assert.Equal(t, []string{"order:1:a", "order:1:b"}, res.IDs)
	tg.json(t, &res, "cancel", "orders", "--id-prefix", "order*", "--dry-run")
	assert.Equal(t, []string{"order*x"}, res.IDs, "glob characters are literal")
	r := tg.run(t, "cancel", "orders", "--id-prefix", "order:")
	assert.Equal(t, exitNotConfirmd, r.code)
	assert.Contains(t, r.stderr, "cancel 3 waiting messages of queue orders without --yes")
	assert.Equal(t, exitUsage, tg.run(t, "cancel", "orders").code, "neither ids nor a prefix")
	assert.Equal(t, before, redistest.Keys(t, rdb, tg.prefix), "a dry run or a refusal wrote something")

	r = tg.run(t, "cancel", "orders", "order:2:a", "soon", "nope", "--yes")
	assert.Equal(t, exitNotFound, r.code)
	assert.Equal(t, "cancelled 2 waiting messages of orders\n  order:2:a\n  soon\n  not waiting: nope\n", r.stdout)
	tg.json(t, &res, "cancel", "orders", "--id-prefix", "order:1:", "--yes")
	assert.Equal(t, 2, res.Done)
	n, err := q.Len(context.Background())
	require.NoError(t, err)
	assert.Equal(t, int64(3), n, "late, later and order*x wait")
}
