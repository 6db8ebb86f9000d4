package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/cmd/delaystream/internal/web"
	"github.com/delaystream/delaystream/internal/redistest"
)

// waitingServer makes the queues names under a fresh prefix, each with
// msg waiting an hour, and starts a web view of the prefix (with opts) on
// a loopback test server, closed when t ends.
func waitingServer(t *testing.T, msg delaystream.Message, names []string, opts ...web.Option) (ts *httptest.Server, rdb redis.UniversalClient, prefix string) {
	t.Helper()
	rdb = redistest.Client(t)
	prefix = redistest.Prefix(t)
	for _, name := range names {
		q, err := delaystream.New(rdb, name, delaystream.WithPrefix(prefix))
		require.NoError(t, err)
		_, err = q.Schedule(context.Background(), msg, delaystream.After(time.Hour))
		require.NoError(t, err)
	}
	srv, err := web.New(rdb, prefix, opts...)
	require.NoError(t, err)
	ts = httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return ts, rdb, prefix
}

// listServer is a web view of three queues under a fresh prefix: qa with
// 6 waiting messages (x, then m0..m4), qb with one, qc with one and 5
// recurring schedules (r1..r5, whose first occurrences wait too).
func listServer(t *testing.T, opts ...web.Option) (ts *httptest.Server, prefix string) {
	t.Helper()
	ctx := context.Background()
	ts, rdb, prefix := waitingServer(t, delaystream.Message{ID: "x", Payload: []byte("first")}, []string{"qa", "qb", "qc"}, opts...)
	qa, err := delaystream.New(rdb, "qa", delaystream.WithPrefix(prefix))
	require.NoError(t, err)
	qc, err := delaystream.New(rdb, "qc", delaystream.WithPrefix(prefix))
	require.NoError(t, err)
	for i := range 5 {
		_, err := qa.Schedule(ctx, delaystream.Message{ID: fmt.Sprintf("m%d", i), Payload: []byte("later")},
			delaystream.After(2*time.Hour+time.Duration(i)*time.Second))
		require.NoError(t, err)
		_, err = qc.DefineRecurring(ctx, delaystream.Recurring{ID: fmt.Sprintf("r%d", i+1), Spec: delaystream.Every(24 * time.Hour)})
		require.NoError(t, err)
	}
	return ts, prefix
}

// noRedirect is an HTTP client that gives up after 30 s and follows no
// redirect.
var noRedirect = &http.Client{Timeout: 30 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// send sends method path to ts, with form as its body when it is not nil,
// after edit (when not nil) has set the request's Host or headers. It
// follows no redirect and returns the status and body.
func send(t *testing.T, ts *httptest.Server, method, path string, form url.Values, edit func(*http.Request)) (int, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, ts.URL+path, body)
	require.NoError(t, err)
	if edit != nil {
		edit(req)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := noRedirect.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// fetch GETs path and returns the response and its body, requiring 200.
func fetch(t *testing.T, ts *httptest.Server, path string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Get(ts.URL + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", path, b)
	return resp, string(b)
}

var nextLinkRE = regexp.MustCompile(`^<([^>]+)>; rel="next"$`)

// pages walks a JSON list from path by its Link headers and returns the
// value of field of the items of each page.
func pages(t *testing.T, ts *httptest.Server, path, field string) [][]string {
	t.Helper()
	var out [][]string
	for path != "" {
		require.Less(t, len(out), 10, "a list that does not end")
		resp, body := fetch(t, ts, path)
		var items []map[string]any
		require.NoError(t, json.Unmarshal([]byte(body), &items), body)
		page := []string{}
		for _, it := range items {
			page = append(page, fmt.Sprint(it[field]))
		}
		out = append(out, page)
		path = ""
		if l := resp.Header.Get("Link"); l != "" {
			m := nextLinkRE.FindStringSubmatch(l)
			require.NotNil(t, m, "Link %q", l)
			path = m[1]
		}
	}
	return out
}

// Every list of the JSON API is paged by ?limit= with a cursor or an
// offset, the next page named by a Link header (rel="next"); the pages
// link to their next page likewise.
func TestListsArePaged(t *testing.T) {
	t.Parallel()
	ts, prefix := listServer(t)
	p := url.PathEscape(prefix)
	api := "/api/p/" + p

	assert.Equal(t, [][]string{{"qa", "qb"}, {"qc"}}, pages(t, ts, api+"/queues?limit=2", "queue"))
	assert.Equal(t, [][]string{{"x", "m0", "m1", "m2"}, {"m3", "m4"}}, pages(t, ts, api+"/q/qa/next?limit=4", "id"))
	assert.Equal(t, [][]string{{"r1", "r2"}, {"r3", "r4"}, {"r5"}}, pages(t, ts, api+"/q/qc/recurring?limit=2", "id"))
	assert.Equal(t, [][]string{{"qa", "qb", "qc"}}, pages(t, ts, api+"/queues", "queue"), "default limit")
	assert.Equal(t, [][]string{{"x", "m0", "m1", "m2", "m3", "m4"}}, pages(t, ts, api+"/q/qa/next?limit=0", "id"), "a limit below 1 is the default")

	// The pages: the first page and its "next" link, followed.
	nextHref := regexp.MustCompile(`id="next-page" href="([^"]+)"`)
	follow := func(path string, want, notWant []string) string {
		t.Helper()
		_, body := fetch(t, ts, path)
		for _, w := range want {
			assert.Contains(t, body, w, path)
		}
		for _, w := range notWant {
			assert.NotContains(t, body, w, path)
		}
		if m := nextHref.FindStringSubmatch(body); m != nil {
			return html.UnescapeString(m[1])
		}
		return ""
	}
	next := follow("/p/"+p+"/?limit=2", []string{`data-queue="qa"`, `data-queue="qb"`}, []string{`data-queue="qc"`})
	require.NotEmpty(t, next)
	assert.Empty(t, follow(next, []string{`data-queue="qc"`, `id="first-page"`}, []string{`data-queue="qa"`}))

	next = follow("/p/"+p+"/q/qc/recurring?limit=2", []string{`data-schedule="r1"`, `data-schedule="r2"`}, []string{`data-schedule="r3"`})
	next = follow(next, []string{`data-schedule="r3"`, `data-schedule="r4"`}, []string{`data-schedule="r2"`, `data-schedule="r5"`})
	assert.Empty(t, follow(next, []string{`data-schedule="r5"`}, []string{`data-schedule="r4"`}))

	next = follow("/p/"+p+"/q/qa/next?limit=4", []string{`data-message="x"`, `data-message="m2"`}, []string{`data-message="m3"`})
	assert.Empty(t, follow(next, []string{`data-message="m3"`, `data-message="m4"`}, []string{`data-message="m2"`}))

	// The queue page shows the first of each list, with links to them.
	_, page := fetch(t, ts, "/p/"+p+"/q/qc")
	assert.Contains(t, page, `data-schedule="r5"`, "5 schedules fit on the queue page")
	assert.NotContains(t, page, `id="all-recurring"`)

	// A malformed offset is a clean 400 that does not repeat it.
	for _, path := range []string{api + "/q/qa/next?offset=Call+us", "/p/" + p + "/q/qa/next?offset=-1", "/p/" + p + "/q/qa/quarantine?offset=99999999"} {
		resp, err := http.Get(ts.URL + path)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, path)
		assert.Contains(t, string(body), "offset must be a number", path)
		assert.NotContains(t, string(body), "Call us", path)
		assert.NotContains(t, string(body), "99999999", path)
	}
}

// The status message after an action comes from fixed sentences chosen by
// a code: no text of the request shows on the page, whatever the query
// says; error pages do not repeat a bad parameter either.
func TestStatusMessageFromFixedWords(t *testing.T) {
	t.Parallel()
	ts, prefix := listServer(t)
	base := "/p/" + url.PathEscape(prefix) + "/q/qa"
	for _, c := range []struct {
		query string
		want  string // the flash shown; "" for none
	}{
		{"did=recurring-pause&schedule=Your+account+is+locked", "Paused the recurring schedule."},
		{"recurring=pause&schedule=Your+account+is+locked", ""}, // an older release's parameters
		{"did=Your+account+is+locked", ""},
		{"did=purge&n=3&missing=Your+account+is+locked", "Purged 3 dead letters."},
		{"did=redrive&n=-5", "Redrove 0 dead letters."},
	} {
		_, body := fetch(t, ts, base+"?"+c.query)
		assert.NotContains(t, body, "Your account is locked", c.query)
		if c.want == "" {
			assert.NotContains(t, body, `id="flash"`, c.query)
			continue
		}
		assert.Contains(t, body, `id="flash" role="status">`+c.want+`</p>`, c.query)
	}
	resp, err := http.Get(ts.URL + base + "/g/billing?after=Your+account+is+locked")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.NotContains(t, string(body), "Your account is locked")
}

// syncBuffer is a bytes.Buffer safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Every action the web view performs, and every post it refuses, is
// logged with the remote address and the basic-auth user.
func TestActionsAreLoggedWithWhoActed(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	ts, prefix := listServer(t, web.WithBasicAuth("ops", "s3cret"),
		web.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	base := "/p/" + url.PathEscape(prefix) + "/q/qa"
	do := func(method, path string, form url.Values) (int, string) {
		t.Helper()
		return send(t, ts, method, path, form, func(req *http.Request) { req.SetBasicAuth("ops", "s3cret") })
	}
	code, page := do(http.MethodGet, base, nil)
	require.Equal(t, http.StatusOK, code, page)
	m := regexp.MustCompile(`name="csrf" value="([0-9a-f]{64})"`).FindStringSubmatch(page)
	require.NotNil(t, m)

	qc := "/p/" + url.PathEscape(prefix) + "/q/qc"
	for _, c := range []struct {
		path, msg string
	}{
		{base + "/pause", `msg="web: pause queue"`},
		{base + "/resume", `msg="web: resume queue"`},
		{qc + "/r/r1/pause", `msg="web: recurring pause"`},
		{qc + "/r/r1/delete", `msg="web: recurring delete"`},
	} {
		code, body := do(http.MethodPost, c.path, url.Values{"csrf": {m[1]}, "return": {base}})
		require.Equal(t, http.StatusSeeOther, code, "%s: %s", c.path, body)
		line := lineWith(logs.String(), c.msg)
		require.NotEmpty(t, line, "no log line %s in:\n%s", c.msg, logs.String())
		assert.Contains(t, line, "remote=127.0.0.1:", c.path)
		assert.Contains(t, line, "user=ops", c.path)
		assert.Contains(t, line, "level=INFO", c.path)
	}
	code, _ = do(http.MethodPost, qc+"/r/r2/pause", url.Values{"csrf": {"wrong"}, "return": {base}})
	assert.Equal(t, http.StatusForbidden, code)
	line := lineWith(logs.String(), `msg="web: action refused"`)
	require.NotEmpty(t, line, logs.String())
	assert.Contains(t, line, "user=ops")
	assert.Contains(t, line, "remote=127.0.0.1:")
	assert.Contains(t, line, `why="csrf token"`)
	assert.NotContains(t, logs.String(), "s3cret", "the password is never logged")
}

// lineWith returns the first line of logs that contains s, "" if none.
func lineWith(logs, s string) string {
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}
