// Command recurring defines two recurring schedules, a heartbeat every
// second and a weekly digest on Mondays at 09:00 Berlin time (a cron
// spec, from contrib/cron), and serves them with two processes (two
// Queues of the same queue, as two replicas of a service would be). Both
// define the schedules at start: the first creates them, the second finds
// them kept. Halfway through, one replica stops: the heartbeat goes on,
// each occurrence handled once, with no leader to elect. At the end it
// lists the schedules (next and last occurrence, how late the last one
// fired) and deletes the heartbeat.
//
//	go run ./examples/recurring                                    # embedded miniredis
//	REDIS_URL=redis://localhost:6379/0 go run ./examples/recurring # a real Redis
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/contrib/cron"
	"github.com/delaystream/delaystream/examples/internal/exampleredis"
)

const (
	queueName = "recurring"
	groupName = "worker"
	beats     = 6 // heartbeats to see before stopping
)

func main() {
	if err := start(); err != nil {
		fmt.Fprintln(os.Stderr, "recurring:", err)
		os.Exit(1)
	}
}

func start() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rdb, closeRedis, err := exampleredis.Connect()
	if err != nil {
		return err
	}
	defer closeRedis()
	_, err = run(ctx, rdb, os.Stdout)
	return err
}

// replica is one process serving the queue.
type replica struct {
	name string
	q    *delaystream.Queue
	stop context.CancelFunc
	done chan error
}

// run serves the schedules with two replicas until beats heartbeats were
// handled, and returns the heartbeat occurrences handled (their times, in
// order; each once).
func run(ctx context.Context, rdb redis.UniversalClient, out io.Writer) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	digest, err := cron.New("0 9 * * MON", "Europe/Berlin")
	if err != nil {
		return nil, err
	}
	schedules := []delaystream.Recurring{
		{ID: "heartbeat", Spec: delaystream.Every(time.Second), Payload: []byte("ping")},
		{ID: "weekly-digest", Spec: digest, Payload: []byte("digest"), Missed: delaystream.FireMissedOnce},
	}

	var (
		mu     sync.Mutex
		beatAt []string
		enough = make(chan struct{})
	)
	replicas := make([]*replica, 2)
	for i := range replicas {
		r := &replica{name: fmt.Sprintf("replica-%d", i+1)}
		// Every process that serves the queue registers the cron kind,
		// so that any of them can compute the digest's occurrences.
		if r.q, err = delaystream.New(rdb, queueName, cron.Option(), delaystream.WithDrainTimeout(time.Second)); err != nil {
			return nil, err
		}
		for _, s := range schedules {
			outcome, err := r.q.DefineRecurring(ctx, s)
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(out, "%s: defined %s: %s\n", r.name, s.ID, outcome)
		}
		_, err := r.q.Handle(groupName, func(_ context.Context, d *delaystream.Delivery) error {
			if d.Headers[delaystream.HeaderSchedule] != "heartbeat" {
				return nil
			}
			mu.Lock()
			defer mu.Unlock()
			beatAt = append(beatAt, d.Headers[delaystream.HeaderOccurrence])
			fmt.Fprintf(out, "%s: heartbeat of %s (message %s)\n", r.name, d.Headers[delaystream.HeaderOccurrence], d.ID)
			if len(beatAt) == beats {
				close(enough)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		replicas[i] = r
	}
	for _, r := range replicas {
		runCtx, stop := context.WithCancel(ctx)
		r.stop, r.done = stop, make(chan error, 1)
		go func() { r.done <- r.q.Run(runCtx) }()
	}

	// Halfway, replica-1 stops (a deploy, a crash); replica-2 goes on.
	halfway := time.NewTimer(beats / 2 * time.Second)
	defer halfway.Stop()
	select {
	case <-halfway.C:
	case <-ctx.Done():
	}
	replicas[0].stop()
	if err := <-replicas[0].done; err != nil {
		return nil, err
	}
	fmt.Fprintln(out, "replica-1 stopped")
	select {
	case <-enough:
	case <-ctx.Done():
		return nil, fmt.Errorf("fewer than %d heartbeats: %w", beats, ctx.Err())
	}

	list, err := replicas[1].q.ListRecurring(ctx)
	if err != nil {
		return nil, err
	}
	for _, s := range list {
		late := "unknown"
		if d, ok := s.Lateness(); ok {
			late = d.Round(time.Millisecond).String()
		}
		fmt.Fprintf(out, "%s (%s %s): next %s, last %s, fired late by %s\n", s.ID, s.SpecKind, s.SpecText,
			s.Next.UTC().Format(time.RFC3339), orNone(s.Last), late)
	}
	if err := replicas[1].q.DeleteRecurring(ctx, "heartbeat"); err != nil {
		return nil, err
	}
	fmt.Fprintln(out, "heartbeat deleted")
	replicas[1].stop()
	if err := <-replicas[1].done; err != nil {
		return nil, err
	}
	mu.Lock()
	defer mu.Unlock()
	return beatAt, nil
}

func orNone(t time.Time) string {
	if t.IsZero() {
		return "none yet"
	}
	return t.UTC().Format(time.RFC3339)
}
