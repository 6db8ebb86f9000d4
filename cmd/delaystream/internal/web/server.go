package web

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/admin"
	"github.com/delaystream/delaystream/cmd/delaystream/internal/health"
)

// Defaults of the options.
const (
	DefaultPreviewBytes   = 256             // see WithPreviewBytes
	DefaultSampleInterval = 5 * time.Second // see WithSampleInterval
	DefaultHistorySize    = 720             // see WithHistorySize: one hour at the default interval
	MaxSampledQueues      = 1000            // queues per server whose history is kept
)

// Page sizes. Every list the pages and the JSON API show is paged: a
// "limit" query parameter (default DefaultListLimit, at most MaxListLimit)
// and a cursor ("after", the last item of the page before) or, where the
// list has no stable key to resume after, an "offset"; a page that is
// followed by another links to it (pages: a "next" link; the JSON API: a
// Link header with rel="next"). The queue page shows the first few of
// each of its lists, each with a link to its own paged list.
const (
	DefaultListLimit = 100  // items per page of a list unless ?limit= says otherwise
	MaxListLimit     = 1000 // the most items a page of a list holds, whatever ?limit= says

	peekCount      = 20 // next due messages on a queue page
	queueDeadCount = 10 // dead letters per group on a queue page
	queueRecurring = 20 // recurring schedules on a queue page
	queueQuarCount = 10 // quarantined entries on a queue page
	groupDeadCount = 50 // dead letters per page on a group page
)

var (
	// ErrInvalidOption is wrapped by every error an Option or New returns.
	ErrInvalidOption = errors.New("web: invalid option")
	// ErrRunning is returned by a second concurrent [Server.Run].
	ErrRunning = errors.New("web: sampler already running")
)

// Option configures a Server.
type Option func(*config) error

type config struct {
	readOnly       bool
	user, pass     string
	auth           bool
	previewBytes   int
	prefixes       []string
	sampleInterval time.Duration
	historySize    int
	logger         *slog.Logger
	allowedHosts   []hostPort // WithAllowedHosts's, parsed
	health         health.Limits
	metrics        http.Handler // WithMetrics's; nil: no /metrics
}

// WithMetrics serves h (a Prometheus handler) at GET /metrics, behind the
// same host check and credentials as the pages.
func WithMetrics(h http.Handler) Option {
	return func(c *config) error {
		if h == nil {
			return fmt.Errorf("%w: nil metrics handler", ErrInvalidOption)
		}
		c.metrics = h
		return nil
	}
}

// Protect wraps h, a handler of read-only documents (an exporter's
// /metrics and /health), in what guards the web view: a request whose
// Host header is not the address it came in on, nor one of
// WithAllowedHosts, is refused (a page rebound to this address by DNS
// cannot read it), and with WithBasicAuth every path but /healthz needs
// the credentials. WithLogger sets where refusals are logged; the other
// options are ignored. Errors wrap [ErrInvalidOption].
func Protect(h http.Handler, opts ...Option) (http.Handler, error) {
	s := &Server{cfg: config{logger: slog.Default()}}
	for _, o := range opts {
		if err := o(&s.cfg); err != nil {
			return nil, err
		}
	}
	inner := h
	if s.cfg.auth {
		inner = s.requireAuth(h)
	}
	outer := http.NewServeMux()
	outer.Handle("GET /healthz", h)
	outer.Handle("/", inner)
	return s.checkHost(outer), nil
}

// WithHealthLimits sets the bounds /health holds the queues to (default
// health.DefaultLimits); a MaxOverdue that is not positive is refused.
func WithHealthLimits(l health.Limits) Option {
	return func(c *config) error {
		if l.MaxOverdue <= 0 || l.NearlyFull <= 0 || l.NearlyFull > 1 {
			return fmt.Errorf("%w: health limits: max overdue must be positive and nearly full within (0, 1]", ErrInvalidOption)
		}
		c.health = l
		return nil
	}
}

// WithReadOnly serves the pages without any action: no redrive or purge
// buttons are shown and every POST is refused with 403 Forbidden.
func WithReadOnly() Option {
	return func(c *config) error { c.readOnly = true; return nil }
}

// WithBasicAuth requires HTTP basic authentication with user and pass on
// every request (pages, static files and the JSON API). Both must be
// non-empty. Default: no authentication.
func WithBasicAuth(user, pass string) Option {
	return func(c *config) error {
		if user == "" || pass == "" {
			return fmt.Errorf("%w: basic auth needs a user and a password", ErrInvalidOption)
		}
		c.user, c.pass, c.auth = user, pass, true
		return nil
	}
}

// WithPreviewBytes sets how much of a payload the pages and the JSON API
// ever show: a preview of at most n bytes (see cli.Preview), cut with
// an ellipsis. Payloads are never served whole, nor read whole: the
// listings read at most [ReadBytes](n) bytes of each payload from Redis.
// Default [DefaultPreviewBytes]; n must be 16 to 65536.
func WithPreviewBytes(n int) Option {
	return func(c *config) error {
		if n < 16 || n > 65536 {
			return fmt.Errorf("%w: preview bytes must be 16 to 65536, got %d", ErrInvalidOption, n)
		}
		c.previewBytes = n
		return nil
	}
}

// WithPrefixes sets the key prefixes served, one queue list page each.
// Default: the prefix given to [New] alone. Each must be a valid prefix
// (see admin.New); [New] checks them.
func WithPrefixes(prefixes ...string) Option {
	return func(c *config) error {
		if len(prefixes) == 0 {
			return fmt.Errorf("%w: no prefix", ErrInvalidOption)
		}
		if slices.Contains(prefixes, "") {
			return fmt.Errorf("%w: empty prefix", ErrInvalidOption)
		}
		c.prefixes = slices.Compact(slices.Sorted(slices.Values(prefixes)))
		return nil
	}
}

// ReadBytes returns how many bytes of each payload the listings read
// from Redis to show a preview of at most previewBytes bytes: four times
// as many, at least 1 KiB (a msgpack payload rendered as JSON can be
// shorter than its encoding; text and hex previews need at most
// previewBytes). A payload longer than that is previewed from its first
// ReadBytes bytes: text as is, anything else (msgpack included: a cut
// value cannot be decoded) as hex.
func ReadBytes(previewBytes int) int { return max(4*previewBytes, 1024) }

// WithSampleInterval sets how often [Server.Run] reads the figures of
// every queue for the charts. Default [DefaultSampleInterval]; at least
// 100 ms.
func WithSampleInterval(d time.Duration) Option {
	return func(c *config) error {
		if d < 100*time.Millisecond {
			return fmt.Errorf("%w: sample interval must be >= 100ms, got %s", ErrInvalidOption, d)
		}
		c.sampleInterval = d
		return nil
	}
}

// WithHistorySize sets how many samples are kept per queue (a ring: the
// oldest is dropped). Default [DefaultHistorySize]; 2 to 100000.
func WithHistorySize(n int) Option {
	return func(c *config) error {
		if n < 2 || n > 100000 {
			return fmt.Errorf("%w: history size must be 2 to 100000, got %d", ErrInvalidOption, n)
		}
		c.historySize = n
		return nil
	}
}

// WithAllowedHosts adds names the server answers to: the Host header of
// every request must name the address the request came in on (its IP and
// port; or, when that is a loopback address, "localhost", "127.0.0.1" or
// "[::1]" with its port) or one of these, else it is refused (421
// Misdirected Request; see the package doc, "DNS rebinding"). Give the
// names a proxy in front forwards, or the names by which the server is
// reached with --allow-remote. Each is a host name or IP, with a port
// ("queues.example.com:8443", "[2001:db8::1]:8080") to allow that port
// only, or without to allow any port; a Host header without a port is
// port 80 or 443. Names are compared case-insensitively. Each call adds to
// the names of the calls before. A name that is empty or not a host
// (with a path, a scheme or a user, say) fails New.
func WithAllowedHosts(hosts ...string) Option {
	return func(c *config) error {
		for _, h := range hosts {
			hp, err := parseAllowedHost(h)
			if err != nil {
				return fmt.Errorf("%w: allowed host %q: %w", ErrInvalidOption, h, err)
			}
			c.allowedHosts = append(c.allowedHosts, hp)
		}
		return nil
	}
}

// WithLogger sets the logger of the sampler's failures, of failed
// requests, of requests for another host and of every action performed
// or refused (see the package doc, "Safety"). Default slog.Default().
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return fmt.Errorf("%w: nil logger", ErrInvalidOption)
		}
		c.logger = l
		return nil
	}
}

// Server is the web view: an http.Handler serving the pages, the JSON API
// and the embedded static files, and a sampler ([Server.Run]) recording
// each queue's figures for the charts. Build it with [New]; it is safe for
// concurrent use.
type Server struct {
	cfg     config
	rdb     redis.UniversalClient
	ins     map[string]*admin.Operator // by prefix
	token   string                     // CSRF token of this process
	hist    *history
	pages   *pages
	handler http.Handler
	running atomic.Bool
	started atomic.Int64 // unix ms when Run started sampling; 0 before
	mem     memoryCache  // the servers that can evict, for the banner
	counts  countsCache  // the queues' counts read from Redis, for a few seconds
}

// New returns the web view of the queues on rdb under prefix ("" means
// delaystream.DefaultPrefix), or under those of WithPrefixes instead, read with
// package admin. It validates the options, talks to no server and starts
// nothing: serve [Server.ServeHTTP] and call [Server.Run] for the charts.
// The client is borrowed, never closed. Errors wrap [ErrInvalidOption].
func New(rdb redis.UniversalClient, prefix string, opts ...Option) (*Server, error) {
	if rdb == nil {
		return nil, fmt.Errorf("%w: nil redis client", ErrInvalidOption)
	}
	if prefix == "" {
		prefix = delaystream.DefaultPrefix
	}
	cfg := config{previewBytes: DefaultPreviewBytes, prefixes: []string{prefix}, health: health.DefaultLimits,
		sampleInterval: DefaultSampleInterval, historySize: DefaultHistorySize, logger: slog.Default()}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	s := &Server{cfg: cfg, rdb: rdb, ins: map[string]*admin.Operator{},
		hist: newHistory(cfg.historySize, MaxSampledQueues)}
	for _, p := range cfg.prefixes {
		in, err := admin.New(rdb, p)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidOption, err)
		}
		s.ins[p] = in
	}
	var tok [32]byte
	if _, err := rand.Read(tok[:]); err != nil {
		return nil, fmt.Errorf("web: csrf token: %w", err)
	}
	s.token = hex.EncodeToString(tok[:])
	pg, err := parsePages()
	if err != nil {
		return nil, err
	}
	s.pages = pg
	s.handler = s.routes()
	return s, nil
}

// inspectors returns the Operator of every prefix served, in prefix order.
func (s *Server) inspectors() []*admin.Operator {
	out := make([]*admin.Operator, 0, len(s.cfg.prefixes))
	for _, p := range s.cfg.prefixes {
		out = append(out, s.ins[p])
	}
	return out
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// Prefixes returns the key prefixes served, sorted.
func (s *Server) Prefixes() []string { return slices.Clone(s.cfg.prefixes) }

// ReadOnly reports whether the server refuses actions.
func (s *Server) ReadOnly() bool { return s.cfg.readOnly }

// Run samples the figures of every queue of every prefix served, at once
// and then every sample interval, into a bounded in-memory history per
// queue (the charts and /api/.../history), until ctx is cancelled; it then
// returns nil. A failed round is logged and the next one runs as usual.
// A second concurrent Run returns [ErrRunning]. Each round is bounded by
// the sample interval (at least 10 s); Run returns as soon as the round
// in flight sees ctx cancelled.
func (s *Server) Run(ctx context.Context) error {
	if !s.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer s.running.Store(false)
	s.started.CompareAndSwap(0, time.Now().UnixMilli())
	s.cfg.logger.DebugContext(ctx, "web: sampler started", slog.Duration("interval", s.cfg.sampleInterval))
	defer s.cfg.logger.DebugContext(ctx, "web: sampler stopped")
	t := time.NewTicker(s.cfg.sampleInterval)
	defer t.Stop()
	for {
		for _, p := range s.cfg.prefixes {
			if err := s.sampleOnce(ctx, p); err != nil && ctx.Err() == nil {
				s.cfg.logger.WarnContext(ctx, "web: sampling failed", slog.String("prefix", p), slog.Any("err", err))
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// sampleOnce records one sample of every queue under prefix.
func (s *Server) sampleOnce(ctx context.Context, prefix string) error {
	ctx, cancel := context.WithTimeout(ctx, max(s.cfg.sampleInterval, 10*time.Second))
	defer cancel()
	all, err := s.ins[prefix].Stats(ctx)
	if err != nil {
		return err
	}
	for _, st := range all {
		s.hist.add(prefix, st.Queue, sampleOf(st))
	}
	s.hist.endRound(prefix)
	return nil
}

// History returns the samples recorded for queue under prefix, oldest
// first (empty before the first round of [Server.Run]).
func (s *Server) History(prefix, queue string) History {
	return History{Prefix: prefix, Queue: queue, IntervalMs: s.cfg.sampleInterval.Milliseconds(),
		Samples: s.hist.get(prefix, queue)}
}

// checkAuth reports whether r carries the configured basic credentials,
// comparing digests in constant time.
func (s *Server) checkAuth(r *http.Request) bool {
	u, p, ok := r.BasicAuth()
	if !ok {
		return false
	}
	hu, hp := sha256.Sum256([]byte(u)), sha256.Sum256([]byte(p))
	wu, wp := sha256.Sum256([]byte(s.cfg.user)), sha256.Sum256([]byte(s.cfg.pass))
	return subtle.ConstantTimeCompare(hu[:], wu[:])&subtle.ConstantTimeCompare(hp[:], wp[:]) == 1
}

// checkToken reports whether the form of r carries this process's CSRF
// token.
func (s *Server) checkToken(r *http.Request) bool {
	got := r.PostFormValue("csrf")
	return len(got) == len(s.token) && subtle.ConstantTimeCompare([]byte(got), []byte(s.token)) == 1
}
