package web

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"

	"github.com/delaystream/delaystream/cmd/delaystream/internal/health"
)

//go:embed static
var staticFS embed.FS

// routes builds the handler: security headers, then the Host check
// (every path: pages, static files, the API, the health checks), then
// basic auth (when configured; not for /healthz, which names nothing, so
// that probes need no credentials), then cross-origin protection of
// POSTs, then the routes.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	sub, _ := fs.Sub(staticFS, "static") // static is embedded: cannot fail
	files := http.StripPrefix("/static/", http.FileServerFS(sub))
	mux.HandleFunc("GET /static/", func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/") { // a directory: never listed
			http.NotFound(w, r)
			return
		}
		files.ServeHTTP(w, r)
	})

	mux.HandleFunc("GET /{$}", s.handleIndex)
	mux.HandleFunc("GET /p/{prefix}/{$}", s.handleQueues)
	mux.HandleFunc("GET /p/{prefix}/q/{queue}", s.handleQueue)
	mux.HandleFunc("GET /p/{prefix}/q/{queue}/chart", s.handleChart)
	mux.HandleFunc("GET /p/{prefix}/q/{queue}/g/{group}", s.handleGroup)
	mux.HandleFunc("GET /p/{prefix}/q/{queue}/next", s.handleNextList)
	mux.HandleFunc("GET /p/{prefix}/q/{queue}/recurring", s.handleRecurringList)
	mux.HandleFunc("GET /p/{prefix}/q/{queue}/quarantine", s.handleQuarantineList)
	mux.HandleFunc("GET /p/{prefix}/q/{queue}/locate", s.handleLocate)
	mux.HandleFunc("POST /p/{prefix}/q/{queue}/g/{group}/{action}", s.handleAction)
	mux.HandleFunc("POST /p/{prefix}/q/{queue}/r/{id}/{action}", s.handleRecurringAction)
	for _, a := range []string{"pause", "resume"} {
		mux.HandleFunc("POST /p/{prefix}/q/{queue}/"+a, s.handlePause)
		mux.HandleFunc("POST /p/{prefix}/q/{queue}/g/{group}/"+a, s.handlePause)
	}
	mux.HandleFunc("POST /p/{prefix}/q/{queue}/quarantine/{action}", s.handleQuarantineAction)

	mux.HandleFunc("GET /api/{$}", s.apiIndexHandler)
	mux.HandleFunc("GET /api/p/{prefix}/queues", s.apiQueues)
	mux.HandleFunc("GET /api/p/{prefix}/q/{queue}", s.apiQueue)
	mux.HandleFunc("GET /api/p/{prefix}/q/{queue}/history", s.apiHistory)
	mux.HandleFunc("GET /api/p/{prefix}/q/{queue}/counts", s.apiCounts)
	mux.HandleFunc("GET /api/p/{prefix}/q/{queue}/locate", s.apiLocate)
	mux.HandleFunc("GET /api/p/{prefix}/q/{queue}/next", s.apiNext)
	mux.HandleFunc("GET /api/p/{prefix}/q/{queue}/g/{group}/dead", s.apiDead)
	mux.HandleFunc("GET /api/p/{prefix}/q/{queue}/recurring", s.apiRecurring)
	mux.HandleFunc("GET /api/p/{prefix}/q/{queue}/quarantine", s.apiQuarantine)
	mux.Handle("GET /health", health.Handler(s.inspectors, s.cfg.health))
	if s.cfg.metrics != nil {
		mux.Handle("GET /metrics", s.cfg.metrics)
	}

	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "cross-origin request refused", http.StatusForbidden)
	}))
	var h http.Handler = cop.Handler(mux)
	if s.cfg.auth {
		h = s.requireAuth(h)
	}
	outer := http.NewServeMux()
	outer.Handle("GET /healthz", health.Ping(s.rdb))
	outer.Handle("/", h)
	return securityHeaders(s.checkHost(outer))
}

// securityHeaders forbids framing, sniffing, inline scripts and styles and
// third-party resources, and caching of pages.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; "+
			"img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		if !strings.HasPrefix(r.URL.Path, "/static/") {
			h.Set("Cache-Control", "no-store")
		}
		next.ServeHTTP(w, r)
	})
}

// requireAuth answers 401 to requests without the configured credentials.
func (s *Server) requireAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.checkAuth(r) {
			w.Header().Set("WWW-Authenticate", `Basic realm="delaystream", charset="UTF-8"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}
