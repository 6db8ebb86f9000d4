package web

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/admin"
)

// offline returns a Server whose Redis cannot be reached: enough for
// everything decided before a read. It answers to "example.com", the
// Host of httptest.NewRequest's requests (served without an http.Server,
// they carry no local address the Host could name).
func offline(t *testing.T, opts ...Option) *Server {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	s, err := New(rdb, "ds", append([]Option{WithAllowedHosts("example.com")}, opts...)...)
	require.NoError(t, err)
	return s
}

func TestOptions(t *testing.T) {
	t.Parallel()
	for name, o := range map[string]Option{
		"empty user":        WithBasicAuth("", "x"),
		"empty password":    WithBasicAuth("x", ""),
		"preview too small": WithPreviewBytes(15),
		"preview too large": WithPreviewBytes(65537),
		"fast sampling":     WithSampleInterval(99 * time.Millisecond),
		"tiny history":      WithHistorySize(1),
		"no prefix":         WithPrefixes(),
		"bad prefix":        WithPrefixes("a b"),
		"nil logger":        WithLogger(nil),
		"empty host":        WithAllowedHosts(""),
		"host with a path":  WithAllowedHosts("example.com/x"),
		"host with a user":  WithAllowedHosts("u@example.com"),
		"host port zero":    WithAllowedHosts("example.com:0"),
		"host bad port":     WithAllowedHosts("example.com:http"),
		"url as host":       WithAllowedHosts("http://example.com"),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
			t.Cleanup(func() { _ = rdb.Close() })
			_, err := New(rdb, "", o)
			assert.ErrorIs(t, err, ErrInvalidOption)
		})
	}
	_, err := New(nil, "ds")
	assert.ErrorIs(t, err, ErrInvalidOption)
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = rdb.Close() })
	_, err = New(rdb, "a b")
	assert.ErrorIs(t, err, ErrInvalidOption)
	s := offline(t, WithPrefixes("b", "a", "b"))
	assert.Equal(t, []string{"a", "b"}, s.Prefixes())
}

func TestNiceCeil(t *testing.T) {
	t.Parallel()
	for in, want := range map[int64]int64{0: 1, 1: 1, 2: 2, 3: 5, 5: 5, 6: 10, 11: 20, 21: 50, 99: 100, 101: 200, 4000: 5000} {
		assert.Equal(t, want, niceCeil(in), "niceCeil(%d)", in)
	}
}

func TestChart(t *testing.T) {
	t.Parallel()
	assert.True(t, newChart(nil).Empty)
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	c := newChart([]Sample{{At: t0, Waiting: 0, Overdue: 0}, {At: t0.Add(time.Second), Waiting: 3, Overdue: 1},
		{At: t0.Add(2 * time.Second), Waiting: 6, Overdue: 0}})
	assert.False(t, c.Empty)
	assert.EqualValues(t, 10, c.YMax)
	assert.EqualValues(t, 5, c.YMid)
	assert.Equal(t, (c.Top+c.Bottom)/2, c.YMidAt)
	// First point at the left bottom, last at the right edge.
	pts := strings.Fields(c.Waiting)
	require.Len(t, pts, 3)
	assert.Equal(t, fmt.Sprintf("%d.0,%d.0", c.Left, c.Bottom), pts[0])
	assert.True(t, strings.HasPrefix(pts[2], fmt.Sprintf("%d.0,", c.Right)), pts[2])
	assert.Equal(t, "03:04:05", c.From)
	assert.Equal(t, "03:04:07", c.To)
	assert.EqualValues(t, 6, c.LastWaiting)

	one := newChart([]Sample{{At: t0, Waiting: 2}})
	assert.Len(t, strings.Fields(one.Waiting), 2, "a single sample draws a short line")
}

func TestHistoryBounds(t *testing.T) {
	t.Parallel()
	h := newHistory(3, 2)
	t0 := time.Unix(0, 0)
	for i := range 5 {
		h.add("p", "a", Sample{At: t0.Add(time.Duration(i) * time.Second), Waiting: int64(i)})
	}
	got := h.get("p", "a")
	require.Len(t, got, 3, "the ring keeps the last 3")
	assert.Equal(t, []int64{2, 3, 4}, []int64{got[0].Waiting, got[1].Waiting, got[2].Waiting})
	h.add("p", "b", Sample{})
	h.add("p", "c", Sample{}) // over maxQueues: not recorded
	assert.Empty(t, h.get("p", "c"))
	h.add("q", "a", Sample{})
	h.endRound("p")
	h.add("p", "a", Sample{})
	h.endRound("p") // b was not seen in this round: forgotten
	assert.Empty(t, h.get("p", "b"))
	assert.Len(t, h.get("p", "a"), 3)
	assert.NotNil(t, h.get("x", "y"), "empty, not nil: JSON []")
}

func TestPreview(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		payload []byte
		limit   int
		want    string
		cut     bool
	}{
		{"short text", []byte(`{"a":1}`), 16, `{"a":1}`, false},
		{"long text", []byte(strings.Repeat("x", 100)), 16, strings.Repeat("x", 13) + "…", true},
		{"multibyte", []byte(strings.Repeat("é", 40)), 16, strings.Repeat("é", 6) + "…", true},
		{"binary", []byte{0xff, 0x00, 0xfe, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09}, 16, "hex:ff00fe010…", true},
		{"empty", nil, 16, "", false},
		{"ends with ellipsis", []byte("wait…"), 16, "wait…", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p := previewOf(c.payload, len(c.payload), c.limit)
			assert.Equal(t, c.want, p.Text)
			assert.LessOrEqual(t, len(p.Text), c.limit)
			assert.Equal(t, c.cut, p.Truncated)
			assert.Equal(t, len(c.payload), p.Size)
		})
	}
}

// A payload read in part (its first bytes, of a longer whole) is previewed
// from those bytes, always marked cut, with the whole size; a character the
// cut split is left out, so that a text stays text.
func TestPreviewOfPartialPayload(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		payload []byte
		size    int
		limit   int
		want    string
	}{
		{"short text read in part", []byte("hello"), 1 << 20, 64, "hello…"},
		{"long text read in part", []byte(strings.Repeat("x", 100)), 1 << 20, 16, strings.Repeat("x", 13) + "…"},
		{"cut in a character", append([]byte("abcé"), 0xE2, 0x80), 1000, 64, "abcé…"},
		{"binary read in part", []byte{0xff, 0x00, 0xfe, 0x01}, 1000, 64, "hex:ff00fe01…"},
		{"nothing read", nil, 10, 16, "…"},
		{"size below what was read", []byte("whole"), 2, 16, "whole"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p := previewOf(c.payload, c.size, c.limit)
			assert.Equal(t, c.want, p.Text)
			assert.LessOrEqual(t, len(p.Text), c.limit)
			assert.Equal(t, max(c.size, len(c.payload)), p.Size)
			assert.Equal(t, c.size > len(c.payload), p.Truncated)
		})
	}
}

func TestFlashAndLocalPath(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "Redrove 1 dead letter.", flash(url.Values{"did": {"redrive"}, "n": {"1"}}))
	assert.Equal(t, "Purged 3 dead letters. 1 no longer existed.", flash(url.Values{"did": {"purge"}, "n": {"3"}, "missing": {"1"}}))
	assert.Equal(t, "Redrove 0 dead letters. 2 could not be redriven (no valid envelope): purge them instead.",
		flash(url.Values{"did": {"redrive"}, "n": {"0"}, "unrecoverable": {"2"}}))
	assert.Equal(t, "Restored 1 quarantined entry.", flash(url.Values{"did": {"restore"}, "n": {"1"}}))
	assert.Equal(t, "Deleted 2 quarantined entries.", flash(url.Values{"did": {"rm"}, "n": {"2"}}))
	assert.Equal(t, "Paused the queue: nothing is promoted until it is resumed.", flash(url.Values{"did": {"paused-queue"}}))
	assert.Empty(t, flash(url.Values{"did": {"<script>"}, "n": {"1"}}))
	assert.Empty(t, flash(url.Values{}))
	for p, want := range map[string]string{
		"/p/ds/q/orders":         "/p/ds/q/orders",
		"/p/ds/q/orders?after=1": "/p/ds/q/orders?after=1",
		"//evil.example/":        "",
		"/\\evil.example":        "",
		"https://evil.example/":  "",
		"javascript:alert(1)":    "",
		"":                       "",
	} {
		assert.Equal(t, want, localPath(p), p)
	}
}

// TestRenderPages executes every page with figures of every kind, so that
// a template and admin's types cannot drift apart unnoticed.
func TestRenderPages(t *testing.T) {
	t.Parallel()
	s := offline(t, WithPreviewBytes(32))
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	gs := admin.GroupReport{Group: "billing", Consumers: 2, Pending: 3, OldestPendingEntryAgeMs: 4500, Lag: -1,
		RetryWaiting: 1, DeadLetters: 12, ConsumerList: []admin.ConsumerInfo{{Name: "host-1", Pending: 3, IdleMs: 20}}}
	st := admin.QueueReport{Queue: "orders", Shards: 4, Now: now, Waiting: 1234567, Overdue: 2,
		NextDue: now.Add(-time.Second), StreamLength: 9, Quarantined: 1, Groups: []admin.GroupReport{gs}}
	dl := delaystream.DeadLetterEntry{EntryID: "1700000000000-0@2", Shard: 2, At: now.Add(-time.Minute), ID: "m1",
		Reason: "attempts exhausted", LastError: "<b>boom</b>", Attempt: 5, Deliveries: 5, Decoded: true,
		Payload: []byte(strings.Repeat("p", 100))}
	r := httptest.NewRequest(http.MethodGet, "/p/ds/q/orders?x=1", nil)
	r.SetPathValue("prefix", "ds")
	r.SetPathValue("queue", "orders")
	b := s.base(r, "orders")
	qp := queuePage{base: b, Stats: st, IntervalMs: 5000, PeekCount: 1, SampleSince: now,
		Chart: newChart([]Sample{{At: now, Waiting: 1}, {At: now.Add(time.Second), Waiting: 3, Overdue: 2}}),
		Next: []nextRow{{WaitingMessage: admin.WaitingMessage{ID: "n1", Due: now, Overdue: true, Attempt: 1,
			Payload: []byte("hi")}, Shown: s.preview([]byte("hi"), 2)}, {WaitingMessage: admin.WaitingMessage{Problem: "missing envelope"}}},
		Groups:     []groupSection{{GroupReport: gs, Dead: s.deadRows([]delaystream.DeadLetterEntry{dl})}},
		Quarantine: []quarantineRow{{Quarantined: delaystream.Quarantined{EntryID: "1-0", Lane: "main", Reason: "invalid due time"}}},
	}
	gp := groupPage{base: b, Stats: gs, Rows: s.deadRows([]delaystream.DeadLetterEntry{dl}), Now: now, After: "1-0",
		Pager: pager{First: "/p/ds/q/orders/g/billing", Next: "/p/ds/q/orders/g/billing?after=2-0", Limit: 50}}
	foreign := admin.GroupReport{Group: "bad <name>", Consumers: 1, Pending: 2, Lag: 3, Foreign: true}
	fp := groupPage{base: b, Stats: foreign, Now: now}
	qpForeign := qp
	qpForeign.Groups = []groupSection{{GroupReport: foreign}}
	recur := []recurringRow{{RecurringStatus: delaystream.RecurringStatus{Recurring: delaystream.Recurring{ID: "poll"},
		SpecKind: "every", SpecText: "1m0s", Next: now.Add(time.Minute)}}}
	for _, c := range []struct {
		page string
		data any
		want []string
	}{
		{"queue", qp, []string{`id="fig-waiting" data-value="1234567"`, "1\u202f234\u202f567", `data-group="billing"`,
			`<td class="n lag">?</td>`, "4.5s", `points="`, `data-message="n1"`, "missing envelope",
			`data-entry="1700000000000-0@2"`, "&lt;b&gt;boom&lt;/b&gt;", `class="redrive"`, `name="csrf" value="` + s.token,
			`name="return" value="/p/ds/q/orders?x=1"`, `action="/p/ds/q/orders/g/billing/purge"`, "invalid due time",
			"(preview of 100 bytes)", "All 12 dead letters of billing"}},
		{"group", gp, []string{`id="fig-pending" data-value="3"`, "host-1", `<td class="state">gone</td>`, `id="next-page"`, "after=2-0", "Purge all"}},
		{"queues", queuesPage{base: b, Queues: []admin.QueueReport{st}, Pager: pager{Next: "/p/ds/?after=orders", Limit: 1}},
			[]string{`data-queue="orders"`, `<td class="n dead bad">12</td>`, `id="next-page" href="/p/ds/?after=orders"`}},
		{"group", fp, []string{"Not a delaystream group", `id="no-dead"`}},
		{"queue", qpForeign, []string{`data-group="bad &lt;name&gt;"`, `/g/bad%20%3Cname%3E`, "(not a delaystream group)"}},
		{"next", nextList{base: b, Rows: qp.Next, Now: now, Offset: 20, Pager: pager{First: "/p/ds/q/orders/next", Next: "/p/ds/q/orders/next?offset=40", Limit: 20}},
			[]string{`data-message="n1"`, "missing envelope", "after the first 20", `href="/p/ds/q/orders/next?offset=40"`}},
		{"recurring", recurringList{base: b, Rows: recur, Now: now}, []string{`data-schedule="poll"`, `class="recurring-pause"`, "every 1m0s"}},
		{"quarantine", quarantineList{base: b, Rows: qp.Quarantine}, []string{"invalid due time", `class="q-rm"`}},
		{"index", struct{ base }{b}, []string{`href="/p/ds/"`}},
		{"error", struct{ base }{base{Title: "Not Found", Error: "no <queue>"}}, []string{"no &lt;queue&gt;"}},
	} {
		t.Run(c.page, func(t *testing.T) {
			t.Parallel()
			w := httptest.NewRecorder()
			s.render(w, r, http.StatusOK, c.page, c.data)
			require.Equal(t, http.StatusOK, w.Code, w.Body.String())
			for _, want := range c.want {
				assert.Contains(t, w.Body.String(), want)
			}
			assert.NotContains(t, w.Body.String(), strings.Repeat("p", 33), "payload beyond the preview")
		})
	}
	// A group delaystream did not make offers no action: no button posts
	// to it, on the queue page or on its own.
	for page, data := range map[string]any{"queue": qpForeign, "group": fp} {
		w := httptest.NewRecorder()
		s.render(w, r, http.StatusOK, page, data)
		require.Equal(t, http.StatusOK, w.Code, page)
		assert.NotContains(t, w.Body.String(), `/g/bad%20%3Cname%3E/`, page)
		if page == "group" {
			assert.NotContains(t, w.Body.String(), `<form method="post"`, page)
		}
	}
	// Read-only pages carry no form at all.
	ro := offline(t, WithReadOnly())
	qp.base = ro.base(r, "orders")
	gp.base = qp.base
	for page, data := range map[string]any{"queue": qp, "group": gp} {
		w := httptest.NewRecorder()
		ro.render(w, r, http.StatusOK, page, data)
		require.Equal(t, http.StatusOK, w.Code)
		assert.NotContains(t, w.Body.String(), `<form method="post"`, page)
		assert.Equal(t, map[string]int{"queue": 1, "group": 0}[page], strings.Count(w.Body.String(), "<button"), "%s: the only button finds a message", page)
		assert.Contains(t, w.Body.String(), `id="read-only"`, page)
	}
}

func TestHandlersOffline(t *testing.T) {
	t.Parallel()
	s := offline(t)
	do := func(s *Server, method, target string, form url.Values, header map[string]string) *httptest.ResponseRecorder {
		var r *http.Request
		if form != nil {
			r = httptest.NewRequest(method, target, strings.NewReader(form.Encode()))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		} else {
			r = httptest.NewRequest(method, target, nil)
		}
		for k, v := range header {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		return w
	}

	w := do(s, http.MethodGet, "/", nil, nil)
	assert.Equal(t, http.StatusFound, w.Code)
	assert.Equal(t, "/p/ds/", w.Header().Get("Location"))

	w = do(s, http.MethodGet, "/static/style.css", nil, nil)
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Contains(t, w.Header().Get("Content-Type"), "text/css")
	assert.Contains(t, w.Header().Get("Content-Security-Policy"), "script-src 'self'")
	assert.Equal(t, "DENY", w.Header().Get("X-Frame-Options"))
	assert.Equal(t, "nosniff", w.Header().Get("X-Content-Type-Options"))
	w = do(s, http.MethodGet, "/static/app.js", nil, nil)
	assert.Equal(t, http.StatusOK, w.Code)

	w = do(s, http.MethodGet, "/p/other/", nil, nil)
	assert.Equal(t, http.StatusNotFound, w.Code, "a prefix not served")
	w = do(s, http.MethodGet, "/api/p/other/queues", nil, nil)
	assert.Equal(t, http.StatusNotFound, w.Code)
	assert.Contains(t, w.Body.String(), `"error"`)

	action := "/p/ds/q/orders/g/billing/redrive"
	w = do(s, http.MethodPost, action, url.Values{"id": {"1-0"}}, nil)
	assert.Equal(t, http.StatusForbidden, w.Code, "no token")
	w = do(s, http.MethodPost, action, url.Values{"id": {"1-0"}, "csrf": {s.token + "0"}}, nil)
	assert.Equal(t, http.StatusForbidden, w.Code, "wrong token")
	w = do(s, http.MethodPost, action, url.Values{"id": {"1-0"}, "csrf": {s.token}}, map[string]string{"Sec-Fetch-Site": "cross-site"})
	assert.Equal(t, http.StatusForbidden, w.Code, "cross-site")
	w = do(s, http.MethodPost, "/p/ds/q/orders/g/billing/delete", url.Values{"csrf": {s.token}}, nil)
	assert.Equal(t, http.StatusNotFound, w.Code, "unknown action")
	// With the token it gets as far as Redis, which is not there.
	w = do(s, http.MethodPost, action, url.Values{"id": {"1-0"}, "csrf": {s.token}}, nil)
	assert.Equal(t, http.StatusBadGateway, w.Code, w.Body.String())

	ro := offline(t, WithReadOnly())
	w = do(ro, http.MethodPost, action, url.Values{"id": {"1-0"}, "csrf": {ro.token}}, nil)
	assert.Equal(t, http.StatusForbidden, w.Code)
	assert.Contains(t, w.Body.String(), "read-only")

	auth := offline(t, WithBasicAuth("u", "p"))
	for _, path := range []string{"/", "/static/style.css", "/api/p/ds/queues"} {
		w = do(auth, http.MethodGet, path, nil, nil)
		assert.Equal(t, http.StatusUnauthorized, w.Code, path)
	}
	w = do(auth, http.MethodGet, "/", nil, map[string]string{"Authorization": "Basic dTpw"}) // u:p
	assert.Equal(t, http.StatusFound, w.Code)
	w = do(auth, http.MethodGet, "/", nil, map[string]string{"Authorization": "Basic dTpx"}) // u:q
	assert.Equal(t, http.StatusUnauthorized, w.Code)
}
