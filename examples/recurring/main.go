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
	beatCount = 6 // heartbeats to see before stopping
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
	out = &lockedWriter{w: out} // the replicas' handlers print beside run
	schedules, err := definitions()
	if err != nil {
		return nil, err
	}
	var b beats
	b.enough = make(chan struct{})
	replicas := make([]*replica, 2)
	for i := range replicas {
		if replicas[i], err = newReplica(ctx, rdb, fmt.Sprintf("replica-%d", i+1), schedules, &b, out); err != nil {
			return nil, err
		}
	}
	for _, r := range replicas {
		r.start(ctx)
	}

	// Halfway, replica-1 stops (a deploy, a crash); replica-2 goes on.
	halfway := time.NewTimer(beatCount / 2 * time.Second)
	defer halfway.Stop()
	select {
	case <-halfway.C:
	case <-ctx.Done():
	}
	if err := replicas[0].halt(); err != nil {
		return nil, err
	}
	fmt.Fprintln(out, "replica-1 stopped")
	select {
	case <-b.enough:
	case <-ctx.Done():
		return nil, fmt.Errorf("fewer than %d heartbeats: %w", beatCount, ctx.Err())
	}
	if err := list(ctx, replicas[1].q, out); err != nil {
		return nil, err
	}
	if err := replicas[1].q.DeleteRecurring(ctx, "heartbeat"); err != nil {
		return nil, err
	}
	fmt.Fprintln(out, "heartbeat deleted")
	if err := replicas[1].halt(); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.at, nil
}

// definitions are the two schedules.
func definitions() ([]delaystream.Recurring, error) {
	digest, err := cron.New("0 9 * * MON", "Europe/Berlin")
	if err != nil {
		return nil, err
	}
	return []delaystream.Recurring{
		{ID: "heartbeat", Spec: delaystream.Every(time.Second), Payload: []byte("ping")},
		{ID: "weekly-digest", Spec: digest, Payload: []byte("digest"), Missed: delaystream.FireMissedOnce},
	}, nil
}

// beats records the heartbeats handled, by either replica.
type beats struct {
	mu     sync.Mutex
	at     []string
	enough chan struct{} // closed at beatCount
}

// newReplica builds a replica: its Queue (with the cron kind registered,
// so that any replica can compute the digest's occurrences), the
// schedules defined (kept when another replica defined them first) and
// its group's handler.
func newReplica(ctx context.Context, rdb redis.UniversalClient, name string, schedules []delaystream.Recurring, b *beats, out io.Writer) (*replica, error) {
	q, err := delaystream.New(rdb, queueName, cron.Option(), delaystream.WithDrainTimeout(time.Second))
	if err != nil {
		return nil, err
	}
	for _, s := range schedules {
		outcome, err := q.DefineRecurring(ctx, s)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(out, "%s: defined %s: %s\n", name, s.ID, outcome)
	}
	_, err = q.Handle(groupName, func(_ context.Context, d *delaystream.Delivery) error {
		if d.Headers[delaystream.HeaderSchedule] != "heartbeat" {
			return nil
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		b.at = append(b.at, d.Headers[delaystream.HeaderOccurrence])
		fmt.Fprintf(out, "%s: heartbeat of %s (message %s)\n", name, d.Headers[delaystream.HeaderOccurrence], d.ID)
		if len(b.at) == beatCount {
			close(b.enough)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &replica{name: name, q: q}, nil
}

// start runs the replica's Queue until halt.
func (r *replica) start(ctx context.Context) {
	runCtx, stop := context.WithCancel(ctx)
	r.stop, r.done = stop, make(chan error, 1)
	go func() { r.done <- r.q.Run(runCtx) }()
}

// halt stops the replica and waits for its Run.
func (r *replica) halt() error {
	r.stop()
	return <-r.done
}

// list prints every schedule with its next and last occurrence.
func list(ctx context.Context, q *delaystream.Queue, out io.Writer) error {
	all, err := q.ListRecurring(ctx)
	if err != nil {
		return err
	}
	for _, s := range all {
		late := "unknown"
		if d, ok := s.Lateness(); ok {
			late = d.Round(time.Millisecond).String()
		}
		fmt.Fprintf(out, "%s (%s %s): next %s, last %s, fired late by %s\n", s.ID, s.SpecKind, s.SpecText,
			s.Next.UTC().Format(time.RFC3339), orNone(s.Last), late)
	}
	return nil
}

func orNone(t time.Time) string {
	if t.IsZero() {
		return "none yet"
	}
	return t.UTC().Format(time.RFC3339)
}

// lockedWriter serialises writes to w, which goroutines share.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
