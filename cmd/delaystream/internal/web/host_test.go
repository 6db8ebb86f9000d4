package web_test

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/admin"
	"github.com/delaystream/delaystream/cmd/delaystream/internal/web"
)

// DNS rebinding: a page of evil.example whose name was made to resolve to
// this server's address sends Host: evil.example (and its own Origin,
// which then matches). Such requests are refused, reading a page and
// posting an action alike, and nothing changes in Redis; the same requests
// under the server's own address, a loopback name or a name of
// WithAllowedHosts are served.
func TestDNSRebindingRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ts, rdb, prefix := waitingServer(t, delaystream.Message{ID: "m1", Payload: []byte("hello")}, []string{queueName},
		web.WithAllowedHosts("queues.example")) // ts listens on 127.0.0.1:<port>
	in, err := admin.New(rdb, prefix)
	require.NoError(t, err)
	paused := func() bool {
		t.Helper()
		rep, err := in.Stats(ctx, queueName)
		require.NoError(t, err)
		return !rep[0].PausedSince.IsZero()
	}

	own := strings.TrimPrefix(ts.URL, "http://")
	_, port, err := net.SplitHostPort(own)
	require.NoError(t, err)
	base := "/p/" + url.PathEscape(prefix) + "/q/" + queueName

	do := func(method, path, host string, form url.Values) (int, string) {
		t.Helper()
		return send(t, ts, method, path, form, func(req *http.Request) {
			req.Host = host
			req.Header.Set("Origin", "http://"+host) // what the rebound page's browser sends
		})
	}

	code, page := do(http.MethodGet, base, own, nil)
	require.Equal(t, http.StatusOK, code, page)
	m := regexp.MustCompile(`name="csrf" value="([0-9a-f]{64})"`).FindStringSubmatch(page)
	require.NotNil(t, m, "a CSRF token on the page")
	form := url.Values{"csrf": {m[1]}, "return": {base}}

	for _, host := range []string{"evil.example", "evil.example:" + port, "127.0.0.1.evil.example:" + port, "localhost.evil.example:" + port} {
		for _, path := range []string{"/", base, "/static/app.js", "/api/p/" + url.PathEscape(prefix) + "/queues", base + "/next"} {
			code, body := do(http.MethodGet, path, host, nil)
			assert.Equal(t, http.StatusMisdirectedRequest, code, "GET %s with Host %s", path, host)
			assert.NotContains(t, body, m[1], "the token leaked to %s", host)
			assert.NotContains(t, body, "m1", "the page leaked to %s", host)
		}
		code, _ := do(http.MethodPost, base+"/pause", host, form)
		assert.Equal(t, http.StatusMisdirectedRequest, code, "POST pause with Host %s", host)
		assert.False(t, paused(), "a refused post (Host %s) paused the queue", host)
	}

	for _, host := range []string{own, "localhost:" + port, "LOCALHOST:" + port, "[::1]:" + port, "queues.example", "Queues.Example:" + port} {
		code, body := do(http.MethodGet, base, host, nil)
		require.Equal(t, http.StatusOK, code, "Host %s: %s", host, body)
		assert.Contains(t, body, `data-message="m1"`, host)
	}
	code, _ = do(http.MethodPost, base+"/pause", "queues.example", form)
	require.Equal(t, http.StatusSeeOther, code, "a pause under an allowed name")
	assert.True(t, paused())
	code, _ = do(http.MethodPost, base+"/resume", own, form)
	require.Equal(t, http.StatusSeeOther, code, "a resume under the server's own address")
	assert.False(t, paused())
}
