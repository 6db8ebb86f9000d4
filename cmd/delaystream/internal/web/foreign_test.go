package web_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/admin"
	"github.com/delaystream/delaystream/internal/stream"
)

// A consumer group made on a queue's stream by other means, with a name
// delaystream cannot use ("bad name"), breaks neither the queue list
// (every queue's row), nor the JSON API, nor the queue's or the group's
// page: it is shown, escaped and marked, with the figures Redis keeps of
// it, and offers no action (a posted one is refused, changing nothing).
func TestForeignGroupIsShownNotFatal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ts, rdb, prefix := waitingServer(t, delaystream.Message{ID: "m1", Payload: []byte("hello")}, []string{queueName, "other"})
	layout, err := stream.NewLayout(prefix, queueName, 1)
	require.NoError(t, err)
	const bad = "bad name"
	require.NoError(t, rdb.XGroupCreateMkStream(ctx, layout.Shard(0).Main().Stream, bad, "0").Err())

	p := url.PathEscape(prefix)
	get := func(path string) string {
		t.Helper()
		_, body := fetch(t, ts, path)
		return body
	}

	list := get("/p/" + p + "/")
	assert.Contains(t, list, `data-queue="`+queueName+`"`)
	assert.Contains(t, list, `data-queue="other"`)

	var queues []admin.QueueReport
	require.NoError(t, json.Unmarshal([]byte(get("/api/p/"+p+"/queues")), &queues))
	require.Len(t, queues, 2)
	require.Equal(t, queueName, queues[0].Queue)
	require.Len(t, queues[0].Groups, 1)
	assert.Equal(t, bad, queues[0].Groups[0].Group)
	assert.True(t, queues[0].Groups[0].Foreign)
	assert.EqualValues(t, 1, queues[0].Waiting)

	base := "/p/" + p + "/q/" + queueName
	page := get(base)
	assert.Contains(t, page, `data-group="bad name"`)
	assert.Contains(t, page, "(not a delaystream group)")
	assert.Contains(t, page, `href="`+base+`/g/bad%20name"`)
	assert.NotContains(t, page, `/g/bad%20name/`, "an action on the foreign group")
	assert.Contains(t, page, `action="`+base+`/pause"`, "the queue's own actions stay")
	groupPage := get(base + "/g/bad%20name")
	assert.Contains(t, groupPage, "Not a delaystream group")
	assert.NotContains(t, groupPage, `<form method="post"`)

	token := regexp.MustCompile(`name="csrf" value="([0-9a-f]{64})"`).FindStringSubmatch(page)
	require.NotNil(t, token)
	for _, action := range []string{"pause", "redrive"} {
		form := url.Values{"csrf": {token[1]}, "return": {base}, "all": {"1"}}
		resp, err := http.PostForm(ts.URL+base+"/g/bad%20name/"+action, form)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s: %s", action, body)
		// The refusal says why, the name escaped. (Every page, this error
		// page too, loads /static/app.js: a "<script" is no reflection.)
		assert.Contains(t, string(body), `<p class="error" id="error">delaystream: invalid name: group name &#34;bad name&#34;`, action)
	}
	rs, err := admin.New(rdb, prefix)
	require.NoError(t, err)
	st, err := rs.Stats(ctx, queueName)
	require.NoError(t, err)
	assert.True(t, st[0].Groups[0].PausedSince.IsZero(), "a refused pause changed nothing")
}
