package web_test

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/internal/redistest"
)

// A queue page's figures and tables follow Redis without a reload (the
// chart always did): messages scheduled after the page loaded show in
// the waiting figure and the next-due table of the same page.
func TestBrowserTablesRefresh(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	f := &fixture{prefix: redistest.Prefix(t), rdb: rdb}
	q, err := delaystream.New(rdb, queueName, delaystream.WithPrefix(f.prefix))
	require.NoError(t, err)
	_, err = q.Schedule(ctx, delaystream.Message{ID: "first", Payload: []byte("1")}, delaystream.After(time.Hour))
	require.NoError(t, err)

	_, ts := f.serve(t)
	bctx := browser(t)
	var rows int
	var waiting string
	step(t, bctx, "queue page",
		chromedp.Navigate(ts.URL+"/p/"+f.prefix+"/q/"+queueName),
		chromedp.WaitVisible(`#next tr[data-message="first"]`, chromedp.ByQuery),
		chromedp.Evaluate(`window.notReloaded = true`, nil),
	)
	for _, id := range []string{"second", "third"} {
		_, err = q.Schedule(ctx, delaystream.Message{ID: id, Payload: []byte(id)}, delaystream.After(time.Minute))
		require.NoError(t, err)
	}
	var same bool
	step(t, bctx, "refreshed in place",
		chromedp.Poll(`document.querySelectorAll("#next tr[data-message]").length === 3`, nil, chromedp.WithPollingTimeout(30*time.Second)),
		chromedp.Evaluate(`document.querySelectorAll("#next tr[data-message]").length`, &rows),
		chromedp.AttributeValue(`#fig-waiting`, "data-value", &waiting, nil, chromedp.ByQuery),
		chromedp.Evaluate(`window.notReloaded === true`, &same),
	)
	assert.Equal(t, 3, rows)
	assert.Equal(t, "3", waiting)
	assert.True(t, same, "updated without a reload")
}
