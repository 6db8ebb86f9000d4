package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// The cluster table's columns and ratios come from clusterSpecs: the
// systems must keep their order and names, each name must find its spec
// again, and each ratio must compare deployments with the same movers and
// consumers.

func TestClusterSpecs(t *testing.T) {
	t.Parallel()
	want := []string{"S=1 1+1", "S=16 1+1", "S=1 2+2", "S=16 2+2"}
	got := clusterSystems()
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("clusterSystems() = %q, want %q", got, want)
	}
	for _, name := range want {
		s, err := clusterSpecNamed(name)
		if err != nil {
			t.Fatalf("clusterSpecNamed(%q): %v", name, err)
		}
		if s.name() != name {
			t.Errorf("clusterSpecNamed(%q).name() = %q", name, s.name())
		}
	}
	if s, _ := clusterSpecNamed("S=16 2+2"); s != (clusterSpec{shards: 16, movers: 2, consumers: 2}) {
		t.Errorf("clusterSpecNamed(S=16 2+2) = %+v", s)
	}
	for _, bad := range []string{"S=16", "S=1", "", "S=16 2+2 "} {
		if _, err := clusterSpecNamed(bad); err == nil {
			t.Errorf("clusterSpecNamed(%q): no error", bad)
		}
	}
}

func TestClusterPairs(t *testing.T) {
	t.Parallel()
	ps := clusterPairs()
	var got []string
	for _, p := range ps {
		got = append(got, p.label+" = "+p.num.name()+" / "+p.den.name())
	}
	want := []string{"S=16 / S=1 (1+1) = S=16 1+1 / S=1 1+1", "S=16 / S=1 (2+2) = S=16 2+2 / S=1 2+2"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("clusterPairs() = %q, want %q", got, want)
	}
}

func TestClusterTable(t *testing.T) {
	t.Parallel()
	r := newResults()
	// Redis CPU / msg in seconds: 1+1 pair 100 -> 110 µs (within 20 %),
	// 2+2 pair 100 -> 150 µs (not).
	for name, cpu := range map[string]float64{"S=1 1+1": 100e-6, "S=16 1+1": 110e-6, "S=1 2+2": 100e-6, "S=16 2+2": 150e-6} {
		r.add("cluster", name, 1, map[string]float64{"trickle_redis_cpu_per_msg": cpu, "trickle_lat_p99": 0.004})
	}
	var buf bytes.Buffer
	printClusterTable(&buf, r, config{runs: 1, workers: 8})
	out := buf.String()
	for _, s := range []string{"S=16 / S=1 (1+1)", "S=16 / S=1 (2+2)", "met (S=16 1+1)", "met (S=16 2+2)", "S=1 2+2: unsharded, 2 movers (one lease: the holder promotes, the others stand by) + 2 consumers"} {
		if !strings.Contains(out, s) {
			t.Errorf("table lacks %q:\n%s", s, out)
		}
	}
	buf.Reset()
	r.printJSON(&buf)
	var runLine, metricLine bool
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var x map[string]any
		if err := json.Unmarshal([]byte(l), &x); err != nil {
			t.Fatalf("JSON line %q: %v", l, err)
		}
		if x["system"] != "S=16 2+2" {
			continue
		}
		runLine = runLine || x["type"] == "run"
		metricLine = metricLine || (x["metric"] == "trickle_lat_p99" && x["target"] == "≤ 5.00 ms" && x["met"] == true)
	}
	if !runLine || !metricLine {
		t.Errorf("JSON lacks the run line (%v) or the judged p99 (%v) of S=16 2+2:\n%s", runLine, metricLine, buf.String())
	}
	var row string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "trickle: Redis CPU / msg") {
			row = l
		}
	}
	f := strings.Fields(strings.TrimPrefix(row, "trickle: Redis CPU / msg (sum over masters)"))
	// 4 values of 2 fields ("100 µs"), then ratio, within, ratio, within.
	if len(f) != 12 || f[8] != "1.10" || f[9] != "yes" || f[10] != "1.50" || f[11] != "NO" {
		t.Errorf("Redis CPU row = %q", row)
	}
}
