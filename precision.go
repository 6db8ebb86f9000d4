package delaystream

import (
	"time"

	"github.com/delaystream/delaystream/internal/engine"
	"github.com/delaystream/delaystream/internal/mover"
)

// MaxPrecision is the coarsest precision [WithPrecision] takes.
const MaxPrecision = time.Second

// WithPrecision lets promotion be up to about d late, to gather the
// messages due within d into one promote call (0 to [MaxPrecision], whole
// milliseconds; anything else is refused with [ErrInvalidOption]).
// Default 0: every due time is promoted on its own, within milliseconds.
//
// Due times fall in buckets d wide on the Redis clock, aligned to
// multiples of d since the Unix epoch, so every process and shard shares
// them; a bucket is promoted once its end is reached. A message is
// therefore never delivered before its due time, at any precision, and at
// most about d after it. The messages of one bucket cost one promote
// call, one announcement and one read per group, which is what makes a
// coarser precision cheaper in Redis CPU per message at low rates (see
// docs/performance.md); a consumer's acknowledgements wait up to 2d
// (at most a quarter of the visibility timeout, and 16 at a time) to ride
// with the next bucket's read. It applies to the queue's promotion and to
// every group's retries. Processes of one queue may use different precisions;
// each promotes by its own.
func WithPrecision(d time.Duration) Option {
	return func(c *config) error {
		if err := engine.CheckPrecision(d); err != nil {
			return err
		}
		c.prec = d
		c.mover = append(c.mover, mover.WithPrecision(d))
		return nil
	}
}
