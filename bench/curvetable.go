package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// curveCols are the curve table's columns after rate and system: the
// trickle metric shown and how it is aggregated over runs.
var curveCols = []struct {
	head string
	key  string
	m    metricDef
}{
	{"Redis CPU / msg", "redis_cpu_per_msg", metricDef{unit: "µs", scale: 1e6}},
	{"of it kernel", "redis_sys_per_msg", metricDef{unit: "µs", scale: 1e6}},
	{"Redis cmds / msg", "cmds_per_msg", metricDef{scale: 1}},
	{"read events / msg", "reads_per_msg", metricDef{scale: 1}},
	{"lateness p50", "lat_p50", metricDef{unit: "ms", scale: 1e3}},
	{"lateness p99", "lat_p99", metricDef{unit: "ms", scale: 1e3}},
	{"% early (worst)", "early_pct", metricDef{unit: "%", scale: 1, agg: "max"}},
	{"client CPU / msg", "client_cpu_per_msg", metricDef{unit: "µs", scale: 1e6}},
}

// hasRatio reports whether the curve table shows sys's Redis CPU per
// message over asynq's: delaystream's systems and script-floor.
func hasRatio(sys string) bool { return isDS(sys) || sys == sysScriptFloor }

// curveValue returns the aggregate of one curve figure, NaN when absent.
func (r *results) curveValue(sys string, rate int, key, agg string) float64 {
	v, _ := r.value(metricDef{scenario: "curve", key: curveKey(rate, key), agg: agg}, sys)
	return v
}

// curveSystems returns the systems that have curve values, delaystream
// first (at each precision), rt-floor last.
func (r *results) curveSystems(cfg config) []string {
	var out []string
	for _, s := range curveSystemNames(config{curvePrecisions: cfg.curvePrecisions, curveNoResend: cfg.curveNoResend, floor: true}) {
		if r.vals["curve"][s] != nil {
			out = append(out, s)
		}
	}
	return out
}

// printCurveTable prints the curve scenario as one table, rate x system,
// and where delaystream's Redis CPU per message crosses asynq's.
func printCurveTable(w io.Writer, r *results, cfg config) {
	systems := r.curveSystems(cfg)
	if len(systems) == 0 {
		return
	}
	rates := slices.Clone(cfg.curveRates)
	slices.Sort(rates)
	both := slices.Contains(systems, sysDS) && slices.Contains(systems, sysAsynq)
	delays, costs := "delays uniform in [0, 3 s]", "costs over the whole run (schedule + delivery + idle), per message"
	if cfg.curveLead > 0 {
		delays = fmt.Sprintf("delays uniform in [%s, %s]", cfg.curveLead, cfg.curveLead+3*time.Second)
		costs = "costs over the window in steady state (schedule + delivery + idle), per message scheduled in it"
	}
	fmt.Fprintf(w, "\nTrickle curve (delaystream at the default precision 0, and \"p=\" at WithPrecision(p)): at each rate, Schedule one call at a time (one producer goroutine per 1000 msg/s) for %s, %s; %s; medians of %d runs (%% early, lost, duplicates: worst run). Systems alternate within each rate.\n\n",
		cfg.curveWindows(), delays, costs, cfg.runs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	hdr := []string{"rate", "system"}
	for _, c := range curveCols {
		hdr = append(hdr, c.head)
	}
	hdr = append(hdr, "lost / dups (worst)")
	if both {
		hdr = append(hdr, "Redis CPU / asynq's")
	}
	fmt.Fprintln(tw, strings.Join(hdr, "\t"))
	ratios := map[string][]float64{} // by system with a ratio (hasRatio), one per rate
	for _, sys := range systems {
		if hasRatio(sys) {
			ratios[sys] = make([]float64, len(rates))
			for i := range rates {
				ratios[sys][i] = math.NaN()
			}
		}
	}
	for i, rate := range rates {
		for j, sys := range systems {
			row := []string{"", sys}
			if j == 0 {
				row[0] = fmt.Sprintf("%d msg/s", rate)
			}
			for _, c := range curveCols {
				row = append(row, fmtVal(r.curveValue(sys, rate, c.key, c.m.agg), c.m))
			}
			lost, dups := r.curveValue(sys, rate, "lost", "max"), r.curveValue(sys, rate, "dups", "max")
			row = append(row, fmtVal(lost, metricDef{scale: 1})+" / "+fmtVal(dups, metricDef{scale: 1}))
			if both {
				cell := ""
				if hasRatio(sys) {
					ds := r.curveValue(sys, rate, "redis_cpu_per_msg", "")
					as := r.curveValue(sysAsynq, rate, "redis_cpu_per_msg", "")
					if as > 0 && !math.IsNaN(ds) {
						ratios[sys][i] = ds / as
						cell = fmt.Sprintf("%.2f", ratios[sys][i])
					}
				}
				row = append(row, cell)
			}
			fmt.Fprintln(tw, strings.Join(row, "\t"))
		}
	}
	tw.Flush()
	if both {
		fmt.Fprintln(w)
		for _, sys := range systems {
			if isDS(sys) {
				fmt.Fprintf(w, "Redis CPU per message, %s / asynq (< 1: delaystream cheaper): %s.\n", sys, crossover("delaystream", rates, ratios[sys]))
			}
		}
		if ratios[sysScriptFloor] != nil {
			fmt.Fprintf(w, "Redis CPU per message, %s / asynq (the room a design has under one script per transition by the Redis clock; < 1: below asynq): %s.\n",
				sysScriptFloor, crossover(sysScriptFloor, rates, ratios[sysScriptFloor]))
		}
	}
	printCurveSplit(w, r, systems, rates)
	printNotes(w, r, func(sc string) bool { return sc == "curve" })
}

// printCurveSplit prints, when the curve ran with -curve-split, each
// system's Redis CPU per message split into its producer's (measured
// alone) and the rest (delivery: promotion or polling, reads,
// acknowledgements, leases, wake-ups), beside asynq's, and the server's
// own share (idle, nothing connected).
func printCurveSplit(w io.Writer, r *results, systems []string, rates []int) {
	split := false
	for _, sys := range systems {
		for _, rate := range rates {
			split = split || !math.IsNaN(r.curveValue(sys, rate, "producer_cpu_per_msg", ""))
		}
	}
	if !split {
		return
	}
	fmt.Fprintf(w, "\nWhere the Redis CPU per message goes (-curve-split): \"producer alone\" is the same producer at the same pace on a fresh server with nothing promoting or consuming, over the same window; \"delivery\" is the curve run's figure less that one, run by run; \"server idle\" is the empty server over such a window, per message, and is inside every other figure. Medians of runs.\n\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "rate\tsystem\tRedis CPU / msg\tproducer alone\tdelivery\tproducer / asynq's\tdelivery / asynq's\tserver idle")
	us := metricDef{unit: "µs", scale: 1e6}
	ratio := func(sys string, rate int, key string) string {
		a, b := r.curveValue(sys, rate, key, ""), r.curveValue(sysAsynq, rate, key, "")
		if sys == sysAsynq || math.IsNaN(a) || !(b > 0) {
			return ""
		}
		return fmt.Sprintf("%.2f", a/b)
	}
	for _, rate := range rates {
		first := true
		for _, sys := range systems {
			p := r.curveValue(sys, rate, "producer_cpu_per_msg", "")
			if math.IsNaN(p) {
				continue
			}
			head := ""
			if first {
				head = fmt.Sprintf("%d msg/s", rate)
			}
			first = false
			fmt.Fprintln(tw, strings.Join([]string{head, sys,
				fmtVal(r.curveValue(sys, rate, "redis_cpu_per_msg", ""), us), fmtVal(p, us),
				fmtVal(r.curveValue(sys, rate, "delivery_cpu_per_msg", ""), us),
				ratio(sys, rate, "producer_cpu_per_msg"), ratio(sys, rate, "delivery_cpu_per_msg"),
				fmtVal(r.curveValue(sys, rate, "idle_cpu_per_msg", ""), us)}, "\t"))
		}
	}
	tw.Flush()
}

// crossover describes where the ratio (who / asynq, one per rate, rates
// ascending; NaN = not measured) crosses 1.
func crossover(who string, rates []int, ratios []float64) string {
	var rs []int
	var xs []float64
	for i, x := range ratios {
		if !math.IsNaN(x) {
			rs, xs = append(rs, rates[i]), append(xs, x)
		}
	}
	if len(xs) == 0 {
		return "not measured"
	}
	var cross []string
	for i := 1; i < len(xs); i++ {
		if (xs[i-1] > 1) != (xs[i] > 1) {
			dir := who + " becomes cheaper"
			if xs[i] > 1 {
				dir = who + " becomes dearer"
			}
			cross = append(cross, fmt.Sprintf("%s between %d and %d msg/s (%.2f -> %.2f)", dir, rs[i-1], rs[i], xs[i-1], xs[i]))
		}
	}
	if len(cross) > 0 {
		return strings.Join(cross, "; ")
	}
	how := "dearer"
	if xs[0] <= 1 {
		how = "cheaper"
	}
	return fmt.Sprintf("no crossover: %s is %s at every rate measured (%.2f at %d msg/s to %.2f at %d msg/s)", who, how, xs[0], rs[0], xs[len(xs)-1], rs[len(rs)-1])
}

// printCurveJSON prints one JSON line per rate, system and curve figure.
func printCurveJSON(w io.Writer, r *results, cfg config) {
	enc := json.NewEncoder(w)
	for _, sys := range r.curveSystems(cfg) {
		for _, rate := range cfg.curveRates {
			for _, k := range curveKeys {
				agg := ""
				if k == "early_pct" || k == "lost" || k == "dups" {
					agg = "max"
				}
				v, runs := r.value(metricDef{scenario: "curve", key: curveKey(rate, k), agg: agg}, sys)
				if runs == nil {
					continue
				}
				rs := make([]any, len(runs))
				for i, x := range runs {
					rs[i] = jsonNum(x)
				}
				_ = enc.Encode(map[string]any{"type": "curve", "scenario": "curve", "system": sys, "rate": rate,
					"metric": k, "agg": aggName(metricDef{agg: agg}), "value": jsonNum(v), "runs": rs})
			}
		}
	}
}

// isDS reports whether sys is delaystream (at any precision).
func isDS(sys string) bool {
	sys, _ = strings.CutSuffix(sys, noResendSuffix)
	return sys == sysDS || strings.HasPrefix(sys, sysDS+" p=")
}
