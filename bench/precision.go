package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// dsPrecisionName is the system name of delaystream at precision p
// (delaystream.WithPrecision); sysDS at 0.
func dsPrecisionName(p time.Duration) string {
	if p == 0 {
		return sysDS
	}
	return fmt.Sprintf("%s p=%s", sysDS, p)
}

// precisionOf returns the precision a system name asks for, and whether it
// names delaystream at a precision above 0.
func precisionOf(name string) (time.Duration, bool, error) {
	name, _ = strings.CutSuffix(name, noResendSuffix)
	s, ok := strings.CutPrefix(name, sysDS+" p=")
	if !ok {
		return 0, false, nil
	}
	p, err := time.ParseDuration(s)
	if err != nil {
		return 0, false, fmt.Errorf("system %q: %w", name, err)
	}
	return p, true, nil
}

// parsePrecisions parses -curve-precisions: durations, comma-separated,
// each 1 ms to 1 s (0 is always run).
func parsePrecisions(s string) ([]time.Duration, error) {
	var out []time.Duration
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		p, err := time.ParseDuration(f)
		if err != nil || p < time.Millisecond || p > time.Second || p%time.Millisecond != 0 {
			return nil, fmt.Errorf("bad precision %q in -curve-precisions %q (whole ms, 1ms to 1s)", f, s)
		}
		out = append(out, p)
	}
	return out, nil
}

// noResendSuffix ends the name of a delaystream system whose client never
// sends a command again (go-redis MaxRetries -1), so that Schedule carries
// no call token: "delaystream p=100ms no-resend".
const noResendSuffix = " no-resend"

// curveSystemNames lists the curve's systems in the order they run and
// print: delaystream at 0 and at each precision (each followed by its
// no-resend twin with -curve-no-resend), asynq, rt-floor and script-floor.
func curveSystemNames(cfg config) []string {
	var out []string
	for _, p := range append([]time.Duration{0}, cfg.curvePrecisions...) {
		out = append(out, dsPrecisionName(p))
		if cfg.curveNoResend {
			out = append(out, dsPrecisionName(p)+noResendSuffix)
		}
	}
	out = append(out, sysAsynq)
	if cfg.floor {
		out = append(out, sysFloor, sysScriptFloor)
	}
	return out
}

// parseCurveSystems parses -curve-systems: system names, comma-separated,
// each one of known (the curve's systems under the other flags); nil for
// "" (all of them).
func parseCurveSystems(s string, known []string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !slices.Contains(known, f) {
			return nil, fmt.Errorf("unknown system %q in -curve-systems (the curve runs %s)", f, strings.Join(known, ", "))
		}
		out = append(out, f)
	}
	return out, nil
}
