package main

import (
	"slices"
	"testing"
	"time"
)

// The limit scenarios' verdicts rest on these: a window or an overlap
// miscounted would pass a limit that was broken, or fail one that held.

// at returns the times base + ms[i] milliseconds.
func at(ms ...int) []time.Time {
	base := time.Unix(1_700_000_000, 0)
	ts := make([]time.Time, len(ms))
	for i, m := range ms {
		ts[i] = base.Add(time.Duration(m) * time.Millisecond)
	}
	return ts
}

func TestMostIn(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		ts   []time.Time
		w    time.Duration
		want float64
	}{
		"none":                     {nil, time.Second, 0},
		"one":                      {at(5), time.Second, 1},
		"all in one window":        {at(0, 10, 20, 99), 100 * time.Millisecond, 4},
		"window is half-open":      {at(0, 100, 200), 100 * time.Millisecond, 1},
		"the densest window wins":  {at(0, 300, 310, 320, 390, 700), 100 * time.Millisecond, 4},
		"a window spans the burst": {at(0, 50, 120, 130, 140), 100 * time.Millisecond, 4},
		"equal times all count":    {at(7, 7, 7), time.Millisecond, 3},
	} {
		if got := mostIn(tc.ts, tc.w); got != tc.want {
			t.Errorf("%s: mostIn = %v, want %v", name, got, tc.want)
		}
	}
}

func TestExcessOver(t *testing.T) {
	t.Parallel()
	// 10/s for 12 s, evenly (one start every 100 ms), plus a burst of 5
	// extra starts at 3 s.
	var ms []int
	for i := range 120 {
		ms = append(ms, i*100)
	}
	ms = append(ms, 3000, 3001, 3002, 3003, 3004)
	ts := at(ms...)
	sortTimes(ts)
	got := map[time.Duration]float64{}
	most, ok := excessOver(ts, 10, 12*time.Second, func(w time.Duration, e float64) { got[w] = e })
	want := map[time.Duration]float64{100 * time.Millisecond: 6 - 1, time.Second: 15 - 10, 10 * time.Second: 105 - 100}
	for w, e := range want {
		if g, found := got[w]; !found || g != e {
			t.Errorf("excess in %s = %v (reported %v), want %v", w, g, found, e)
		}
	}
	if !ok || most != 5 {
		t.Errorf("largest excess = %v, %v; want 5, true", most, ok)
	}

	// Windows longer than the measurement are not reported.
	got = map[time.Duration]float64{}
	if _, ok := excessOver(ts, 10, 5*time.Second, func(w time.Duration, e float64) { got[w] = e }); !ok {
		t.Error("a 5 s run reported no window")
	}
	if _, found := got[10*time.Second]; found || len(got) != 2 {
		t.Errorf("a 5 s run reported windows %v, want 100ms and 1s only", got)
	}
	if _, ok := excessOver(ts, 10, 50*time.Millisecond, func(time.Duration, float64) { t.Error("a window reported for a 50 ms run") }); ok {
		t.Error("a 50 ms run has a largest excess")
	}

	// Starts at the limit exactly exceed nothing.
	got = map[time.Duration]float64{}
	excessOver(at(ms[:120]...), 10, 12*time.Second, func(w time.Duration, e float64) { got[w] = e })
	for w, e := range got {
		if e != 0 {
			t.Errorf("even starts at the rate: excess in %s = %v, want 0", w, e)
		}
	}
}

func TestMostRunning(t *testing.T) {
	t.Parallel()
	// iv builds sorted starts and ends from [start, end) pairs in ms.
	iv := func(pairs ...[2]int) (starts, ends []time.Time) {
		for _, p := range pairs {
			starts = append(starts, at(p[0])[0])
			ends = append(ends, at(p[1])[0])
		}
		sortTimes(starts)
		sortTimes(ends)
		return starts, ends
	}
	for name, tc := range map[string]struct {
		pairs [][2]int
		want  int
	}{
		"none":                              {nil, 0},
		"one":                               {[][2]int{{0, 20}}, 1},
		"back to back do not overlap":       {[][2]int{{0, 20}, {20, 40}, {40, 60}}, 1},
		"nested":                            {[][2]int{{0, 100}, {10, 20}, {15, 18}, {50, 60}}, 3},
		"staggered":                         {[][2]int{{0, 30}, {10, 40}, {20, 50}, {35, 60}, {45, 70}}, 3},
		"from three processes, interleaved": {[][2]int{{0, 20}, {1, 21}, {2, 22}, {21, 41}, {22, 42}, {23, 43}, {40, 60}}, 4},
	} {
		starts, ends := iv(tc.pairs...)
		if got := mostRunning(starts, ends); got != tc.want {
			t.Errorf("%s: mostRunning = %d, want %d", name, got, tc.want)
		}
	}
	// A handler still running at the end (no end reported) stays open.
	starts, ends := iv([2]int{0, 10})
	starts = append(starts, at(5, 20, 30)...)
	sortTimes(starts)
	if got := mostRunning(starts, ends); got != 3 {
		t.Errorf("open intervals: mostRunning = %d, want 3", got)
	}
}

func sortTimes(ts []time.Time) {
	slices.SortFunc(ts, time.Time.Compare)
}
