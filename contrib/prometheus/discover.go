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
// Cluster (admin.Operator.Queues), and report each one's figures as
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
// every prefix could be read. A prefix that cannot be read gives the
// queues of its last discovery, so that their series stay.
func (m *Metrics) discovered(ctx context.Context, all, ws []watch) ([]watch, bool) {
	var out []watch
	ok := true
	for _, a := range all {
		found := m.discover(ctx, a)
		if found == nil {
			m.discoveryErrors.Inc()
			ok = false
			found = m.kept.lastDiscovered(a.prefix)
		} else {
			m.kept.discovered(a.prefix, found)
		}
		for _, w := range found {
			known := func(x watch) bool { return x.queue == w.queue }
			if slices.ContainsFunc(ws, known) || slices.ContainsFunc(out, known) {
				continue // watched by name, or found under an earlier prefix
			}
			m.statsErrors.WithLabelValues(w.queue)
			out = append(out, w)
		}
	}
	return out, ok
}

// discover returns the queues under a's prefix (non-nil), nil when they
// cannot be read.
func (m *Metrics) discover(ctx context.Context, a watch) []watch {
	qs, err := a.in.Queues(ctx)
	if err != nil {
		return nil
	}
	found := make([]watch, 0, len(qs))
	for _, q := range qs {
		found = append(found, watch{in: a.in, prefix: a.prefix, queue: q.Name})
	}
	return found
}
