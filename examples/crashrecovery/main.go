// Command crashrecovery shows at-least-once delivery surviving a crash. A
// worker process takes a job and is killed with SIGKILL before it finishes,
// so the job stays pending in the consumer group, held by a dead consumer.
// Once it has been idle for the visibility timeout, another consumer of the
// group reclaims it (XAUTOCLAIM) and finishes it.
//
// The crashing worker is this same program, started again as a child process
// with CRASHRECOVERY_WORKER=1 in its environment.
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
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/delaystream/delaystream/delay"
	"github.com/delaystream/delaystream/group"
	"github.com/delaystream/delaystream/mover"
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

// run schedules a job, has a child process take it and kills the child, then
// runs a second consumer until it has reclaimed and finished the job.
func run(ctx context.Context, rdb *redis.Client, out io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	q, err := delay.New(rdb, queueName)
	if err != nil {
		return err
	}
	if _, err := q.Schedule(ctx, delay.Message{ID: jobID, Payload: []byte("resize image 42")}, delay.After(0)); err != nil {
		return err
	}
	fmt.Fprintf(out, "scheduled %s\n", jobID)
	mv, err := mover.New(rdb, queueName)
	if err != nil {
		return err
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	g, gctx := errgroup.WithContext(runCtx)
	g.Go(func() error { return mv.Run(gctx) })

	err = crashAndRecover(gctx, rdb, g, out)
	stop()
	return errors.Join(err, g.Wait())
}

// crashAndRecover starts worker-1 in a child process, kills it once it holds
// the job, and starts worker-2 in this process on g.
func crashAndRecover(ctx context.Context, rdb *redis.Client, g *errgroup.Group, out io.Writer) error {
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
	kill := sync.OnceFunc(func() { _ = child.Process.Kill(); _ = child.Wait() })
	defer kill()

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
	case <-ctx.Done():
		return fmt.Errorf("worker-1 did not take the job: %w", context.Cause(ctx))
	}

	// The crash: SIGKILL, so no ack, no hand-back, no graceful shutdown.
	kill()
	crashed := time.Now()
	fmt.Fprintf(out, "killed worker-1 with SIGKILL: %s stays pending with a dead consumer\n", jobID)

	done := make(chan struct{})
	finished := sync.OnceFunc(func() { close(done) })
	worker2, err := group.New(rdb, queueName, groupName, func(ctx context.Context, m *group.Message) error {
		fmt.Fprintf(out, "worker-2: reclaimed %s %.1fs after the crash (delivery %d, attempt %d); finished %q\n",
			m.ID, time.Since(crashed).Seconds(), m.Deliveries, m.Attempt, m.Payload)
		finished()
		return nil
	}, group.WithConsumerName("worker-2"), group.WithVisibilityTimeout(visibility))
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "worker-2: started; reclaims entries idle for %s\n", visibility)
	g.Go(func() error { return worker2.Run(ctx) })

	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s was not recovered: %w", jobID, context.Cause(ctx))
	}
}

// crashingWorker is worker-1, run in the child process: it takes the job and
// works on it until it is killed.
func crashingWorker() error {
	opt, err := redis.ParseURL(os.Getenv("REDIS_URL"))
	if err != nil {
		return err
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	c, err := group.New(rdb, queueName, groupName, func(ctx context.Context, m *group.Message) error {
		fmt.Printf("%s%s (delivery %d), working on it...\n", tookLine, m.ID, m.Deliveries)
		<-ctx.Done() // a long job; the process is killed before it ends
		return ctx.Err()
	}, group.WithConsumerName("worker-1"), group.WithVisibilityTimeout(visibility))
	if err != nil {
		return err
	}
	return c.Run(context.Background())
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
