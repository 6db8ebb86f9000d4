package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/admin"
)

// The queue page charts and tabulates the counts Redis keeps: every
// process serving the view shows the same counts, and the page's refresh
// brings new work in without a reload.
func TestBrowserCounts(t *testing.T) {
	t.Parallel()
	f := newFixture(t) // billing: 6 handled, 2 dead-lettered; audit: 7 handled, m05 held
	_, ts := f.serve(t)
	_, other := f.serve(t) // a second serve process of the same Redis
	bctx := browser(t)
	queueURL := ts.URL + "/p/" + url.PathEscape(f.prefix) + "/q/" + queueName

	var promoted, handled, failed, billDead, auditHandled, points string
	var ok bool
	step(t, bctx, "counts on the queue page",
		chromedp.Navigate(queueURL),
		chromedp.WaitVisible(`#counts-minutes svg`, chromedp.ByQuery),
		chromedp.WaitVisible(`#counts-hours svg`, chromedp.ByQuery),
		chromedp.AttributeValue(`#counts-minutes`, "data-promoted", &promoted, nil, chromedp.ByQuery),
		chromedp.AttributeValue(`#counts-minutes`, "data-handled", &handled, nil, chromedp.ByQuery),
		chromedp.AttributeValue(`#counts-minutes`, "data-failed", &failed, nil, chromedp.ByQuery),
		text(`#counts tr[data-group="billing"][data-counter="dead-lettered"] td:nth-child(5)`, &billDead),
		text(`#counts tr[data-group="audit"][data-counter="handled"] td:nth-child(3)`, &auditHandled),
		chromedp.AttributeValue(`#counts-minutes polyline.handled`, "points", &points, &ok, chromedp.ByQuery),
	)
	assert.Equal(t, "8", promoted)
	assert.Equal(t, "13", handled, "billing's 6 and audit's 7")
	assert.Equal(t, "2", failed, "billing's two dead letters")
	assert.Equal(t, "2", billDead, "billing's dead letters in all")
	assert.Equal(t, "7", auditHandled, "audit's in the last hour")
	require.True(t, ok)
	assert.Regexp(t, `^(\d+\.\d,\d+\.\d ){59}\d+\.\d,\d+\.\d$`, points, "a point per minute")
	screenshot(t, bctx, screenshotDir(t), "counts")

	// The other process reads the same counts from Redis.
	var mine, theirs admin.History
	getJSON(t, ts.URL+"/api/p/"+url.PathEscape(f.prefix)+"/q/"+queueName+"/counts", &mine)
	getJSON(t, other.URL+"/api/p/"+url.PathEscape(f.prefix)+"/q/"+queueName+"/counts", &theirs)
	assert.Equal(t, mine.Totals, theirs.Totals)
	assert.Equal(t, int64(8), mine.Totals.Promoted)
	assert.Equal(t, admin.GroupHistory{Handled: 6, DeadLettered: 2}, mine.Totals.Groups["billing"])

	// New work shows up through the page's refresh.
	for i := range 2 {
		_, err := f.q.Schedule(context.Background(), delaystream.Message{ID: fmt.Sprintf("more-%d", i)}, delaystream.After(0))
		require.NoError(t, err)
	}
	step(t, bctx, "counts refreshed",
		chromedp.Poll(`document.querySelector("#counts-minutes").dataset.promoted === "10"`, nil, chromedp.WithPollingTimeout(30*time.Second)),
		chromedp.Poll(`document.querySelector("#counts-minutes").dataset.handled === "17"`, nil, chromedp.WithPollingTimeout(30*time.Second)),
	)
}

// getJSON reads url's JSON into v, requiring a 200.
func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(v))
}

// The queue page's search finds a message by id: in every place, handled
// included for a group that keeps records; an unknown id is found nowhere.
func TestBrowserLocate(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	_, ts := f.serve(t)
	bctx := browser(t)
	queueURL := ts.URL + "/p/" + url.PathEscape(f.prefix) + "/q/" + queueName

	var places []string
	var found, details string
	step(t, bctx, "find m01",
		chromedp.Navigate(queueURL),
		chromedp.WaitVisible(`form.locate input[name=id]`, chromedp.ByQuery),
		chromedp.SendKeys(`form.locate input[name=id]`, "m01", chromedp.ByQuery),
		chromedp.Submit(`form.locate input[name=id]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#located`, chromedp.ByQuery),
		chromedp.AttributeValue(`#located`, "data-found", &found, nil, chromedp.ByQuery),
		chromedp.Evaluate(`[...document.querySelectorAll("#places tr[data-place]")].map(e => e.dataset.place + ":" + (e.dataset.group || ""))`, &places),
		text(`#places tr[data-place="handled"] td:nth-child(4)`, &details),
	)
	assert.Equal(t, "true", found)
	assert.Equal(t, []string{"handled:audit", "dead-lettered:billing"}, places, "audit keeps handled records; billing dead-lettered it")
	assert.Regexp(t, `^handled at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}Z \(.*\), attempt 1, consumer \S+$`, details)

	step(t, bctx, "find nothing",
		chromedp.Navigate(queueURL+"/locate?id=nosuch"),
		chromedp.WaitVisible(`#located`, chromedp.ByQuery),
		chromedp.AttributeValue(`#located`, "data-found", &found, nil, chromedp.ByQuery),
	)
	assert.Equal(t, "false", found)
}
