package delaystream

import (
	"slices"
	"time"

	"github.com/delaystream/delaystream/internal/bridge"
	"github.com/delaystream/delaystream/internal/group"
)

func init() {
	bridge.GroupOf = func(q any, name string) (any, any, bool) {
		dq, ok := q.(*Queue)
		if !ok || dq == nil {
			return nil, nil, false
		}
		dq.mu.Lock()
		defer dq.mu.Unlock()
		for _, g := range dq.groups {
			if g.name == name {
				return g.handler, slices.Clone(g.opts), true
			}
		}
		return nil, nil, false
	}
	bridge.Clock = func(now func() time.Time) any {
		return GroupOption(func(gc *groupConfig) error {
			gc.opts = append(gc.opts, group.WithClock(now))
			return nil
		})
	}
}
