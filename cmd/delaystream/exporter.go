package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	dsprom "github.com/delaystream/delaystream/contrib/prometheus"
)

// healthTimeout bounds /healthz's PING.
const healthTimeout = 2 * time.Second

func (a *app) exporterCmd() *cobra.Command {
	var (
		addr      string
		timeout   time.Duration
		schedules int
	)
	c := &cobra.Command{
		Use:   "exporter",
		Short: "Serve Prometheus metrics of every queue under the prefix (/metrics) and a health check (/healthz)",
		Long: `exporter serves, on --addr, /metrics: the gauges of every queue found under --prefix at each
scrape (on a single server or every master of a Cluster), under the delaystream_ namespace:
waiting, overdue and how long, stream entries, quarantine, Redis servers that may evict, and per
consumer group consumers, pending, oldest pending age, lag, retry lane and dead letters; and
/healthz: 200 when Redis answers PING within 2 s, else 503. It needs no code in the application
(whose own process may also export the hook-fed counters with contrib/prometheus).

Recurring schedules are reported per queue (how many, how many paused, the worst lateness) and,
for a queue with at most --max-schedule-series of them, one series each: the series of a scrape
stay bounded however many schedules a queue has. A consumer group made on a queue's stream by
other means, with a name delaystream cannot use, is reported with the figures Redis keeps of it.

It reads only: it has no action, and shows no payload. It runs until interrupted (SIGINT /
SIGTERM), then stops within about 5 s.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.exporter(ctxOf(cmd), addr, timeout, schedules) },
	}
	c.Flags().StringVar(&addr, "addr", "127.0.0.1:9390", "host:port to listen on (\":9390\" for every interface)")
	c.Flags().DurationVar(&timeout, "stats-timeout", dsprom.DefaultStatsTimeout, "bound of one scrape's reads from Redis")
	c.Flags().IntVar(&schedules, "max-schedule-series", dsprom.DefaultMaxScheduleSeries,
		"a queue with more recurring schedules reports per-queue aggregates only, no series per schedule (0 to 100000)")
	return c
}

func (a *app) exporter(ctx context.Context, addr string, timeout time.Duration, schedules int) error {
	if _, err := a.inspector(); err != nil { // connects
		return err
	}
	m, err := dsprom.New(dsprom.WithStatsTimeout(timeout), dsprom.WithMaxScheduleSeries(schedules))
	if err != nil {
		return usageError{err}
	}
	if err := m.WatchAll(a.rdb, a.prefix); err != nil {
		return usageError{err}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(m, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		pctx, cancel := context.WithTimeout(r.Context(), healthTimeout)
		defer cancel()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := a.rdb.Ping(pctx).Err(); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "redis unavailable: %v\n", err)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "delaystream exporter: /metrics, /healthz")
	})

	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "delaystream: exporting prefix %s on http://%s/metrics\n", a.prefix, l.Addr())
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, WriteTimeout: time.Minute,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	g, gctx := errgroup.WithContext(ctx)
	serveUntilDone(ctx, gctx, g, hs, l)
	return g.Wait()
}
