package web_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/admin"
	"github.com/delaystream/delaystream/cmd/delaystream/internal/web"
	"github.com/delaystream/delaystream/internal/redistest"
)

// The queue and group pages show the pause state and pause and resume
// with their buttons (CSRF token required); a read-only view shows the
// state and no button, and refuses the posts.
func TestPauseButtons(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	q, err := delaystream.New(rdb, queueName, delaystream.WithPrefix(prefix))
	require.NoError(t, err)
	_, err = q.Handle("billing", func(context.Context, *delaystream.Delivery) error { return nil })
	require.NoError(t, err)
	in, err := admin.New(rdb, prefix)
	require.NoError(t, err)
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- q.Run(rctx) }()
	t.Cleanup(func() { stop(); <-done })
	require.Eventually(t, func() bool {
		gs, err := in.Groups(ctx, queueName)
		return err == nil && len(gs) == 1
	}, 10*time.Second, 20*time.Millisecond)

	srv, err := web.New(rdb, prefix)
	require.NoError(t, err)
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	ro, err := web.New(rdb, prefix, web.WithReadOnly())
	require.NoError(t, err)
	rts := httptest.NewServer(ro)
	t.Cleanup(rts.Close)

	base := "/p/" + url.PathEscape(prefix) + "/q/" + queueName
	get := func(ts *httptest.Server, path string) string {
		t.Helper()
		resp, err := http.Get(ts.URL + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
		return string(b)
	}
	page := get(ts, base)
	assert.Contains(t, page, "Promoting.")
	assert.Contains(t, page, `<td class="limits">none</td>`)
	assert.Contains(t, page, `action="`+base+`/pause"`)
	assert.Contains(t, page, `action="`+base+`/g/billing/pause"`)
	token := regexp.MustCompile(`name="csrf" value="([0-9a-f]{64})"`).FindStringSubmatch(page)
	require.NotNil(t, token)

	post := func(ts *httptest.Server, path, csrf string) *http.Response {
		t.Helper()
		resp, err := noRedirect.PostForm(ts.URL+path, url.Values{"csrf": {csrf}, "return": {base}})
		require.NoError(t, err)
		_ = resp.Body.Close()
		return resp
	}
	assert.Equal(t, http.StatusForbidden, post(ts, base+"/g/billing/pause", "").StatusCode, "no token")
	assert.Equal(t, http.StatusForbidden, post(rts, base+"/g/billing/pause", token[1]).StatusCode, "read-only")
	rep, err := in.Stats(ctx, queueName)
	require.NoError(t, err)
	assert.True(t, rep[0].Groups[0].PausedSince.IsZero(), "a refused post pauses nothing")

	resp := post(ts, base+"/g/billing/pause", token[1])
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	assert.Contains(t, resp.Header.Get("Location"), "did=paused-group")
	resp = post(ts, base+"/pause", token[1])
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	rep, err = in.Stats(ctx, queueName)
	require.NoError(t, err)
	assert.False(t, rep[0].PausedSince.IsZero())
	assert.False(t, rep[0].Groups[0].PausedSince.IsZero())

	page = get(ts, base+"?did=paused-queue")
	assert.Contains(t, page, "Paused the queue")
	assert.Regexp(t, `id="queue-state"><span class="bad">Paused</span> since`, page)
	assert.Contains(t, page, `action="`+base+`/resume"`)
	assert.Contains(t, page, `action="`+base+`/g/billing/resume"`)
	assert.Contains(t, get(ts, base+"/g/billing"), `action="`+base+`/g/billing/resume"`)
	roPage := get(rts, base)
	assert.Contains(t, roPage, ">paused</span>")
	assert.NotContains(t, roPage, "/resume")
	assert.NotContains(t, roPage, "/pause")

	require.Equal(t, http.StatusSeeOther, post(ts, base+"/g/billing/resume", token[1]).StatusCode)
	require.Equal(t, http.StatusSeeOther, post(ts, base+"/resume", token[1]).StatusCode)
	rep, err = in.Stats(ctx, queueName)
	require.NoError(t, err)
	assert.True(t, rep[0].PausedSince.IsZero())
	assert.True(t, rep[0].Groups[0].PausedSince.IsZero())
}
