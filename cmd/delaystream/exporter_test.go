package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/cmd/delaystream/internal/health"
	"github.com/delaystream/delaystream/internal/redistest"
	"github.com/delaystream/delaystream/internal/seedtest"
	"github.com/delaystream/delaystream/internal/stream"
)

// startExporter runs `delaystream exporter` against tg on a free port,
// with args added, and returns its base URL and a function that interrupts
// it and returns its exit code.
func startExporter(t *testing.T, tg target, args ...string) (string, func() int) {
	t.Helper()
	all := append(append([]string{"--prefix", tg.prefix}, tg.flags...), "exporter", "--addr", "127.0.0.1:0")
	cmd := exec.Command(binary, append(all, args...)...)
	cmd.Env = append(append(os.Environ(), "REDIS_URL="+tg.url), tg.env...)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	stopped := false
	stop := func() int {
		if stopped {
			return 0
		}
		stopped = true
		_ = cmd.Process.Signal(syscall.SIGINT)
		err := cmd.Wait()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		return 0
	}
	t.Cleanup(func() { stop() })
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	m := regexp.MustCompile(`on (http://\S+)/metrics`).FindStringSubmatch(line)
	require.NotNil(t, m, line)
	return m[1], stop
}

// scrapeText fetches url/metrics and parses the text format.
func scrapeText(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	res, err := http.Get(url + "/metrics")
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(res.Body)
	require.NoError(t, err)
	return fams
}

// value returns the value of the series of family name with labels (a
// gauge or a counter), and whether it exists.
func value(fams map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		for k, v := range labels {
			if got[k] != v {
				continue next
			}
		}
		if c := m.GetCounter(); c != nil {
			return c.GetValue(), true
		}
		return m.GetGauge().GetValue(), true
	}
	return 0, false
}

// The exporter serves every queue's gauges, discovered at each scrape (a
// queue created after it started included), with stats_errors_total at 0
// for each, and a health check; it stops on SIGINT with exit status 0.
func TestExporter(t *testing.T) {
	t.Parallel()
	tg := single(t)
	seed(t, tg)
	url, stop := startExporter(t, tg)

	fams := scrapeText(t, url)
	get := func(name string, labels map[string]string) float64 {
		t.Helper()
		v, ok := value(fams, name, labels)
		require.True(t, ok, "%s%v missing", name, labels)
		return v
	}
	orders := map[string]string{"queue": "orders"}
	assert.Equal(t, 3.0, get("delaystream_queue_waiting_messages", orders))
	assert.Equal(t, 1.0, get("delaystream_queue_overdue_messages", orders))
	assert.Greater(t, get("delaystream_queue_overdue_seconds", orders), 30.0)
	assert.Equal(t, 0.0, get("delaystream_queue_evicting_servers", orders))
	assert.Equal(t, 1.0, get("delaystream_queue_quarantined_entries", map[string]string{"queue": "jobs"}))
	assert.Equal(t, 3.0, get("delaystream_group_dead_letters", map[string]string{"queue": "jobs", "group": "billing"}))
	assert.Equal(t, 0.0, get("delaystream_group_dead_letters", map[string]string{"queue": "jobs", "group": "audit"}))
	assert.Equal(t, 0.0, get("delaystream_group_pending_messages", map[string]string{"queue": "jobs", "group": "billing"}))
	// The counters Redis keeps of the seeded work.
	jobs := map[string]string{"queue": "jobs"}
	assert.Equal(t, 3.0, get("delaystream_history_promoted_total", jobs))
	assert.Equal(t, 1.0, get("delaystream_history_quarantined_total", jobs))
	assert.Equal(t, 3.0, get("delaystream_history_dead_lettered_total", map[string]string{"queue": "jobs", "group": "billing"}))
	assert.Equal(t, 3.0, get("delaystream_history_handled_total", map[string]string{"queue": "jobs", "group": "audit"}))
	assert.Equal(t, 0.0, get("delaystream_history_handled_total", map[string]string{"queue": "jobs", "group": "billing"}))
	assert.Equal(t, 0.0, get("delaystream_stats_errors_total", orders), "pre-initialised")
	assert.Equal(t, 0.0, get("delaystream_discovery_errors_total", nil))

	// A queue created later is found by the next scrape.
	rdb := redis.NewClient(redistest.Options(t, redistest.Addr(t)))
	defer rdb.Close()
	q, err := delaystream.New(rdb, "fresh", delaystream.WithPrefix(tg.prefix))
	require.NoError(t, err)
	_, err = q.Schedule(context.Background(), delaystream.Message{ID: "x"}, delaystream.After(time.Hour))
	require.NoError(t, err)
	fams = scrapeText(t, url)
	assert.Equal(t, 1.0, get("delaystream_queue_waiting_messages", map[string]string{"queue": "fresh"}))

	res, err := http.Get(url + "/healthz")
	require.NoError(t, err)
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	assert.Equal(t, http.StatusOK, res.StatusCode)
	assert.Equal(t, "ok\n", string(body))
	assert.Equal(t, 0, stop())
}

// seededServer starts a redis-server of the test's own (stopped at its
// end, or before by the test) with the seeded queues.
func seededServer(t *testing.T) (*redistest.Server, target) {
	t.Helper()
	s, err := redistest.Spawn()
	require.NoError(t, err)
	t.Cleanup(s.Stop)
	tg := newTarget(t, s.Addr)
	rdb := redis.NewClient(redistest.Options(t, s.Addr))
	defer rdb.Close()
	seedtest.Seed(t, rdb, tg.prefix)
	return s, tg
}

// /healthz answers 503 once Redis is gone, and /metrics still answers,
// counting the failed discovery.
func TestExporterRedisDown(t *testing.T) {
	t.Parallel()
	s, tg := seededServer(t)
	url, stop := startExporter(t, tg)

	s.Stop()
	res, err := http.Get(url + "/healthz")
	require.NoError(t, err)
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, res.StatusCode)
	assert.True(t, strings.HasPrefix(string(body), "redis unavailable: "), string(body))

	fams := scrapeText(t, url)
	v, ok := value(fams, "delaystream_discovery_errors_total", nil)
	assert.True(t, ok)
	assert.Equal(t, 1.0, v)
	_, ok = value(fams, "delaystream_queue_waiting_messages", nil)
	assert.False(t, ok, "no figures without Redis")
	assert.Equal(t, 0, stop())
}

// A consumer group made on a queue's stream by other means, with a name
// delaystream cannot use, neither drops the queue's figures nor counts as
// a failed read: it is reported with the figures Redis keeps of it. And a
// queue with more recurring schedules than --max-schedule-series reports
// per-queue aggregates, no series per schedule.
func TestExporterForeignGroupAndScheduleBound(t *testing.T) {
	t.Parallel()
	tg := single(t)
	seed(t, tg)
	ctx := context.Background()
	rdb := tg.client(t)
	layout, err := stream.NewLayout(tg.prefix, "jobs", 1)
	require.NoError(t, err)
	require.NoError(t, rdb.XGroupCreateMkStream(ctx, layout.Shard(0).Main().Stream, "bad name", "0").Err())
	orders, err := delaystream.New(rdb, "orders", delaystream.WithPrefix(tg.prefix))
	require.NoError(t, err)
	for _, id := range []string{"a", "b", "c"} {
		_, err := orders.DefineRecurring(ctx, delaystream.Recurring{ID: id, Spec: delaystream.Every(24 * time.Hour)})
		require.NoError(t, err)
	}
	require.NoError(t, orders.PauseRecurring(ctx, "b"))
	url, stop := startExporter(t, tg, "--max-schedule-series", "2")

	fams := scrapeText(t, url)
	get := func(name string, labels map[string]string) float64 {
		t.Helper()
		v, ok := value(fams, name, labels)
		require.True(t, ok, "%s%v missing", name, labels)
		return v
	}
	jobs := map[string]string{"queue": "jobs"}
	assert.Equal(t, 0.0, get("delaystream_stats_errors_total", jobs), "the foreign group failed the queue's read")
	assert.Equal(t, 3.0, get("delaystream_group_dead_letters", map[string]string{"queue": "jobs", "group": "billing"}))
	assert.Equal(t, 0.0, get("delaystream_group_pending_messages", map[string]string{"queue": "jobs", "group": "bad name"}))
	_, ok := value(fams, "delaystream_group_dead_letters", map[string]string{"queue": "jobs", "group": "bad name"})
	assert.True(t, ok, "the foreign group's series, at 0")

	ordersQ := map[string]string{"queue": "orders"}
	assert.Equal(t, 3.0, get("delaystream_queue_recurring_schedules", ordersQ))
	assert.Equal(t, 1.0, get("delaystream_recurring_paused_schedules", ordersQ))
	for _, name := range []string{"delaystream_recurring_paused", "delaystream_recurring_next_occurrence_timestamp_seconds"} {
		_, ok := value(fams, name, ordersQ)
		assert.False(t, ok, "%s: a series per schedule beyond the bound", name)
	}
	assert.Equal(t, 0, stop())
}

// /health runs the checks an alert wants against the seeded queues: the
// queue whose earliest message is overdue past --max-overdue fails it
// (503), the quarantine is a warning, groups without work need no
// consumer; in JSON on request. With Redis gone it fails naming Redis.
func TestExporterHealth(t *testing.T) {
	t.Parallel()
	s, tg := seededServer(t)
	url, stop := startExporter(t, tg, "--max-overdue", "10s")

	get := func(path string) (int, string) {
		t.Helper()
		res, err := http.Get(url + path)
		require.NoError(t, err)
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res.StatusCode, string(body)
	}
	code, body := get("/health")
	assert.Equal(t, http.StatusServiceUnavailable, code, body)
	assert.Regexp(t, `(?m)^fail  queue orders: the earliest waiting message is overdue by \S+ \(over 10s\)`, body)
	assert.Regexp(t, `(?m)^warn  queue jobs: 1 entries in quarantine`, body)
	assert.Regexp(t, `(?m)^ok    group jobs/billing: 0 live consumers; 0 unread, 0 pending, 3 dead letters$`, body)
	assert.Regexp(t, `(?m)^ok    redis `+regexp.QuoteMeta(s.Addr)+`: used `, body)

	code, body = get("/health?format=json")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	var rep health.Report
	require.NoError(t, json.Unmarshal([]byte(body), &rep), body)
	assert.False(t, rep.OK)
	assert.Contains(t, rep.Checks, health.Check{Status: health.Warn, Subject: "queue jobs", Detail: "1 entries in quarantine (waiting members promotion could not read); 0 waiting"})

	s.Stop()
	code, body = get("/health")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Regexp(t, `(?m)^fail  redis: unavailable: `, body)
	assert.Equal(t, 0, stop())
}

// The exporter is guarded as serve is: loopback unless --allow-remote,
// credentials with --basic-auth on every path but /healthz, and requests
// for another host (a page rebound to this address) refused.
func TestExporterGuard(t *testing.T) {
	t.Parallel()
	tg := single(t)
	seed(t, tg)
	r := tg.run(t, "exporter", "--addr", "0.0.0.0:0")
	assert.Equal(t, exitUsage, r.code, r.stderr)
	assert.Contains(t, r.stderr, "not a loopback address")
	assert.Contains(t, r.stderr, "--allow-remote")
	r = tg.run(t, "exporter", "--addr", "127.0.0.1:0", "--basic-auth", "no-colon")
	assert.Equal(t, exitUsage, r.code, r.stderr)

	url, stop := startExporter(t, tg, "--basic-auth", "ops:secret")
	get := func(path, host string, auth bool) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, url+path, nil)
		require.NoError(t, err)
		if host != "" {
			req.Host = host
		}
		if auth {
			req.SetBasicAuth("ops", "secret")
		}
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode
	}
	assert.Equal(t, http.StatusUnauthorized, get("/metrics", "", false))
	assert.Equal(t, http.StatusUnauthorized, get("/health", "", false))
	assert.Equal(t, http.StatusOK, get("/metrics", "", true))
	assert.Equal(t, http.StatusOK, get("/healthz", "", false), "probes need no credentials")
	assert.Equal(t, http.StatusMisdirectedRequest, get("/metrics", "evil.example:9390", true), "a rebound page's request")
	assert.Equal(t, 0, stop())
}
