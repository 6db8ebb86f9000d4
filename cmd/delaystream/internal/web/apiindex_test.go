package web_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/cmd/delaystream/internal/web"
	"github.com/delaystream/delaystream/internal/redistest"
	"github.com/delaystream/delaystream/internal/seedtest"
)

// GET /api/ lists the prefixes served and every document of the API, and
// every path it lists answers (on the seeded queues: /health with 503, as
// the seeded queue "orders" has a message overdue with no mover).
func TestAPIIndex(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	seedtest.Seed(t, rdb, prefix)
	srv, err := web.New(rdb, prefix)
	require.NoError(t, err)
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)

	_, body := fetch(t, ts, "/api/")
	var index struct {
		Prefixes  []string          `json:"prefixes"`
		Endpoints []web.APIEndpoint `json:"endpoints"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &index), body)
	assert.Equal(t, []string{prefix}, index.Prefixes)
	require.NotEmpty(t, index.Endpoints)
	fill := strings.NewReplacer("{prefix}", url.PathEscape(prefix), "{queue}", "jobs", "{group}", "billing")
	for _, e := range index.Endpoints {
		assert.NotEmpty(t, e.Doc, e.Path)
		path := fill.Replace(e.Path)
		if e.Query == "id" { // a required parameter
			path += "?id=job-1"
		}
		resp, err := http.Get(ts.URL + path)
		require.NoError(t, err)
		resp.Body.Close()
		want := http.StatusOK
		if e.Path == "/health" {
			want = http.StatusServiceUnavailable
		}
		assert.Equal(t, want, resp.StatusCode, path)
	}
}
