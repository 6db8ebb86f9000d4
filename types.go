package delaystream

import (
	"time"

	"github.com/delaystream/delaystream/internal/delay"
)

// The producer's types, so that scheduling needs only this package. They
// are the types of package delay, not copies: values pass between the two
// freely.
type (
	// Message is a message to schedule; see delay.Message.
	Message = delay.Message
	// When is a due time; build it with [After] or [At].
	When = delay.When
	// Result is what Schedule reports for one message; see delay.Result.
	Result = delay.Result
	// Item is one message of ScheduleBatch; see delay.Item.
	Item = delay.Item
)

// After returns a due time d after the Redis server runs the schedule
// script (its clock, not this host's); see delay.After.
func After(d time.Duration) When { return delay.After(d) }

// At returns the absolute due time t; see delay.At.
func At(t time.Time) When { return delay.At(t) }
