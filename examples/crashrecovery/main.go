// Command crashrecovery shows at-least-once delivery surviving a crash. A
// worker process takes a job and is killed with SIGKILL before it finishes,
// so the job stays pending in the consumer group, held by a dead consumer.
// Once it has been idle for the visibility timeout, another consumer of the
// group reclaims it (XAUTOCLAIM) and finishes it.
//
// Both workers run the same delaystream.Queue, as replicas of a worker
// service would: its mover and one member of the group "workers". worker-1
// is this same program, started again as a child process with
// CRASHRECOVERY_WORKER=1 in its environment (os/exec: the front door does
// not manage processes); its mover promotes the job and its consumer takes
// it. This process schedules the job and runs worker-2 only after the
// crash: a Queue's groups are fixed once it runs, and a worker-2 running
// from the start would compete with worker-1 for the job.
//
// It needs a real Redis (>= 7.0): the point is Redis's own bookkeeping of
// pending entries (idle times, delivery counts, XAUTOCLAIM) across two
// processes. It uses REDIS_URL, or else starts a throwaway redis-server
// found on PATH.
//
//	go run ./examples/crashrecovery                                    # redis-server on PATH
//	REDIS_URL=redis://localhost:6379/0 go run ./examples/crashrecovery # a running Redis
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream"
)

const (
	queueName  = "jobs"
	groupName  = "workers"
	jobID      = "job:42"
	visibility = 2 * time.Second  // idle time after which another consumer may reclaim an entry
	timeout    = 15 * time.Second // give up if the job has not been recovered by then

	workerEnv = "CRASHRECOVERY_WORKER" // set in the child process that gets killed
	tookLine  = "took "                // what the child prints once it holds the job
)

// errNoRedis names what to install.
var errNoRedis = errors.New("no Redis: set REDIS_URL=redis://host:6379/0, " +
	"or install redis-server >= 7.0 (apt-get install redis-server, brew install redis)")

func main() {
	run := start
	if os.Getenv(workerEnv) != "" {
		run = crashingWorker
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "crashrecovery:", err)
		os.Exit(1)
	}
}

func start() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	rdb, closeRedis, err := connect(ctx)
	if err != nil {
		return err
	}
	defer closeRedis()
	return run(ctx, rdb, os.Stdout)
}

// connect returns a client for REDIS_URL or, when it is unset, for a
// throwaway redis-server started on a free port. The returned func closes
// the client and stops the server.
func connect(ctx context.Context) (*redis.Client, func(), error) {
	if u := os.Getenv("REDIS_URL"); u != "" {
		opt, err := redis.ParseURL(u)
		if err != nil {
			return nil, nil, fmt.Errorf("REDIS_URL: %w", err)
		}
		rdb := redis.NewClient(opt)
		return rdb, func() { _ = rdb.Close() }, nil
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, nil, errNoRedis
	}
	l, err := net.Listen("tcp", "127.0.0.1:0") // find a free port
	if err != nil {
		return nil, nil, err
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	_ = l.Close()
	srv := exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := srv.Start(); err != nil {
		return nil, nil, fmt.Errorf("start %s: %w", bin, err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + port})
	stop := func() { _ = rdb.Close(); _ = srv.Process.Kill(); _ = srv.Wait() }
	for deadline := time.Now().Add(5 * time.Second); rdb.Ping(ctx).Err() != nil; {
		if time.Now().After(deadline) || ctx.Err() != nil {
			stop()
			return nil, nil, fmt.Errorf("%s on port %s did not answer", bin, port)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return rdb, stop, nil
}

// run schedules a job, has worker-1 in a child process take it and kills
// the child, then runs worker-2 until it has reclaimed and finished the job.
func run(ctx context.Context, rdb *redis.Client, out io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	// This process schedules the job and, after the crash, runs worker-2,
	// whose handler stops the queue once it has finished the job.
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var crashed time.Time // set before worker-2 runs
	q, err := newQueue(rdb, "worker-2", func(ctx context.Context, d *delaystream.Delivery) error {
		fmt.Fprintf(out, "worker-2: reclaimed %s %.1fs after the crash (delivery %d, attempt %d); finished %q\n",
			d.ID, time.Since(crashed).Seconds(), d.Deliveries, d.Attempt, d.Payload)
		stop()
		return nil
	})
	if err != nil {
		return err
	}
	if _, err := q.Schedule(ctx, delaystream.Message{ID: jobID, Payload: []byte("resize image 42")}, delaystream.After(0)); err != nil {
		return err
	}
	fmt.Fprintf(out, "scheduled %s\n", jobID)

	if err := crash(ctx, rdb, out); err != nil {
		return err
	}
	crashed = time.Now()
	fmt.Fprintf(out, "killed worker-1 with SIGKILL: %s stays pending with a dead consumer\n", jobID)

	// Only now does this process join the group, as worker-2.
	fmt.Fprintf(out, "worker-2: started; reclaims entries idle for %s\n", visibility)
	if err := q.Run(runCtx); err != nil {
		return err
	}
	if ctx.Err() != nil { // stopped by the timeout, not by the handler
		return fmt.Errorf("%s was not recovered: %w", jobID, context.Cause(ctx))
	}
	return nil
}

// newQueue returns the queue as every worker process runs it: promotion,
// and one member of the group with the given consumer name and h.
func newQueue(rdb *redis.Client, consumer string, h delaystream.Handler) (*delaystream.Queue, error) {
	q, err := delaystream.New(rdb, queueName)
	if err != nil {
		return nil, err
	}
	if _, err := q.Handle(groupName, h, delaystream.WithConsumerName(consumer), delaystream.WithVisibilityTimeout(visibility)); err != nil {
		return nil, err
	}
	return q, nil
}

// crash starts worker-1 in a child process and kills it once it holds the
// job.
func crash(ctx context.Context, rdb *redis.Client, out io.Writer) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	child := exec.CommandContext(ctx, exe)
	child.Env = append(os.Environ(), workerEnv+"=1", "REDIS_URL="+redisURL(rdb.Options()))
	child.Stderr = os.Stderr
	stdout, err := child.StdoutPipe()
	if err != nil {
		return err
	}
	if err := child.Start(); err != nil {
		return fmt.Errorf("start worker-1: %w", err)
	}
	// On return worker-1 is killed. Once it holds the job, that is the
	// crash: SIGKILL, so no ack, no hand-back, no graceful shutdown.
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()

	took := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			fmt.Fprintf(out, "worker-1 (pid %d): %s\n", child.Process.Pid, sc.Text())
			if strings.HasPrefix(sc.Text(), tookLine) {
				close(took)
				return
			}
		}
	}()
	select {
	case <-took:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("worker-1 did not take the job: %w", context.Cause(ctx))
	}
}

// crashingWorker is worker-1, run in the child process: it promotes the job,
// takes it and works on it until it is killed.
func crashingWorker() error {
	opt, err := redis.ParseURL(os.Getenv("REDIS_URL"))
	if err != nil {
		return err
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	q, err := newQueue(rdb, "worker-1", func(ctx context.Context, d *delaystream.Delivery) error {
		fmt.Printf("%s%s (delivery %d), working on it...\n", tookLine, d.ID, d.Deliveries)
		<-ctx.Done() // a long job; the process is killed before it ends
		return ctx.Err()
	})
	if err != nil {
		return err
	}
	return q.Run(context.Background())
}

// redisURL turns a client's options back into a URL for the child process.
func redisURL(o *redis.Options) string {
	u := url.URL{Scheme: "redis", Host: o.Addr, Path: "/" + strconv.Itoa(o.DB)}
	if o.TLSConfig != nil {
		u.Scheme = "rediss"
	}
	if o.Username != "" || o.Password != "" {
		u.User = url.UserPassword(o.Username, o.Password)
	}
	return u.String()
}
