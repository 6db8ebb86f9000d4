package main

import (
	"context"
	"encoding/binary"
	"math"
	"testing"
	"time"
)

// The figures the benchmark publishes rest on these helpers: a wrong
// quantile, median, target check or duplicate count would misreport.

func TestPct(t *testing.T) {
	t.Parallel()
	xs := []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, tc := range []struct {
		p    float64
		want int64
	}{{0, 1}, {0.5, 5}, {0.9, 9}, {0.99, 10}, {1, 10}} {
		if got := pct(xs, tc.p); got != tc.want {
			t.Errorf("pct(1..10, %v) = %d, want %d (nearest rank)", tc.p, got, tc.want)
		}
	}
}

func TestMedian(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		in   []float64
		want float64
	}{
		"odd":       {[]float64{3, 1, 2}, 2},
		"even":      {[]float64{4, 1, 3, 2}, 2.5},
		"skips NaN": {[]float64{math.NaN(), 5, 1, 3}, 3},
	} {
		if got := median(tc.in); got != tc.want {
			t.Errorf("%s: median(%v) = %v, want %v", name, tc.in, got, tc.want)
		}
	}
	if got := median([]float64{math.NaN()}); !math.IsNaN(got) {
		t.Errorf("median of no values = %v, want NaN", got)
	}
}

func TestTargetCheck(t *testing.T) {
	t.Parallel()
	lateP99 := metricDef{unit: "ms", scale: 1e3, op: "<=", target: 5}
	rate := metricDef{unit: "msg/s", scale: 1, op: ">=", target: 100000}
	early := metricDef{scale: 1, op: "==", target: 0}
	for _, tc := range []struct {
		m    metricDef
		raw  float64
		want string
	}{
		{lateP99, 0.0049, "yes"}, {lateP99, 0.0051, "NO"},
		{rate, 100000, "yes"}, {rate, 99999, "NO"},
		{early, 0, "yes"}, {early, 1, "NO"},
		{rate, math.NaN(), ""}, {metricDef{scale: 1}, 3, ""},
	} {
		if got := tc.m.met(tc.raw); got != tc.want {
			t.Errorf("met(%v) with %s %v = %q, want %q", tc.raw, tc.m.op, tc.m.target, got, tc.want)
		}
	}
	lower := metricDef{better: -1}
	if got := lower.ratio(2, 10); got != "5.0x" {
		t.Errorf("ratio for lower-is-better 2 vs 10 = %q, want 5.0x", got)
	}
}

func TestTrackerCountsLostDuplicatesAndEarly(t *testing.T) {
	t.Parallel()
	tr := newTracker(4)
	payload := func(seq int) []byte {
		p := make([]byte, 16)
		binary.BigEndian.PutUint64(p, uint64(seq))
		return p
	}
	now := time.Now()
	deliver := func(seq int, due time.Time) {
		if err := tr.handler(context.Background(), delivery{payload: payload(seq), due: due}); err != nil {
			t.Fatal(err)
		}
	}
	deliver(0, now.Add(-time.Millisecond))
	deliver(0, now.Add(-time.Millisecond)) // duplicate
	deliver(1, now.Add(time.Hour))         // received before its due time
	deliver(2, now.Add(-time.Millisecond))
	deliver(9, now) // not one of ours
	s := tr.summarize()
	if s.delivered != 3 || s.lost != 1 || s.dups != 1 || s.stray != 1 || s.early != 1 {
		t.Errorf("summary = delivered %d lost %d dups %d stray %d early %d, want 3 1 1 1 1",
			s.delivered, s.lost, s.dups, s.stray, s.early)
	}
	if tr.wait(10 * time.Millisecond) {
		t.Error("wait reported complete with a message missing")
	}
	deliver(3, now)
	if !tr.wait(time.Second) {
		t.Error("wait did not report complete after the last message")
	}
}
