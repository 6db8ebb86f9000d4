package web

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A malformed ?after= is a clean 400 that names the parameter, with no
// error chain and before any read; /static/ lists nothing.
func TestBadRequestsAreClean(t *testing.T) {
	t.Parallel()
	s := offline(t) // any read would fail with a 502
	for _, path := range []string{"/p/ds/q/orders/g/billing?after=garbage", "/api/p/ds/q/orders/g/billing/dead?after=garbage"} {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		body, _ := io.ReadAll(w.Body)
		assert.Equal(t, http.StatusBadRequest, w.Code, path)
		assert.Contains(t, string(body), "is not a dead-letter entry id", path)
		assert.NotContains(t, string(body), "delaystream:", path)
		assert.NotContains(t, string(body), "ERR", path)
	}
	for path, code := range map[string]int{"/static/": http.StatusNotFound, "/static/style.css": http.StatusOK} {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		assert.Equal(t, code, w.Code, path)
		assert.NotContains(t, w.Body.String(), "app.js", path+" lists the directory")
	}
}
