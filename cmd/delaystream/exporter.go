package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/delaystream/delaystream/admin"
	"github.com/delaystream/delaystream/cmd/delaystream/internal/health"
	"github.com/delaystream/delaystream/cmd/delaystream/internal/web"
	dsprom "github.com/delaystream/delaystream/contrib/prometheus"
)

func (a *app) exporterCmd() *cobra.Command {
	var (
		addr      string
		timeout   time.Duration
		schedules int
		limits    = health.DefaultLimits
		guard     guardFlags
	)
	c := &cobra.Command{
		Use:   "exporter",
		Short: "Serve Prometheus metrics of every queue under the prefix (/metrics) and health checks (/healthz, /health)",
		Long: `exporter serves, on --addr, /metrics: the gauges of every queue found under --prefix at each
scrape (on a single server or every master of a Cluster), under the delaystream_ namespace:
waiting, overdue and how long, stream entries, quarantine, Redis servers that may evict, and per
consumer group consumers, pending, oldest pending age, lag, retry lane and dead letters, each
Redis server's used and maximum memory and whether it can evict, and delaystream_up (0 when a
scrape could not read Redis: the series it could not read then repeat the last figures read, and
delaystream_queue_figures_age_seconds says how old they are). It needs no code in
the application (whose own process may also export the hook-fed counters with
contrib/prometheus).

/healthz answers 200 "ok" when Redis answers PING within 5 s, else 503: for a liveness or
readiness probe. /health runs the checks an operator's alert wants, a line each (JSON with
?format=json or Accept: application/json), and answers 503 when one fails: a server
unreachable, full (used >= maxmemory) or able to evict; a queue whose earliest waiting message
is overdue by more than --max-overdue (no mover promotes it); a consumer group with work and no
live consumer. A paused queue or group, quarantined entries and a server over 90 % of its
maxmemory are warnings.

Recurring schedules are reported per queue (how many, how many paused, the worst lateness) and,
for a queue with at most --max-schedule-series of them, one series each: the series of a scrape
stay bounded however many schedules a queue has. A consumer group made on a queue's stream by
other means, with a name delaystream cannot use, is reported with the figures Redis keeps of it.

It reads only: it has no action, and shows no payload. Like serve, it listens on loopback only
unless --allow-remote, answers only requests whose Host header names the address it listens on
(or an --allowed-host), and with --basic-auth (or $` + basicAuthEnv + `) needs the credentials on
every path but /healthz. It runs until interrupted (SIGINT / SIGTERM), then stops within about 5 s.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.exporter(ctxOf(cmd), addr, timeout, schedules, limits, guard)
		},
	}
	c.Flags().StringVar(&addr, "addr", "127.0.0.1:9390", "host:port to listen on (loopback unless --allow-remote; \":9390\" for every interface)")
	guard.add(c)
	c.Flags().DurationVar(&timeout, "stats-timeout", dsprom.DefaultStatsTimeout, "bound of one scrape's reads from Redis")
	c.Flags().IntVar(&schedules, "max-schedule-series", dsprom.DefaultMaxScheduleSeries,
		"a queue with more recurring schedules reports per-queue aggregates only, no series per schedule (0 to 100000)")
	c.Flags().DurationVar(&limits.MaxOverdue, "max-overdue", limits.MaxOverdue,
		"/health fails when a queue's earliest waiting message is overdue by more than this")
	return c
}

func (a *app) exporter(ctx context.Context, addr string, timeout time.Duration, schedules int, limits health.Limits, guard guardFlags) error {
	loopback, opts, auth, err := guard.check(ctx, addr, "the exporter names the queues and groups, so it listens on loopback only unless you pass --allow-remote (then protect it with --basic-auth and TLS in front, or a firewall)")
	if err != nil {
		return err
	}
	in, err := a.inspector() // connects
	if err != nil {
		return err
	}
	if limits.MaxOverdue <= 0 {
		return usagef("--max-overdue must be positive")
	}
	metrics, err := a.metricsHandler(nil, dsprom.WithStatsTimeout(timeout), dsprom.WithMaxScheduleSeries(schedules))
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics)
	mux.Handle("GET /healthz", health.Ping(a.rdb))
	mux.Handle("GET /health", health.Handler(func() []*admin.Operator { return []*admin.Operator{in} }, limits))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "delaystream exporter: /metrics, /healthz, /health")
	})
	handler, err := web.Protect(mux, append(opts, web.WithLogger(slog.New(slog.NewTextHandler(a.stderr, nil))))...)
	if err != nil {
		return usageError{err}
	}

	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "delaystream: exporting prefix %s on http://%s/metrics\n", a.prefix, l.Addr())
	if !loopback && !auth {
		fmt.Fprintf(a.stderr, "delaystream: WARNING: /metrics and /health on %s answer anyone who reaches it, "+
			"naming the queues and groups: add --basic-auth, or keep it behind a firewall\n", l.Addr())
	}
	hs := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, WriteTimeout: time.Minute,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	g, gctx := errgroup.WithContext(ctx)
	serveUntilDone(ctx, gctx, g, hs, l)
	return g.Wait()
}

// metricsHandler returns the Prometheus handler of every queue under
// prefixes (none: --prefix), discovered at each scrape, with the Go and
// process collectors.
func (a *app) metricsHandler(prefixes []string, opts ...dsprom.Option) (http.Handler, error) {
	m, err := dsprom.New(opts...)
	if err != nil {
		return nil, usageError{err}
	}
	if len(prefixes) == 0 {
		prefixes = []string{a.prefix}
	}
	for _, p := range prefixes {
		if err := m.WatchAll(a.rdb, p); err != nil {
			return nil, usageError{err}
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(m, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}), nil
}
