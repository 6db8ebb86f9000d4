package main

import (
	"context"
	"fmt"
	"time"
)

// steadyOn starts sys and runs the curve's trickle on it at rate msg/s with
// every message due b.cfg.curveLead plus [0, 3 s] after its call, and
// measures a window of dur that opens once the first messages are due:
// from then on the producer schedules and delivery delivers at the same
// pace, as in a queue whose messages wait minutes. Costs are per message
// scheduled in the window (as many as are delivered in it, give or take
// the delays' spread); the lateness is that of the messages delivered by
// the window's end. The producer stops with the window: what it scheduled
// last is never delivered, so no loss is counted.
func (b *bench) steadyOn(ctx context.Context, sys system, sysName string, run, rate int, dur time.Duration) (map[string]float64, error) {
	tag := fmt.Sprintf("%d msg/s", rate)
	warm := b.cfg.curveLead + 3*time.Second
	n := max(1, int(float64(rate)*(warm+dur+time.Second).Seconds()))
	tr := newTracker(n)
	if err := sys.Start(ctx, tr.handler); err != nil {
		return nil, err
	}
	time.Sleep(300 * time.Millisecond)
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	paced := make(chan error, 1)
	go func() {
		_, err := b.paceTrickle(pctx, sys, run, rate, n, b.cfg.curveLead)
		paced <- err
	}()
	select {
	case err := <-paced:
		return nil, fmt.Errorf("producer stopped before the window: %w", err)
	case <-time.After(warm):
	}
	s0, err := takeSnap(ctx, b.admin)
	if err != nil {
		return nil, err
	}
	c0, d0 := clientCPU(), tr.unique.Load()
	time.Sleep(dur)
	c1, d1 := clientCPU(), tr.unique.Load()
	s1, err := takeSnap(ctx, b.admin)
	if err != nil {
		return nil, err
	}
	// The producer's last call may fail as it is cut short (asynq does not
	// wrap context.Canceled): only an error before that counts.
	select {
	case err := <-paced:
		return nil, fmt.Errorf("producer stopped in the window: %v", err)
	default:
	}
	cancel()
	<-paced
	m := max(1, int(float64(rate)*dur.Seconds()))
	if got := int(d1 - d0); got < m*9/10 || got > m*11/10 {
		b.res.note("curve", sysName, fmt.Sprintf("%s: run %d: %d delivered in the window, not the %d scheduled in it: not a steady state", tag, run, got, m))
	}
	sum := tr.summarize()
	d := s0.delta(s1)
	dm := float64(m)
	v := trickleFigures(sum, d, dm, c1-c0)
	b.noteOnce("curve", sysName, run, tag+": commands: "+d.top(16, dm, "per msg"))
	b.noteCPU("curve", sysName, run, tag+": ", d, dm)
	return v, nil
}
