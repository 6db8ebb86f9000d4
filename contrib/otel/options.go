package dsotel

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// ErrInvalidOption is wrapped by every error an Option, [New] or
// [Telemetry.Watch] returns for bad input.
var ErrInvalidOption = errors.New("dsotel: invalid option")

// Option configures [Telemetry].
type Option func(*config) error

type config struct {
	meters          metric.MeterProvider
	tracers         trace.TracerProvider
	propagator      propagation.TextMapPropagator
	lagBuckets      []float64
	durationBuckets []float64
	statsTimeout    time.Duration
}

// DefaultStatsTimeout bounds the Redis reads of one collection of the
// watched figures.
const DefaultStatsTimeout = 5 * time.Second

// LagBuckets are the default bucket boundaries, in seconds, of the
// promotion and delivery lag histograms: 1 ms to 5 min. Do not modify:
// give [WithLagBuckets] a copy.
var LagBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// DurationBuckets are the default bucket boundaries, in seconds, of the
// handler duration histogram: 1 ms to 1 min. Do not modify: give
// [WithDurationBuckets] a copy.
var DurationBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// PromoteBuckets are the bucket boundaries, in seconds, of the promote
// call duration histogram: 100 µs to 1 s.
var PromoteBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}

// BatchBuckets are the bucket boundaries of the mover batch size histogram.
var BatchBuckets = []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000}

// WithMeterProvider sets where the instruments are created. Default the
// global one (otel.GetMeterProvider) at the time of New.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) error {
		if mp == nil {
			return fmt.Errorf("%w: nil meter provider", ErrInvalidOption)
		}
		c.meters = mp
		return nil
	}
}

// WithTracerProvider sets where the spans are started. Default the global
// one (otel.GetTracerProvider) at the time of New.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) error {
		if tp == nil {
			return fmt.Errorf("%w: nil tracer provider", ErrInvalidOption)
		}
		c.tracers = tp
		return nil
	}
}

// WithPropagator sets how the trace context is written into and read from
// message headers. Default propagation.TraceContext (W3C: the headers
// "traceparent" and "tracestate"), whatever the global propagator is;
// pass otel.GetTextMapPropagator() to use the global one, or a composite
// with propagation.Baggage to carry baggage too. Header keys the
// propagator writes that start with "ds." (reserved by delaystream) are
// not written.
func WithPropagator(p propagation.TextMapPropagator) Option {
	return func(c *config) error {
		if p == nil {
			return fmt.Errorf("%w: nil propagator", ErrInvalidOption)
		}
		c.propagator = p
		return nil
	}
}

// WithLagBuckets sets the bucket boundaries, in seconds, of the promotion
// and delivery lag histograms. Default [LagBuckets]. They must be
// increasing and positive; the slice is copied.
func WithLagBuckets(b []float64) Option {
	return func(c *config) error {
		if err := checkBuckets("lag", b); err != nil {
			return err
		}
		c.lagBuckets = slices.Clone(b)
		return nil
	}
}

// WithDurationBuckets sets the bucket boundaries, in seconds, of the
// handler duration histogram. Default [DurationBuckets]. They must be
// increasing and positive; the slice is copied.
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
// queue and group in one collection (10 ms to 1 min). Default
// [DefaultStatsTimeout]. Figures not read in time are left out of that
// collection and counted in delaystream.stats.errors.
func WithStatsTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d < 10*time.Millisecond || d > time.Minute {
			return fmt.Errorf("%w: stats timeout must be within 10ms and 1m, got %s", ErrInvalidOption, d)
		}
		c.statsTimeout = d
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

func defaults() config {
	return config{
		meters: otel.GetMeterProvider(), tracers: otel.GetTracerProvider(), propagator: propagation.TraceContext{},
		lagBuckets: LagBuckets, durationBuckets: DurationBuckets, statsTimeout: DefaultStatsTimeout,
	}
}
