// Package harness gives integration tests a real Redis: a server of each
// test's own, and a local Redis Cluster.
//
// A test's server ([Redis], [Dedicated]) comes from, in order:
//
//  1. REDIS_ADDR, when set (host:port of a server the tests may write to),
//     for [Redis] only: then every test shares it and keeps apart by
//     unique key prefixes ([Prefix]);
//  2. testcontainers-go (image redis:7.0), when a Docker engine answers a
//     health check within [DockerProbeTimeout];
//  3. a throwaway redis-server child process on a free loopback port
//     (internal/redistest), started in about 0.1 s.
//
// A server of its own lets a test run in parallel with the others without
// their load in its timing, its INFO figures or its memory. When none is
// possible the test fails with a message naming what to install; it never
// skips.
//
// The Cluster is REDIS_CLUSTER_ADDRS (comma-separated seed addresses) when
// set, else three local masters started with redistest.SpawnCluster and
// shared by the package's tests. [ClusterWithReplicas] starts a cluster of
// three masters and three replicas for one test alone.
//
// With DELAYSTREAM_TLS=1 (redistest's TLS mode) every server listens on TLS
// only and every client the harness hands out uses TLS; the container is
// passed over (its server is plain), so the servers are local redis-server
// processes. Tests that build clients of their own take
// redistest.Options or redistest.TLSConfig.
//
// Use [Main] as TestMain so the servers and containers a package started are
// stopped when its tests end:
//
//	func TestMain(m *testing.M) { os.Exit(harness.Main(m)) }
package harness

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"
	tcredis "github.com/testcontainers/testcontainers-go/modules/redis"

	"github.com/delaystream/delaystream/internal/redistest"
)

// Image is the container image used when a Docker engine is available: the
// oldest Redis the library supports.
const Image = "redis:7.0"

// DockerProbeTimeout bounds the check for a Docker engine; without one the
// harness falls through to a local redis-server at once.
const DockerProbeTimeout = 1500 * time.Millisecond

// Source says where a server came from.
type Source string

// Sources of a server.
const (
	FromEnv       Source = "REDIS_ADDR"
	FromContainer Source = "testcontainers (" + Image + ")"
	FromProcess   Source = "local redis-server"
)

// Server is a Redis server the tests can reach.
type Server struct {
	Addr   string
	Source Source
	Note   string // why an earlier source was passed over, if one was
	stop   func()
}

func (s *Server) String() string {
	if s.Note == "" {
		return fmt.Sprintf("%s at %s", s.Source, s.Addr)
	}
	return fmt.Sprintf("%s at %s (%s)", s.Source, s.Addr, s.Note)
}

// Stop shuts the server down if the harness started it. It is idempotent.
func (s *Server) Stop() {
	if s.stop != nil {
		s.stop()
		s.stop = nil
	}
}

var (
	mu      sync.Mutex
	cleanup []func()

	clusterOnce  sync.Once
	clusterAddrs []string
	clusterSrc   string
	clusterErr   error

	dockerOnce sync.Once
	dockerOK   bool
	dockerWhy  string
)

// Main runs the package's tests, then stops every server and container the
// harness started. Use it as TestMain.
func Main(m *testing.M) int {
	code := m.Run()
	mu.Lock()
	fns := cleanup
	cleanup = nil
	mu.Unlock()
	for i := len(fns) - 1; i >= 0; i-- {
		fns[i]()
	}
	redistest.StopAll()
	return code
}

func atExit(f func()) {
	mu.Lock()
	defer mu.Unlock()
	cleanup = append(cleanup, f)
}

// Addr returns REDIS_ADDR, the server every test shares when it is set,
// and logs it; without it the test fails: use [Redis] or [Dedicated].
func Addr(tb testing.TB) string {
	tb.Helper()
	a := os.Getenv("REDIS_ADDR")
	if a == "" {
		tb.Fatalf("harness: REDIS_ADDR is not set; use harness.Redis for a server of the test's own")
	}
	tb.Logf("redis: %s at %s", FromEnv, a)
	return a
}

// Redis returns a client of a server of tb's own (see [Dedicated]), or of
// REDIS_ADDR's server when that is set. The client is closed, and the
// server stopped, when tb ends.
func Redis(tb testing.TB) redis.UniversalClient {
	tb.Helper()
	c, _ := RedisAddr(tb)
	return c
}

// RedisAddr is [Redis], and also returns the server's address, for
// clients a test builds elsewhere (a child process's).
func RedisAddr(tb testing.TB) (redis.UniversalClient, string) {
	tb.Helper()
	if os.Getenv("REDIS_ADDR") != "" {
		a := Addr(tb)
		c := redis.NewClient(redistest.Options(tb, a))
		tb.Cleanup(func() { _ = c.Close() })
		return c, a
	}
	s, c := Dedicated(tb)
	return c, s.Addr
}

// Dedicated starts a server used by tb alone and stops it when tb ends. It
// ignores REDIS_ADDR (for measurements that other tests would disturb, such
// as INFO commandstats, or servers a test reconfigures): it needs a Docker
// engine or redis-server.
func Dedicated(tb testing.TB) (*Server, *redis.Client) {
	tb.Helper()
	s, err := start()
	if err != nil {
		tb.Fatalf("harness: no dedicated Redis server: %v", err)
	}
	tb.Logf("dedicated redis: %s", s)
	c := redis.NewClient(redistest.Options(tb, s.Addr))
	tb.Cleanup(func() {
		_ = c.Close()
		s.Stop()
	})
	return s, c
}

// start starts a fresh server: a container when a Docker engine answers
// (and TLS mode is off), else a local redis-server process.
func start() (*Server, error) {
	var containerErr error
	if redistest.TLS() {
		containerErr = errors.New("TLS mode: the container would be plain")
	} else if ok, why := dockerAvailable(); ok {
		s, err := startContainer()
		if err == nil {
			return s, nil
		}
		containerErr = err
	} else {
		containerErr = errors.New(why)
	}
	rs, err := redistest.Spawn()
	if err != nil {
		return nil, fmt.Errorf("%w; or make a Docker engine available to testcontainers-go (%v)", err, containerErr)
	}
	return &Server{Addr: rs.Addr, Source: FromProcess, Note: containerErr.Error(), stop: rs.Stop}, nil
}

func startContainer() (*Server, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := tcredis.Run(ctx, Image, testcontainers.WithLogger(tclog.NewNoopLogger()))
	if err != nil {
		if c != nil {
			_ = testcontainers.TerminateContainer(c)
		}
		return nil, fmt.Errorf("start container %s: %w", Image, err)
	}
	conn, err := c.ConnectionString(ctx)
	if err != nil {
		_ = testcontainers.TerminateContainer(c)
		return nil, fmt.Errorf("container %s address: %w", Image, err)
	}
	u, err := url.Parse(conn)
	if err != nil {
		_ = testcontainers.TerminateContainer(c)
		return nil, fmt.Errorf("container %s address %q: %w", Image, conn, err)
	}
	return &Server{Addr: u.Host, Source: FromContainer, stop: func() {
		_ = testcontainers.TerminateContainer(c)
	}}, nil
}

// dockerAvailable reports whether a Docker engine answers, within
// DockerProbeTimeout. The probe runs in its own goroutine with a recover,
// so a misbehaving client library can neither hang nor crash the tests.
func dockerAvailable() (bool, string) {
	dockerOnce.Do(func() {
		type answer struct {
			ok  bool
			why string
		}
		ch := make(chan answer, 1)
		go func() {
			defer func() {
				if r := recover(); r != nil {
					ch <- answer{why: fmt.Sprintf("docker probe panicked: %v", r)}
				}
			}()
			p, err := testcontainers.NewDockerProvider(testcontainers.WithLogger(tclog.NewNoopLogger()))
			if err != nil {
				ch <- answer{why: "no docker engine: " + err.Error()}
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), DockerProbeTimeout)
			defer cancel()
			if err := p.Health(ctx); err != nil { // Health closes the provider
				ch <- answer{why: "docker engine unhealthy: " + err.Error()}
				return
			}
			ch <- answer{ok: true}
		}()
		select {
		case a := <-ch:
			dockerOK, dockerWhy = a.ok, a.why
		case <-time.After(DockerProbeTimeout + 250*time.Millisecond):
			dockerWhy = "docker engine did not answer within " + DockerProbeTimeout.String()
		}
	})
	return dockerOK, dockerWhy
}

// Cluster returns a client of the package's shared Redis Cluster, closed
// when tb ends: REDIS_CLUSTER_ADDRS when set, else a local Cluster of three
// masters (redistest.SpawnCluster), started on first use.
func Cluster(tb testing.TB) *redis.ClusterClient {
	tb.Helper()
	clusterOnce.Do(func() {
		if a := os.Getenv("REDIS_CLUSTER_ADDRS"); a != "" {
			clusterAddrs = strings.Split(a, ",")
			clusterSrc = "REDIS_CLUSTER_ADDRS"
			return
		}
		start := time.Now()
		c, err := redistest.SpawnCluster(3, 0)
		if err != nil {
			clusterErr = fmt.Errorf("%w (for a Cluster, REDIS_CLUSTER_ADDRS instead of REDIS_ADDR)", err)
			return
		}
		atExit(c.Stop)
		clusterAddrs = c.Addrs
		clusterSrc = fmt.Sprintf("local cluster of 3 masters (started in %s)", time.Since(start).Round(time.Millisecond))
	})
	if clusterErr != nil {
		tb.Fatalf("harness: no Redis Cluster: %v", clusterErr)
	}
	tb.Logf("redis cluster: %s at %v", clusterSrc, clusterAddrs)
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: clusterAddrs, MaxRedirects: 8, TLSConfig: redistest.TLSConfig(tb)})
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// ClusterWithReplicas starts a Redis Cluster of three masters with one
// replica each, used by tb alone (for tests that kill or fail over nodes,
// or measure the masters), and stops it when tb ends. It returns once the
// cluster state is ok and every replica's link to its master is up. The
// client, closed when tb ends, has a short dial timeout and retries with
// backoff, so that it gets past a dead master quickly. It ignores
// REDIS_CLUSTER_ADDRS: it needs redis-server and redis-cli.
func ClusterWithReplicas(tb testing.TB) (*redistest.Cluster, *redis.ClusterClient) {
	tb.Helper()
	start := time.Now()
	c, err := redistest.SpawnCluster(3, 1)
	if err != nil {
		tb.Fatalf("harness: no Redis Cluster with replicas: %v", err)
	}
	tb.Logf("dedicated redis cluster: 3 masters + 3 replicas at %v (started in %s)", c.Addrs, time.Since(start).Round(time.Millisecond))
	rdb := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: c.Addrs, MaxRedirects: 8, DialTimeout: 500 * time.Millisecond,
		MaxRetries: 5, MinRetryBackoff: 50 * time.Millisecond, MaxRetryBackoff: 500 * time.Millisecond,
		TLSConfig: c.TLSConfig(),
	})
	tb.Cleanup(func() {
		_ = rdb.Close()
		c.Stop()
	})
	return c, rdb
}

// Prefix returns a key prefix unique to tb (its name plus a random suffix)
// and deletes every key under it when tb ends, so a shared server does not
// fill up and a server given by REDIS_ADDR is left as it was found.
func Prefix(tb testing.TB, rdb redis.UniversalClient) string {
	tb.Helper()
	p := redistest.Prefix(tb)
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := deleteKeys(ctx, rdb, p+":*"); err != nil {
			tb.Logf("harness: deleting keys under %s: %v", p, err)
		}
	})
	return p
}

// Keys returns every key matching pattern (SCAN on every master).
func Keys(ctx context.Context, rdb redis.UniversalClient, pattern string) ([]string, error) {
	var (
		kmu sync.Mutex
		out []string
	)
	scan := func(ctx context.Context, c *redis.Client) error {
		it := c.Scan(ctx, 0, pattern, 1000).Iterator()
		for it.Next(ctx) {
			kmu.Lock()
			out = append(out, it.Val())
			kmu.Unlock()
		}
		return it.Err()
	}
	var err error
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, scan)
	case *redis.Client:
		err = scan(ctx, c)
	default:
		return nil, fmt.Errorf("harness: keys: unsupported client %T", rdb)
	}
	return out, err
}

func deleteKeys(ctx context.Context, rdb redis.UniversalClient, pattern string) error {
	keys, err := Keys(ctx, rdb, pattern)
	if err != nil {
		return err
	}
	for _, k := range keys { // one by one: keys of a prefix may live in many slots
		if err := rdb.Unlink(ctx, k).Err(); err != nil {
			return err
		}
	}
	return nil
}
