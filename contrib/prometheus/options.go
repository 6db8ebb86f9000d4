package dsprom

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"
)

// ErrInvalidOption is wrapped by every error an Option, [New] or
// [Metrics.Watch] returns for bad input.
var ErrInvalidOption = errors.New("dsprom: invalid option")

// Option configures [Metrics].
type Option func(*config) error

type config struct {
	namespace       string
	lagBuckets      []float64
	durationBuckets []float64
	statsTimeout    time.Duration
	scheduleSeries  int
}

// Defaults of the options.
const (
	// DefaultNamespace starts every metric name ("delaystream_...").
	DefaultNamespace = "delaystream"
	// DefaultStatsTimeout bounds the Redis reads of one scrape.
	DefaultStatsTimeout = 5 * time.Second
	// DefaultMaxScheduleSeries is how many recurring schedules of a queue
	// get series of their own (see [WithMaxScheduleSeries]).
	DefaultMaxScheduleSeries = 100
)

// LagBuckets are the default buckets, in seconds, of the promotion and
// delivery lag histograms: 1 ms to 5 min, for lateness from a healthy
// mover's milliseconds to a backlog's minutes. Do not modify: give
// [WithLagBuckets] a copy.
var LagBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// DurationBuckets are the default buckets, in seconds, of the handler
// duration histogram: 1 ms to 1 min. Do not modify: give
// [WithDurationBuckets] a copy.
var DurationBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// PromoteBuckets are the buckets, in seconds, of the promote call duration
// histogram: 100 µs to 1 s.
var PromoteBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}

// BatchBuckets are the buckets of the mover batch size histogram (entries
// moved by one promote call, which moves at most 1000).
var BatchBuckets = []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000}

var namespaceRE = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// WithNamespace sets the first part of every metric name. Default
// [DefaultNamespace]. It must be a valid Prometheus name without colons.
// To add constant labels, or register two Metrics side by side, wrap the
// registerer instead (prometheus.WrapRegistererWith).
func WithNamespace(ns string) Option {
	return func(c *config) error {
		if !namespaceRE.MatchString(ns) {
			return fmt.Errorf("%w: namespace %q is not a valid metric name", ErrInvalidOption, ns)
		}
		c.namespace = ns
		return nil
	}
}

// WithLagBuckets sets the buckets, in seconds, of the promotion and
// delivery lag histograms. Default [LagBuckets]. They must be increasing
// and positive; the slice is copied.
func WithLagBuckets(b []float64) Option {
	return func(c *config) error {
		if err := checkBuckets("lag", b); err != nil {
			return err
		}
		c.lagBuckets = slices.Clone(b)
		return nil
	}
}

// WithDurationBuckets sets the buckets, in seconds, of the handler
// duration histogram. Default [DurationBuckets]. They must be increasing
// and positive; the slice is copied.
func WithDurationBuckets(b []float64) Option {
	return func(c *config) error {
		if err := checkBuckets("duration", b); err != nil {
			return err
		}
		c.durationBuckets = slices.Clone(b)
		return nil
	}
}

// WithStatsTimeout bounds the Redis reads of the figures of every watched
// queue and group in one scrape (10 ms to 1 min). Default
// [DefaultStatsTimeout]. Keep it below the scrape timeout. Figures not read
// in time are left out of that scrape and counted in
// delaystream_stats_errors_total.
func WithStatsTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d < 10*time.Millisecond || d > time.Minute {
			return fmt.Errorf("%w: stats timeout must be within 10ms and 1m, got %s", ErrInvalidOption, d)
		}
		c.statsTimeout = d
		return nil
	}
}

// WithMaxScheduleSeries bounds the series of a watched queue's recurring
// schedules: a queue with at most n schedules reports each one's gauges
// (recurring_next_occurrence_timestamp_seconds, ..._last_..., lateness,
// paused: four series per schedule, labelled with its id); a queue with
// more reports none of those, only its per-queue aggregates
// (queue_recurring_schedules, recurring_paused_schedules,
// recurring_max_lateness_seconds), which every queue with schedules
// reports anyway. So the series a scrape returns stay bounded whatever
// the number of schedules (each is still read, within the stats timeout,
// for the aggregates). Default [DefaultMaxScheduleSeries]; 0 reports the
// aggregates only; n must be 0 to 100000.
func WithMaxScheduleSeries(n int) Option {
	return func(c *config) error {
		if n < 0 || n > 100000 {
			return fmt.Errorf("%w: max schedule series must be 0 to 100000, got %d", ErrInvalidOption, n)
		}
		c.scheduleSeries = n
		return nil
	}
}

func checkBuckets(what string, b []float64) error {
	if len(b) == 0 {
		return fmt.Errorf("%w: %s buckets: none given", ErrInvalidOption, what)
	}
	for i, v := range b {
		if !(v > 0) || (i > 0 && v <= b[i-1]) {
			return fmt.Errorf("%w: %s buckets must be positive and increasing, got %v", ErrInvalidOption, what, b)
		}
	}
	return nil
}
