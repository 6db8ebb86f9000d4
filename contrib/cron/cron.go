package cron

import (
	"fmt"
	"strings"
	"time"

	gocron "github.com/netresearch/go-cron"

	"github.com/delaystream/delaystream"
)

// Kind is the spec kind of cron specs.
const Kind = "cron"

var parser = gocron.MustNewParser(gocron.SecondOptional | gocron.Minute | gocron.Hour | gocron.Dom | gocron.Month | gocron.Dow | gocron.Descriptor)

// Spec is a cron expression in an IANA time zone. Build it with [New] or
// [Parse]; it is immutable and safe for concurrent use.
type Spec struct {
	expr, zone string
	sched      gocron.Schedule
}

var _ delaystream.Spec = Spec{}

// New returns the spec of cron expression expr in time zone zone (an IANA
// name such as "Europe/Berlin"; "" or "UTC" for UTC). "Local" is refused:
// processes on different hosts would disagree.
func New(expr, zone string) (Spec, error) {
	expr = strings.Join(strings.Fields(expr), " ")
	switch {
	case zone == "":
		zone = "UTC"
	case zone == "Local":
		return Spec{}, fmt.Errorf("cron: zone %q: name an IANA zone, on which every process agrees", zone)
	}
	if strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ=") {
		return Spec{}, fmt.Errorf("cron: %q: give the zone as New's argument", expr)
	}
	if strings.HasPrefix(expr, "@every") {
		return Spec{}, fmt.Errorf("cron: %q: use delaystream.Every for intervals", expr)
	}
	if _, err := time.LoadLocation(zone); err != nil {
		return Spec{}, fmt.Errorf("cron: zone %q: %w", zone, err)
	}
	s, err := parser.Parse("CRON_TZ=" + zone + " " + expr)
	if err != nil {
		return Spec{}, fmt.Errorf("cron: %q: %w", expr, err)
	}
	return Spec{expr: expr, zone: zone, sched: s}, nil
}

// Parse reads a spec from its text, as [Spec.String] writes it:
// "CRON_TZ=<zone> <expression>".
func Parse(text string) (delaystream.Spec, error) {
	zone, expr, ok := strings.Cut(strings.TrimPrefix(text, "CRON_TZ="), " ")
	if !ok || !strings.HasPrefix(text, "CRON_TZ=") {
		return nil, fmt.Errorf("cron: %q: want CRON_TZ=<zone> <expression>", text)
	}
	return New(expr, zone)
}

// Option registers cron specs with a queue (delaystream.WithSpecParser),
// so that it computes the occurrences of the schedules defined with them.
func Option() delaystream.Option { return delaystream.WithSpecParser(Kind, Parse) }

// Next returns the first occurrence strictly after t; zero when none
// (an expression that never matches within five years).
func (s Spec) Next(t time.Time) time.Time {
	if s.sched == nil {
		return time.Time{}
	}
	return s.sched.Next(t)
}

// Kind returns [Kind].
func (s Spec) Kind() string { return Kind }

// String returns "CRON_TZ=<zone> <expression>".
func (s Spec) String() string { return "CRON_TZ=" + s.zone + " " + s.expr }

// Zone returns the spec's time zone.
func (s Spec) Zone() string { return s.zone }

// Expr returns the spec's expression.
func (s Spec) Expr() string { return s.expr }
