package main

import (
	"bytes"
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream/internal/scripts"
)

func TestParseRates(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want []int
		err  bool
	}{
		{in: "50,500,5000", want: []int{50, 500, 5000}},
		{in: " 100 , 2000,", want: []int{100, 2000}},
		{in: "", err: true},
		{in: "50,x", err: true},
		{in: "0", err: true},
		{in: "-5", err: true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parseRates(tc.in)
			if tc.err {
				if err == nil {
					t.Fatalf("parseRates(%q) = %v, want an error", tc.in, got)
				}
				return
			}
			if err != nil || len(got) != len(tc.want) {
				t.Fatalf("parseRates(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("parseRates(%q) = %v, want %v", tc.in, got, tc.want)
				}
			}
		})
	}
}

func TestCrossover(t *testing.T) {
	t.Parallel()
	rates := []int{50, 500, 5000}
	for name, tc := range map[string]struct {
		ratios []float64
		want   string
	}{
		"crosses":        {[]float64{1.2, 1.5, 0.9}, "delaystream becomes cheaper between 500 and 5000 msg/s (1.50 -> 0.90)"},
		"crosses back":   {[]float64{0.8, 1.1, 1.2}, "delaystream becomes dearer between 50 and 500 msg/s (0.80 -> 1.10)"},
		"always dearer":  {[]float64{1.2, 1.5, 1.1}, "no crossover: delaystream is dearer at every rate measured (1.20 at 50 msg/s to 1.10 at 5000 msg/s)"},
		"always cheaper": {[]float64{0.5, 0.6, 0.7}, "no crossover: delaystream is cheaper at every rate measured"},
		"gap skipped":    {[]float64{1.2, math.NaN(), 0.9}, "delaystream becomes cheaper between 50 and 5000 msg/s"},
		"none":           {[]float64{math.NaN(), math.NaN(), math.NaN()}, "not measured"},
	} {
		t.Run(name, func(t *testing.T) {
			if got := crossover("delaystream", rates, tc.ratios); !strings.HasPrefix(got, tc.want) {
				t.Errorf("crossover(%v) = %q, want prefix %q", tc.ratios, got, tc.want)
			}
		})
	}
}

func TestPeaks(t *testing.T) {
	t.Parallel()
	// 1000 B baseline, 100 B per waiting message: the part beyond the
	// waiting set is used - 1000 - 100 × waiting.
	xs := []memSample{
		{used: 101000, xlen: 0, waiting: 1000},  // all waiting: beyond 0
		{used: 91000, xlen: 400, waiting: 500},  // beyond 40000
		{used: 61000, xlen: 600, waiting: 0},    // beyond 60000
		{used: 11000, xlen: 50, waiting: 0},     // trimmed: beyond 10000
		{used: 102000, xlen: 10, waiting: 1000}, // highest used
	}
	p := peaks(xs, 1000, 100)
	if p.used != 102000 || p.xlen != 600 || p.beyond != 60000 || p.samples != 5 {
		t.Errorf("peaks = %+v, want used 102000, xlen 600, beyond 60000, samples 5", p)
	}
	if p := peaks(nil, 1000, 100); p.beyond != 0 || p.samples != 0 {
		t.Errorf("peaks of no samples = %+v, want zeros", p)
	}
}

func TestClassifySlow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"EVALSHA", scripts.Promote.Hash(), "5"}, "promote"},
		{[]string{"evalsha", scripts.ScheduleGenerated.Hash()}, "schedule"},
		{[]string{"EVALSHA", "0123"}, "other script"},
		{[]string{"XREADGROUP", "GROUP"}, "xreadgroup"},
		{nil, "?"},
	} {
		if got := classifySlow(tc.args); got != tc.want {
			t.Errorf("classifySlow(%v) = %q, want %q", tc.args, got, tc.want)
		}
	}
}

func TestScriptOf(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		cmd  redis.Cmder
		want string
	}{
		{redis.NewCmd(ctx, "evalsha", scripts.Promote.Hash(), 5), "promote"},
		// go-redis's fallback sends the source: named by its hash.
		{redis.NewCmd(ctx, "eval", sourceOf(t, scripts.Promote), 5), "promote"},
		{redis.NewCmd(ctx, "evalsha", "feed", 0), ""},
		{redis.NewCmd(ctx, "get", "k"), ""},
	} {
		if got := scriptOf(tc.cmd); got != tc.want {
			t.Errorf("scriptOf(%v) = %q, want %q", tc.cmd.Args(), got, tc.want)
		}
	}
}

// sourceOf returns a script's source, which go-redis sends with EVAL.
func sourceOf(t *testing.T, s *redis.Script) string {
	t.Helper()
	var src string
	s.Eval(context.Background(), scripterFunc(func(_ context.Context, script string, _ []string, _ ...any) *redis.Cmd {
		src = script
		return redis.NewCmd(context.Background())
	}), nil)
	if src == "" {
		t.Fatal("no source")
	}
	return src
}

// scripterFunc is a redis.Scripter whose Eval calls the function.
type scripterFunc func(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd

func (f scripterFunc) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return f(ctx, script, keys, args...)
}
func (f scripterFunc) EvalSha(context.Context, string, []string, ...any) *redis.Cmd { return nil }
func (f scripterFunc) EvalRO(context.Context, string, []string, ...any) *redis.Cmd  { return nil }
func (f scripterFunc) EvalShaRO(context.Context, string, []string, ...any) *redis.Cmd {
	return nil
}
func (f scripterFunc) ScriptExists(context.Context, ...string) *redis.BoolSliceCmd { return nil }
func (f scripterFunc) ScriptLoad(context.Context, string) *redis.StringCmd         { return nil }

func TestScriptTimerRecordsScriptsOnly(t *testing.T) {
	t.Parallel()
	tm := newScriptTimer()
	run := tm.ProcessHook(func(context.Context, redis.Cmder) error { return nil })
	ctx := context.Background()
	for range 3 {
		_ = run(ctx, redis.NewCmd(ctx, "evalsha", scripts.Promote.Hash(), 5))
	}
	_ = run(ctx, redis.NewCmd(ctx, "get", "k"))
	pipe := tm.ProcessPipelineHook(func(context.Context, []redis.Cmder) error { return nil })
	_ = pipe(ctx, []redis.Cmder{redis.NewCmd(ctx, "evalsha", scripts.ScheduleGenerated.Hash(), 1), redis.NewCmd(ctx, "get", "k")})
	if n := len(tm.durations("promote")); n != 3 {
		t.Errorf("promote calls recorded = %d, want 3", n)
	}
	if n := len(tm.durations("schedule")); n != 1 {
		t.Errorf("schedule calls recorded = %d, want 1", n)
	}
	tm.reset()
	if n := len(tm.durations("promote")); n != 0 {
		t.Errorf("after reset: %d promote calls, want 0", n)
	}
	var nilTimer *scriptTimer
	nilTimer.reset()
	if nilTimer.durations("promote") != nil {
		t.Error("a nil timer has durations")
	}
}

func TestDurSummary(t *testing.T) {
	t.Parallel()
	xs := make([]time.Duration, 100)
	for i := range xs {
		xs[i] = time.Duration(i+1) * time.Millisecond
	}
	if got, want := durSummary(xs), "p50 50.00 / p99 99.00 / max 100.00 ms"; got != want {
		t.Errorf("durSummary = %q, want %q", got, want)
	}
	if got := durSummary(nil); got != "none" {
		t.Errorf("durSummary(nil) = %q, want none", got)
	}
}

func TestTrickleProducers(t *testing.T) {
	t.Parallel()
	for rate, want := range map[int]int{1: 1, 50: 1, 500: 1, 1000: 1, 1001: 2, 5000: 5} {
		if got := trickleProducers(rate); got != want {
			t.Errorf("trickleProducers(%d) = %d, want %d", rate, got, want)
		}
	}
}

func TestPrintCurveTable(t *testing.T) {
	t.Parallel()
	r := newResults()
	add := func(sys string, rate int, cpu, p99 float64) {
		r.add("curve", sys, 1, map[string]float64{
			curveKey(rate, "redis_cpu_per_msg"): cpu, curveKey(rate, "cmds_per_msg"): 10,
			curveKey(rate, "redis_sys_per_msg"): cpu / 4, curveKey(rate, "reads_per_msg"): 1.25,
			curveKey(rate, "lat_p50"): 0.001, curveKey(rate, "lat_p99"): p99,
			curveKey(rate, "early_pct"): 0, curveKey(rate, "lost"): 0, curveKey(rate, "dups"): 0,
		})
	}
	add(sysDS, 50, 300e-6, 0.002)
	add(sysAsynq, 50, 150e-6, 0.150)
	add(sysDS, 5000, 90e-6, 0.003)
	add(sysAsynq, 5000, 100e-6, 0.600)
	cfg := config{runs: 1, curveRates: []int{5000, 50}, curveDuration: 10 * time.Second}
	out := curveTableHas(t, r, cfg,
		"50 msg/s    delaystream  300 µs           75.0 µs       10                1.25",
		"            asynq        150 µs",
		"5000 msg/s  delaystream  90.0 µs",
		"2.00", "0.90",
		"delaystream becomes cheaper between 50 and 5000 msg/s (2.00 -> 0.90)",
	)
	// Rates ascending whatever the flag's order (the table's rows).
	if strings.Index(out, "\n50 msg/s ") > strings.Index(out, "\n5000 msg/s ") {
		t.Errorf("rates not ascending:\n%s", out)
	}
	if out := curveTableHas(t, newResults(), cfg); out != "" {
		t.Errorf("curve table without curve results: %q", out)
	}
}

func TestPrintCurveSplit(t *testing.T) {
	t.Parallel()
	r := newResults()
	add := func(sys string, cpu, producer float64) {
		r.add("curve", sys, 1, map[string]float64{
			curveKey(50, "redis_cpu_per_msg"): cpu, curveKey(50, "producer_cpu_per_msg"): producer,
			curveKey(50, "delivery_cpu_per_msg"): cpu - producer, curveKey(50, "idle_cpu_per_msg"): 30e-6,
		})
	}
	add(dsPrecisionName(100*time.Millisecond), 240e-6, 200e-6)
	add(sysAsynq, 220e-6, 150e-6)
	cfg := config{runs: 1, curveRates: []int{50}, curveDuration: 10 * time.Second, curvePrecisions: []time.Duration{100 * time.Millisecond}}
	curveTableHas(t, r, cfg,
		"Where the Redis CPU per message goes (-curve-split)",
		"50 msg/s  delaystream p=100ms  240 µs           200 µs          40.0 µs   1.33                0.57                30.0 µs",
		"          asynq                220 µs           150 µs          70.0 µs                                           30.0 µs",
	)
	// Without producer figures (no -curve-split), no split table.
	r = newResults()
	r.add("curve", sysAsynq, 1, map[string]float64{curveKey(50, "redis_cpu_per_msg"): 220e-6})
	if out := curveTableHas(t, r, cfg); strings.Contains(out, "-curve-split") {
		t.Errorf("split table without producer figures:\n%s", out)
	}
}

// curveTableHas prints the curve table of r, reports each of wants it
// lacks, and returns it.
// With -curve-lead the table says what the delays were and that the
// costs are the steady state's.
func TestPrintCurveTableLead(t *testing.T) {
	t.Parallel()
	r := newResults()
	r.add("curve", sysDS, 1, map[string]float64{curveKey(50, "redis_cpu_per_msg"): 300e-6, curveKey(50, "lat_p99"): 0.099})
	cfg := config{runs: 1, curveRates: []int{50}, curveDuration: 10 * time.Second, curveLead: 2 * time.Minute}
	out := curveTableHas(t, r, cfg, "delays uniform in [2m0s, 2m3s]", "costs over the window in steady state")
	if strings.Contains(out, "[0, 3 s]") {
		t.Errorf("the trickle's own delays named with a lead:\n%s", out)
	}
}

func curveTableHas(t *testing.T, r *results, cfg config, wants ...string) string {
	t.Helper()
	var buf bytes.Buffer
	printCurveTable(&buf, r, cfg)
	out := buf.String()
	for _, want := range wants {
		if !strings.Contains(out, want) {
			t.Errorf("curve table lacks %q:\n%s", want, out)
		}
	}
	return out
}

func TestParseCurveSystems(t *testing.T) {
	t.Parallel()
	known := curveSystemNames(config{curvePrecisions: []time.Duration{100 * time.Millisecond}, floor: true})
	got, err := parseCurveSystems(" delaystream p=100ms, asynq ,", known)
	if err != nil || !slices.Equal(got, []string{"delaystream p=100ms", "asynq"}) {
		t.Errorf("parseCurveSystems = %q, %v", got, err)
	}
	if got, err := parseCurveSystems("", known); got != nil || err != nil {
		t.Errorf("empty: %q, %v; want all (nil)", got, err)
	}
	if _, err := parseCurveSystems("delaystream p=10ms", known); err == nil || !strings.Contains(err.Error(), "delaystream p=10ms") {
		t.Errorf("a precision not in -curve-precisions: err = %v", err)
	}
}

func TestCountOver(t *testing.T) {
	t.Parallel()
	xs := []time.Duration{time.Millisecond, 6 * time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond}
	if got := countOver(xs, 5*time.Millisecond); got != 2 {
		t.Errorf("countOver = %d, want 2 (strictly above)", got)
	}
}

// The canary measures its sleeps until it is stopped. On the fake clock of
// a synctest bubble every 1 ms sleep wakes exactly on time: 20 ms hold 20
// of them (21 when the stop comes just after the 20th woke), each late by
// nothing.
func TestCanaryStops(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		stop := canary(context.Background(), time.Millisecond)
		time.Sleep(20 * time.Millisecond)
		over := stop()
		if len(over) < 20 || len(over) > 21 {
			t.Fatalf("%d sleeps measured in 20 ms, want 20 (or 21)", len(over))
		}
		for i, o := range over {
			if o != 0 {
				t.Errorf("sleep %d overshot by %s on a fake clock", i, o)
			}
		}
		if !slices.IsSorted(over) {
			t.Error("overshoots not sorted")
		}
	})
}

func TestXlenSeries(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1000, 0)
	var xs []memSample
	for i := range 25 { // every 500 ms for 12 s
		xs = append(xs, memSample{at: t0.Add(time.Duration(i) * 500 * time.Millisecond), xlen: int64(1000 * i)})
	}
	before := memSample{at: t0.Add(-time.Second), xlen: 7}
	got := xlenSeries(append([]memSample{before}, xs...), t0, 5*time.Second)
	if want := "+0s 0k, +5s 10k, +10s 20k"; got != want {
		t.Errorf("xlenSeries = %q, want %q", got, want)
	}
}

// A low rate's window grows to hold -curve-min-msgs messages; a high rate
// keeps -curve-duration.
func TestCurveWindow(t *testing.T) {
	c := config{curveDuration: 10 * time.Second, curveMinMsgs: 2000, curveRates: []int{50, 500, 5000}}
	for rate, want := range map[int]time.Duration{50: 40 * time.Second, 500: 10 * time.Second, 5000: 10 * time.Second, 100: 20 * time.Second} {
		if got := c.curveWindow(rate); got != want {
			t.Errorf("curveWindow(%d) = %s, want %s", rate, got, want)
		}
	}
	if got, want := c.curveWindows(), "40s at 50 msg/s, 10s at 500 msg/s, 10s at 5000 msg/s"; got != want {
		t.Errorf("curveWindows() = %q, want %q", got, want)
	}
	c.curveMinMsgs = 0
	if got := c.curveWindow(50); got != 10*time.Second {
		t.Errorf("without a minimum, curveWindow(50) = %s, want 10s", got)
	}
}

func TestNoResendSystem(t *testing.T) {
	t.Parallel()
	names := curveSystemNames(config{curvePrecisions: []time.Duration{100 * time.Millisecond}, curveNoResend: true})
	want := []string{"delaystream", "delaystream no-resend", "delaystream p=100ms", "delaystream p=100ms no-resend", "asynq"}
	if !slices.Equal(names, want) {
		t.Fatalf("curveSystemNames = %q, want %q", names, want)
	}
	for _, name := range []string{"delaystream p=100ms no-resend", "delaystream p=100ms"} {
		sys, err := newSystem(name, "127.0.0.1:1", config{})
		if err != nil {
			t.Fatalf("newSystem(%q): %v", name, err)
		}
		ds := sys.(*dsSystem)
		if ds.Name() != name || ds.precision != 100*time.Millisecond || !isDS(name) {
			t.Errorf("%q: Name %q, precision %v, isDS %v", name, ds.Name(), ds.precision, isDS(name))
		}
		// go-redis keeps MaxRetries -1 as 0 (no resends); its default is 3.
		if got, resends := ds.rdb.Options().MaxRetries, !strings.HasSuffix(name, noResendSuffix); (got > 0) != resends {
			t.Errorf("%q: client MaxRetries %d", name, got)
		}
		sys.Close()
	}
	if _, err := newSystem("asynq no-resend", "127.0.0.1:1", config{}); err == nil {
		t.Error("asynq no-resend: no error")
	}
}

// A system of several queues sends one message to each in turn, and
// refuses the bulk scheduling of the scenarios that run on one queue.
func TestSystemsOfSeveralQueues(t *testing.T) {
	t.Parallel()
	if got := queueNames(1); got != nil {
		t.Errorf("queueNames(1) = %q, want nil (the bench queue)", got)
	}
	want := []string{"bench-0", "bench-1", "bench-2"}
	for _, name := range []string{"delaystream p=100ms", "asynq"} {
		sys, err := newSystem(name, "127.0.0.1:1", config{queues: 3})
		if err != nil {
			t.Fatalf("newSystem(%q): %v", name, err)
		}
		var got []string
		switch s := sys.(type) {
		case *dsSystem:
			got = s.names
			if len(s.qs) != 3 {
				t.Errorf("%q: %d producers, want 3", name, len(s.qs))
			}
		case *asynqSystem:
			got = s.queues
		}
		if !slices.Equal(got, want) {
			t.Errorf("%q: queues %q, want %q", name, got, want)
		}
		if err := sys.ScheduleMany(context.Background(), [][]byte{nil}, []when{{}}); !errors.Is(err, errSeveralQueues) {
			t.Errorf("%q: ScheduleMany: %v, want errSeveralQueues", name, err)
		}
		sys.Close()
	}
	if _, err := newSystem(sysRaw, "127.0.0.1:1", config{queues: 3}); err == nil {
		t.Errorf("%s on several queues: no error", sysRaw)
	}
}
