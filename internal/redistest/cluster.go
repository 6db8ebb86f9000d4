package redistest

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster is a local Redis Cluster of throwaway servers.
type Cluster struct {
	Addrs   []string // every node; the first len/2 (with replicas) or all are masters at start
	servers []*Server
	tls     *tls.Config // clients' TLS configuration; nil unless TLS mode
}

// SpawnCluster starts masters*(1+replicas) servers with cluster mode on and
// joins them with `redis-cli --cluster create`, then waits until the cluster
// state is ok on every node and every replica's link to its master is up.
// The caller must Stop it (or call StopAll). In TLS mode, clients, the
// cluster bus and replication all use TLS.
func SpawnCluster(masters, replicas int) (*Cluster, error) {
	return spawnCluster(TLS(), masters, replicas)
}

// createTimeout bounds `redis-cli --cluster create`, which takes about a
// second but waits without end until every node reports the same
// configuration (once, on a 2-core machine under a load of 10, it waited
// 9 minutes). Such a cluster is thrown away and started again, at most
// createAttempts times in all.
const (
	createTimeout  = 30 * time.Second
	createAttempts = 3
)

// spawnCluster is SpawnCluster with TLS on or off whatever the mode.
func spawnCluster(useTLS bool, masters, replicas int) (*Cluster, error) {
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return nil, fmt.Errorf("redistest: redis-cli not found: %s", InstallHint)
	}
	var (
		tc     *tls.Config
		cliTLS []string
	)
	if useTLS {
		certs, err := loadCerts()
		if err != nil {
			return nil, err
		}
		tc, cliTLS = certs.client, certs.cliArgs()
	}
	for attempt := 1; ; attempt++ {
		c, out, err := createCluster(useTLS, tc, cli, cliTLS, masters, replicas)
		if err == nil || out == nil {
			return c, err
		}
		if attempt == createAttempts {
			return nil, fmt.Errorf("%w, %d times; output of the last:\n%s", err, attempt, out)
		}
		fmt.Fprintf(os.Stderr, "redistest: %v; starting the cluster again. Its output:\n%s\n", err, out)
	}
}

// createCluster starts the servers and joins them. It returns the output
// of redis-cli when that timed out or found a node already in a cluster
// (then the servers are stopped, and spawnCluster tries again).
func createCluster(useTLS bool, tc *tls.Config, cli string, cliTLS []string, masters, replicas int) (*Cluster, []byte, error) {
	c := &Cluster{tls: tc}
	for i := 0; i < masters*(1+replicas); i++ {
		s, err := spawn(useTLS, "--cluster-enabled", "yes", "--cluster-node-timeout", "1000",
			"--cluster-config-file", "nodes.conf", "--repl-diskless-sync-delay", "0")
		if err != nil {
			c.Stop()
			return nil, nil, err
		}
		c.servers = append(c.servers, s)
		c.Addrs = append(c.Addrs, s.Addr)
	}
	args := append(append(cliTLS, "--cluster", "create"), c.Addrs...)
	args = append(args, "--cluster-replicas", fmt.Sprint(replicas), "--cluster-yes")
	cctx, ccancel := context.WithTimeout(context.Background(), createTimeout)
	cmd := exec.CommandContext(cctx, cli, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.CombinedOutput()
	timedOut := cctx.Err() != nil
	ccancel()
	if timedOut {
		c.Stop()
		return nil, out, fmt.Errorf("redistest: redis-cli --cluster create did not finish within %s", createTimeout)
	}
	if err != nil {
		c.Stop()
		if bytes.Contains(out, []byte("is not empty")) {
			// A new server took the port of a node killed elsewhere (another
			// test's cluster, or an attempt stopped above) whose peers still
			// gossip to it: start again on other ports.
			return nil, out, fmt.Errorf("redistest: redis-cli --cluster create found a node not empty: %w", err)
		}
		return nil, nil, fmt.Errorf("redistest: redis-cli --cluster create: %w\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, a := range c.Addrs {
		n := redis.NewClient(c.options(a))
		for {
			info, err := n.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if ctx.Err() != nil {
				n.Close()
				c.Stop()
				return nil, nil, fmt.Errorf("redistest: cluster at %s not ok: %v %q", a, err, info)
			}
			time.Sleep(50 * time.Millisecond)
		}
		n.Close()
	}
	if err := c.waitReplicas(ctx, masters*replicas); err != nil {
		c.Stop()
		return nil, nil, err
	}
	return c, nil, nil
}

// waitReplicas waits until want nodes are replicas whose link to their
// master is up (INFO replication), so that a test may fail a master over
// as soon as SpawnCluster returns.
func (c *Cluster) waitReplicas(ctx context.Context, want int) error {
	if want == 0 {
		return nil
	}
	var up int
	for {
		up = 0
		for _, a := range c.Addrs {
			n := redis.NewClient(c.options(a))
			info, err := n.Info(ctx, "replication").Result()
			n.Close()
			if err == nil && strings.Contains(info, "role:slave") && strings.Contains(info, "master_link_status:up") {
				up++
			}
		}
		if up >= want {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("redistest: %d of %d replicas linked to their master", up, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Client returns a cluster client tuned for tests: it reloads the cluster
// state quickly after a failover instead of the default 60 s. In TLS mode
// it has the TLS configuration.
func (c *Cluster) Client() *redis.ClusterClient {
	return redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs, MaxRedirects: 8, TLSConfig: c.TLSConfig()})
}

// TLSConfig returns a copy of the TLS configuration of the cluster's
// clients, nil unless TLS mode, for tests that build clients of their own.
func (c *Cluster) TLSConfig() *tls.Config {
	if c.tls == nil {
		return nil
	}
	return c.tls.Clone()
}

func (c *Cluster) options(addr string) *redis.Options {
	return &redis.Options{Addr: addr, TLSConfig: c.TLSConfig()}
}

// Servers returns the node processes, e.g. to kill one.
func (c *Cluster) Servers() []*Server { return c.servers }

// Stop kills every node.
func (c *Cluster) Stop() {
	for _, s := range c.servers {
		s.Stop()
	}
}
