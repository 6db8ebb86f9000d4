package dsprom

import (
	"context"
	"fmt"
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/admin"
)

// WatchAll makes every scrape discover the queues under key prefix (""
// for the default) on rdb, on a single server or every master of a
// Cluster (admin.Inspector.Queues), and report each one's figures as
// [Metrics.Watch] does: queues created later are reported from the scrape
// after their creation, without a restart. Queues named to Watch are read
// once per scrape. Each discovered queue's stats_errors_total series
// exists, at 0, from the scrape that first found it; a failed discovery
// counts in discovery_errors_total. A nil client or an invalid prefix
// return an error wrapping [ErrInvalidOption]; a prefix already watched
// changes nothing.
func (m *Metrics) WatchAll(rdb redis.UniversalClient, prefix string) error {
	if prefix == "" {
		prefix = delaystream.DefaultPrefix
	}
	in, err := admin.New(rdb, prefix)
	if err != nil {
		return fmt.Errorf("%w: watch all: %w", ErrInvalidOption, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !slices.ContainsFunc(m.all, func(w watch) bool { return w.prefix == prefix }) {
		m.all = append(m.all, watch{in: in, prefix: prefix})
	}
	return nil
}

// discovered returns the queues the WatchAll prefixes hold now that are
// not in ws, each counted in stats_errors_total from now on, and whether
// every prefix could be read.
func (m *Metrics) discovered(ctx context.Context, all, ws []watch) ([]watch, bool) {
	var out []watch
	ok := true
	for _, a := range all {
		qs, err := a.in.Queues(ctx)
		if err != nil {
			m.discoveryErrors.Inc()
			ok = false
			continue
		}
		for _, q := range qs {
			known := func(w watch) bool { return w.queue == q.Name }
			if slices.ContainsFunc(ws, known) || slices.ContainsFunc(out, known) {
				continue // watched by name, or found under an earlier prefix
			}
			m.statsErrors.WithLabelValues(q.Name)
			out = append(out, watch{in: a.in, prefix: a.prefix, queue: q.Name})
		}
	}
	return out, ok
}
