package web_test

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/admin"
	"github.com/delaystream/delaystream/internal/redistest"
	"github.com/delaystream/delaystream/internal/stream"
)

// The queue page's quarantine rows have Restore (when the entry names a
// message) and Delete buttons, each asking for confirmation: a restored
// entry's message waits again, a deleted entry is gone.
func TestBrowserQuarantine(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	f := &fixture{prefix: redistest.Prefix(t), rdb: rdb}
	q, err := delaystream.New(rdb, queueName, delaystream.WithPrefix(f.prefix))
	require.NoError(t, err)
	l, err := stream.NewLayout(f.prefix, queueName, 1)
	require.NoError(t, err)
	// "fixable": a readable envelope with an invalid due time; "orphan": a
	// member without an envelope. The mover quarantines both.
	_, err = q.Schedule(ctx, delaystream.Message{ID: "fixable", Payload: []byte(`{"order":1}`)}, delaystream.After(time.Hour))
	require.NoError(t, err)
	require.NoError(t, rdb.ZAdd(ctx, l.Shard(0).Main().Delayed, redis.Z{Member: "fixable", Score: -5.5}).Err())
	require.NoError(t, rdb.ZAdd(ctx, l.Shard(0).Main().Delayed, redis.Z{Member: "orphan", Score: 1}).Err())
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- q.Run(rctx) }()
	in, err := admin.New(rdb, f.prefix)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		qs, err := in.Quarantine(ctx, queueName, admin.ListOptions{})
		return err == nil && len(qs) == 2
	}, 30*time.Second, 20*time.Millisecond)
	cancel()
	require.NoError(t, <-done)

	_, ts := f.serve(t)
	bctx := browser(t)
	dialogs := make(chan string, 4)
	chromedp.ListenTarget(bctx, func(ev any) {
		if d, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			dialogs <- d.Message
			go func() { _ = chromedp.Run(bctx, page.HandleJavaScriptDialog(true)) }()
		}
	})
	queueURL := ts.URL + "/p/" + f.prefix + "/q/" + queueName
	var flash string
	var restoreButtons, rows int
	step(t, bctx, "restore fixable",
		chromedp.Navigate(queueURL),
		chromedp.WaitVisible(`#quarantine button.q-restore`, chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelectorAll("#quarantine button.q-restore").length`, &restoreButtons),
	)
	flash = submit(t, bctx, "restore fixable", `#quarantine button.q-restore`)
	step(t, bctx, "after the restore",
		chromedp.Evaluate(`document.querySelectorAll("#quarantine tr[data-quarantined]").length`, &rows),
	)
	assert.Equal(t, 1, restoreButtons, "the orphan has no envelope to restore")
	assert.Equal(t, "Restored 1 quarantined entry.", flash)
	assert.Equal(t, 1, rows)
	assert.Contains(t, <-dialogs, "again")
	env, err := q.Get(ctx, "fixable")
	require.NoError(t, err, "waiting again")
	assert.JSONEq(t, `{"order":1}`, string(env.Payload))

	step(t, bctx, "delete orphan",
		chromedp.Navigate(queueURL),
		chromedp.WaitVisible(`#quarantine button.q-rm`, chromedp.ByQuery),
	)
	flash = submit(t, bctx, "delete orphan", `#quarantine button.q-rm`)
	step(t, bctx, "after the delete",
		chromedp.Evaluate(`document.querySelectorAll("#quarantine tr[data-quarantined]").length`, &rows),
	)
	assert.Equal(t, "Deleted 1 quarantined entry.", flash)
	assert.Equal(t, 0, rows)
	assert.Contains(t, <-dialogs, "for good")
	qs, err := in.Quarantine(ctx, queueName, admin.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, qs)
}
