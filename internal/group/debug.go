package group

import (
	"fmt"
	"strings"
)

// DebugIntake describes the consumer's intake as it is now, for a test's
// failure report: the entries it holds (by batch: stream, entries left,
// and per entry whether it is settled or handed back), what its reader
// counts as held, waiting and reading, the workers' queue, and its flow
// limiter's accounts. Not for programs: the text has no fixed form.
func (c *Consumer) DebugIntake() string {
	var b strings.Builder
	c.held.mu.Lock()
	fmt.Fprintf(&b, "held batches: %d\n", len(c.held.batches))
	for bt := range c.held.batches {
		fmt.Fprintf(&b, "  batch %s: %d of %d left:", bt.stream, bt.left.Load(), len(bt.flights))
		for i := range bt.flights {
			f := &bt.flights[i]
			fmt.Fprintf(&b, " %s(settled=%t handedBack=%t deliveries=%d)", f.x.ID, f.settled.Load(), f.handedBack.Load(), f.deliveries)
		}
		b.WriteString("\n")
	}
	c.held.mu.Unlock()
	rd := c.intake.Load()
	if rd == nil {
		b.WriteString("not running\n")
		return b.String()
	}
	fmt.Fprintf(&b, "reader: held %d, waiting %d, reading %d, jobs queued %d, capacity %d, paused %t\n",
		rd.held.Load(), rd.waiting.Load(), rd.reading.Load(), len(rd.jobs), rd.capacity(), rd.r.pause.paused())
	if l := rd.lim; l != nil {
		l.mu.Lock()
		fmt.Fprintf(&b, "limiter: outstanding %d, back %d, reported %d, reclaimed %d, recorded %d, slotWait %t, rcWait %t\n",
			l.outstanding, l.back, l.reported, l.reclaimed, l.recorded, l.slotWait.Load(), l.rcWait.Load())
		l.mu.Unlock()
	}
	return b.String()
}
