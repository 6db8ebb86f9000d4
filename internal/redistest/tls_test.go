package redistest

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// The TLS tests run in both modes: in plain mode they start TLS servers of
// their own (spawn(true)), so the TLS path is exercised in every run, and
// check that the mode's own servers and clients are plain; in TLS mode
// they check that the mode's servers and clients use TLS.

// The certificates: ECDSA P-256, signed by the CA, the server's for
// 127.0.0.1 and localhost (server and client use), the client's for client
// use, valid for a day.
func TestGenerate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	now := time.Now()
	require.NoError(t, generate(dir, now))
	read := func(t *testing.T, name string) *x509.Certificate {
		t.Helper()
		pair, err := tls.LoadX509KeyPair(filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key"))
		require.NoError(t, err, name)
		return pair.Leaf
	}
	caPEM, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	require.NoError(t, err)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(caPEM))
	tests := []struct {
		name  string
		cert  string
		host  string // "": not checked
		usage x509.ExtKeyUsage
	}{
		{"server for 127.0.0.1", "server", "127.0.0.1", x509.ExtKeyUsageServerAuth},
		{"server for localhost", "server", "localhost", x509.ExtKeyUsageServerAuth},
		{"server as a client", "server", "", x509.ExtKeyUsageClientAuth}, // redis-server to its master and cluster peers
		{"client", "client", "", x509.ExtKeyUsageClientAuth},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := read(t, tt.cert)
			key, ok := c.PublicKey.(*ecdsa.PublicKey)
			require.True(t, ok, "%T", c.PublicKey)
			assert.Equal(t, elliptic.P256(), key.Curve)
			assert.WithinDuration(t, now.Add(24*time.Hour), c.NotAfter, time.Second)
			_, err := c.Verify(x509.VerifyOptions{Roots: roots, DNSName: tt.host, KeyUsages: []x509.ExtKeyUsage{tt.usage}, CurrentTime: now})
			assert.NoError(t, err)
		})
	}
}

// A TLS server has no plain port and takes only clients that trust its
// CA and show a certificate of it.
func TestTLSServer(t *testing.T) {
	t.Parallel()
	s, err := spawn(true)
	require.NoError(t, err)
	t.Cleanup(s.Stop)
	require.True(t, s.TLS)
	requireTLSOnly(t, s.Addr)
}

// The mode's shared server and clients: TLS only in TLS mode, plain
// otherwise.
func TestModeServer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := Client(t)
	require.NoError(t, rdb.Ping(ctx).Err())
	assert.Equal(t, TLS(), rdb.Options().TLSConfig != nil, "client TLS configuration")
	wrapped := redis.NewClient(&redis.Options{Addr: Addr(t), Dialer: WrapDialer(t, (&net.Dialer{}).DialContext)})
	t.Cleanup(func() { _ = wrapped.Close() })
	require.NoError(t, wrapped.Ping(ctx).Err(), "through WrapDialer")
	if !TLS() {
		assert.Nil(t, Env(t))
		assert.Nil(t, TLSConfig(t))
		assert.Equal(t, []string{"--port", "1234"}, ListenArgs(t, 1234))
		conn, err := dialPlain(Addr(t))
		require.NoError(t, err)
		reply, err := rawPing(t, conn)
		require.NoError(t, err)
		assert.Equal(t, "+PONG", reply, "plain PING")
		return
	}
	assert.Contains(t, Env(t), TLSEnv+"=1")
	assert.Contains(t, ListenArgs(t, 1234), "--tls-port")
	if os.Getenv("REDIS_ADDR") != "" {
		t.Logf("REDIS_ADDR is set: its listening ports are not checked")
		return
	}
	requireTLSOnly(t, Addr(t))
}

// A cluster with TLS: clients, the cluster bus (the cluster state is ok)
// and replication (every replica linked) over TLS.
func TestTLSCluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, err := spawnCluster(true, 3, 1) // returns once the cluster is ok and the replicas linked
	require.NoError(t, err)
	t.Cleanup(c.Stop)
	rdb := c.Client()
	t.Cleanup(func() { _ = rdb.Close() })
	require.NotNil(t, rdb.Options().TLSConfig)
	for i := range 10 { // keys over every master
		k := "k{" + strconv.Itoa(i) + "}"
		require.NoError(t, rdb.Set(ctx, k, i, 0).Err())
		assert.Equal(t, strconv.Itoa(i), rdb.Get(ctx, k).Val())
	}
	for _, a := range c.Addrs {
		requireTLSOnly(t, a)
		n := redis.NewClient(c.options(a))
		cfg, err := n.ConfigGet(ctx, "tls-*").Result()
		_ = n.Close()
		require.NoError(t, err)
		assert.Equal(t, "yes", cfg["tls-cluster"], a)
		assert.Equal(t, "yes", cfg["tls-replication"], a)
	}
}

// requireTLSOnly checks the server at addr: a plain connection gets no
// answer, nor does a TLS one without a client certificate or that does not
// trust the server's CA; one with the generated CA and client certificate
// does, and the server's port is 0 and its tls-port that of addr.
func requireTLSOnly(t *testing.T, addr string) {
	t.Helper()
	f, err := loadCerts()
	require.NoError(t, err)
	other := t.TempDir()
	require.NoError(t, generate(other, time.Now()))
	otherCA, err := os.ReadFile(filepath.Join(other, "ca.crt"))
	require.NoError(t, err)
	otherRoots := x509.NewCertPool()
	require.True(t, otherRoots.AppendCertsFromPEM(otherCA))

	noCert := f.client.Clone()
	noCert.Certificates = nil
	wrongCA := f.client.Clone()
	wrongCA.RootCAs = otherRoots
	tests := []struct {
		name string
		dial func() (net.Conn, error)
		want string // the reply line to PING; "": an error
	}{
		{"plain", func() (net.Conn, error) { return dialPlain(addr) }, ""},
		{"TLS without client certificate", func() (net.Conn, error) { return tlsDial(addr, noCert) }, ""},
		{"TLS with another CA", func() (net.Conn, error) { return tlsDial(addr, wrongCA) }, ""},
		{"TLS", func() (net.Conn, error) { return tlsDial(addr, f.client) }, "+PONG"},
	}
	for _, tt := range tests {
		conn, err := tt.dial()
		var reply string
		if err == nil {
			reply, err = rawPing(t, conn)
		}
		if tt.want == "" {
			assert.Error(t, err, "%s: %s answered %q", tt.name, addr, reply)
			assert.NotEqual(t, "+PONG", reply, "%s: %s", tt.name, addr)
			continue
		}
		require.NoError(t, err, "%s: %s", tt.name, addr)
		assert.Equal(t, tt.want, reply, "%s: %s", tt.name, addr)
		assert.True(t, conn.(*tls.Conn).ConnectionState().HandshakeComplete, tt.name)
	}

	rdb := redis.NewClient(&redis.Options{Addr: addr, TLSConfig: f.client.Clone()})
	defer rdb.Close()
	cfg, err := rdb.ConfigGet(context.Background(), "*port").Result()
	require.NoError(t, err)
	_, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	assert.Equal(t, "0", cfg["port"], "%s: plain port", addr)
	assert.Equal(t, port, cfg["tls-port"], "%s: TLS port", addr)
}

func dialPlain(addr string) (net.Conn, error) {
	return net.DialTimeout("tcp", addr, 2*time.Second)
}

func tlsDial(addr string, cfg *tls.Config) (net.Conn, error) {
	return tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", addr, cfg)
}

// rawPing sends an inline PING over conn, returns the first reply line,
// and closes conn.
func rawPing(t *testing.T, conn net.Conn) (string, error) {
	t.Helper()
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(2 * time.Second)); err != nil {
		return "", err
	}
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	return strings.TrimSpace(line), err
}
