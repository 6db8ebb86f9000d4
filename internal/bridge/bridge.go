package bridge

import "time"

// GroupOf returns the handler (a delaystream.Handler) and the options (a
// []delaystream.GroupOption) given to Handle or HandleTyped for group
// name of queue q (a *delaystream.Queue), and whether q has that group.
var GroupOf func(q any, name string) (h, opts any, ok bool)

// Clock returns a delaystream.GroupOption by which a group judges message
// deadlines with now instead of the host's clock.
var Clock func(now func() time.Time) any
