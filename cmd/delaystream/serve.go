package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/delaystream/delaystream/cmd/delaystream/internal/health"
	"github.com/delaystream/delaystream/cmd/delaystream/internal/web"
)

// basicAuthEnv holds "user:password" for serve's basic auth when
// --basic-auth is not given (an environment variable stays out of ps).
const basicAuthEnv = "DELAYSTREAM_BASIC_AUTH"

// serveFlags are the flags of `delaystream serve`.
type serveFlags struct {
	addr           string
	guard          guardFlags
	readOnly       bool
	previewBytes   int
	sampleInterval time.Duration
	history        int
	prefixes       []string
	health         health.Limits
}

func (a *app) serveCmd() *cobra.Command {
	var f serveFlags
	c := &cobra.Command{
		Use:   "serve",
		Short: "Serve the web view: queues, groups, dead letters, with redrive and purge buttons",
		Long: `serve runs the web view on --addr: a page per prefix listing its queues, and a page per queue with
waiting and overdue over time (sampled by this process from the moment it starts), the next due
messages, each group's pending, oldest pending age, lag and retry lane, and the dead letters with
payload previews and redrive / purge buttons. A JSON API under /api/ serves the documents of --json.

Safe by default: it listens on loopback only and refuses any other address without --allow-remote;
it answers only requests whose Host header names the address it listens on (or, on loopback,
localhost) or a name given with --allowed-host, so that a web page cannot reach it through a name
of its own rebound to this address (DNS rebinding); redrive and purge are POSTs carrying a
per-process CSRF token (cross-site requests are refused); --read-only removes every action;
--basic-auth (or $` + basicAuthEnv + `) protects every path but /healthz; payloads are shown as previews of at
most --preview-bytes, never whole, and the lists read only a prefix of each from Redis; every
list is paged. Every action is logged with the remote address and the basic-auth user.

/healthz answers 200 "ok" when Redis answers PING, else 503, naming no queue: probes reach it
without credentials. /health runs the checks of the exporter's /health (servers, promotion,
consumers; 503 when one fails; --max-overdue) over every prefix served.

It runs until interrupted (SIGINT / SIGTERM), then stops within about 5 s.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.serve(ctxOf(cmd), f) },
	}
	fl := c.Flags()
	fl.StringVar(&f.addr, "addr", "127.0.0.1:8080", "host:port to listen on (loopback unless --allow-remote)")
	f.guard.add(c)
	fl.BoolVar(&f.readOnly, "read-only", false, "show no redrive or purge button and refuse every POST")
	fl.IntVar(&f.previewBytes, "preview-bytes", web.DefaultPreviewBytes, "most bytes of a payload preview shown; payloads are never shown whole (16 to 65536)")
	fl.DurationVar(&f.sampleInterval, "sample-interval", web.DefaultSampleInterval, "how often the charts' figures are read (at least 100ms)")
	fl.IntVar(&f.history, "history", web.DefaultHistorySize, "samples kept per queue for the charts (a ring; memory only)")
	fl.StringSliceVar(&f.prefixes, "prefixes", nil, "serve these key prefixes, one queue list each (default: --prefix)")
	f.health = health.DefaultLimits
	fl.DurationVar(&f.health.MaxOverdue, "max-overdue", f.health.MaxOverdue,
		"/health fails when a queue's earliest waiting message is overdue by more than this")
	return c
}

// guardFlags are the flags of what guards a server of the command (serve,
// exporter): where it may listen, the names it answers to, credentials.
type guardFlags struct {
	allowRemote  bool
	basicAuth    string
	allowedHosts []string
}

func (g *guardFlags) add(c *cobra.Command) {
	fl := c.Flags()
	fl.BoolVar(&g.allowRemote, "allow-remote", false, "allow --addr to be a non-loopback address (protect it with --basic-auth behind TLS, or a firewall)")
	fl.StringVar(&g.basicAuth, "basic-auth", "", "user:password required on every request but /healthz ($"+basicAuthEnv+"; prefer it: flags show in ps)")
	fl.StringArrayVar(&g.allowedHosts, "allowed-host", nil, "also answer requests for this host name, with :port for that port only "+
		"(repeatable; the names a proxy in front forwards, or that reach --allow-remote); requests naming any other host are refused")
}

// check applies g to a server listening on addr: it refuses a
// non-loopback addr without --allow-remote (why: the reason given), and
// returns whether addr is loopback, the web options of the host check and
// credentials, and whether credentials are required.
func (g *guardFlags) check(ctx context.Context, addr, why string) (loopback bool, opts []web.Option, auth bool, err error) {
	loopback, err = isLoopback(ctx, addr)
	if err != nil {
		return false, nil, false, usagef("--addr %s: %w", addr, err)
	}
	if !loopback && !g.allowRemote {
		return false, nil, false, usagef("--addr %s is not a loopback address: %s", addr, why)
	}
	creds := g.basicAuth
	if creds == "" {
		creds = os.Getenv(basicAuthEnv)
	}
	if creds != "" {
		user, pass, ok := strings.Cut(creds, ":")
		if !ok || user == "" || pass == "" {
			return false, nil, false, usagef("--basic-auth / $%s must be user:password", basicAuthEnv)
		}
		opts = append(opts, web.WithBasicAuth(user, pass))
	}
	hosts := g.allowedHosts
	if host, port, err := net.SplitHostPort(addr); err == nil && host != "" && net.ParseIP(strings.Trim(host, "[]")) == nil {
		// --addr names a host: requests for that name are for this server
		// too (the server knows only the address it listens on).
		if port != "0" {
			host = net.JoinHostPort(host, port)
		}
		hosts = append(hosts, host)
	}
	if len(hosts) > 0 {
		opts = append(opts, web.WithAllowedHosts(hosts...))
	}
	return loopback, opts, creds != "", nil
}

// serve runs the web view until ctx is cancelled.
func (a *app) serve(ctx context.Context, f serveFlags) error {
	loopback, guard, authOn, err := f.guard.check(ctx, f.addr, "the web view can redrive and purge, so it listens on "+
		"loopback only unless you pass --allow-remote (then protect it with --basic-auth and TLS in front, or --read-only)")
	if err != nil {
		return err
	}
	opts := append([]web.Option{web.WithPreviewBytes(f.previewBytes), web.WithSampleInterval(f.sampleInterval),
		web.WithHistorySize(f.history), web.WithLogger(slog.New(slog.NewTextHandler(a.stderr, nil))), web.WithHealthLimits(f.health)},
		guard...)
	if f.readOnly {
		opts = append(opts, web.WithReadOnly())
	}
	if len(f.prefixes) > 0 {
		opts = append(opts, web.WithPrefixes(f.prefixes...))
	}
	if _, err := a.inspector(); err != nil { // connects
		return err
	}
	metrics, err := a.metricsHandler(f.prefixes)
	if err != nil {
		return err
	}
	opts = append(opts, web.WithMetrics(metrics))
	srv, err := web.New(a.rdb, a.prefix, opts...)
	if err != nil {
		if errors.Is(err, web.ErrInvalidOption) {
			return usageError{err}
		}
		return err
	}
	if !loopback {
		switch {
		case !authOn && !f.readOnly:
			fmt.Fprintf(a.stderr, "delaystream: WARNING: serving %s beyond this host with NO authentication and "+
				"redrive/purge enabled: anyone who can reach it can act on your queues. Add --basic-auth or --read-only.\n", f.addr)
		case !authOn:
			fmt.Fprintf(a.stderr, "delaystream: WARNING: serving %s beyond this host with no authentication: "+
				"anyone who can reach it can read your queues and payload previews.\n", f.addr)
		default:
			fmt.Fprintf(a.stderr, "delaystream: warning: serving %s beyond this host; basic auth sends the password "+
				"in clear unless a TLS proxy is in front.\n", f.addr)
		}
	}
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", f.addr)
	if err != nil {
		return err
	}
	mode := ""
	if f.readOnly {
		mode = " (read-only)"
	}
	fmt.Fprintf(a.stdout, "delaystream: serving prefix %s on http://%s/%s\n",
		strings.Join(srv.Prefixes(), ","), l.Addr(), mode)

	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 2 * time.Minute, IdleTimeout: 2 * time.Minute,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return srv.Run(gctx) })
	serveUntilDone(ctx, gctx, g, hs, l)
	return g.Wait()
}

// serveUntilDone serves hs on l in g until gctx ends, then shuts it down
// gracefully within 5 s (closing it after that), outliving ctx's
// cancellation for the shutdown.
func serveUntilDone(ctx, gctx context.Context, g *errgroup.Group, hs *http.Server, l net.Listener) {
	g.Go(func() error {
		if err := hs.Serve(l); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := hs.Shutdown(sctx); err != nil {
			return hs.Close()
		}
		return nil
	})
}

// isLoopback reports whether addr ("host:port") listens on loopback only:
// a loopback IP, "localhost", or a name resolving to loopback addresses
// only. An empty host (every interface) is not.
func isLoopback(ctx context.Context, addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, err
	}
	host, _, _ = strings.Cut(host, "%") // an IPv6 zone
	switch {
	case host == "":
		return false, nil
	case strings.EqualFold(host, "localhost"):
		return true, nil
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback(), nil
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupIPAddr(rctx, host)
	if err != nil {
		return false, err
	}
	for _, ip := range ips {
		if !ip.IP.IsLoopback() {
			return false, nil
		}
	}
	return len(ips) > 0, nil
}
