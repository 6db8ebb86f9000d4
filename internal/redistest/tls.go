package redistest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TLS mode. With DELAYSTREAM_TLS=1 every server redistest starts listens on
// a TLS port only (no plain port), requires a client certificate, and
// replicates and runs its cluster bus over TLS; every client redistest
// hands out ([Client], [Cluster.Client], [Options], [TLSConfig]) carries
// the matching *tls.Config. The certificates (an ECDSA P-256 CA, a server
// certificate for 127.0.0.1 and localhost that the servers also present as
// clients to each other, and a client certificate, all valid for one day)
// are generated once per process into a temporary directory, removed by
// [StopAll] (which [Main] calls).
//
// A child process that a test starts finds the certificates through
// DELAYSTREAM_TLS_DIR, which [Env] returns along with DELAYSTREAM_TLS: in
// that directory it uses the files as they are (ca.crt, client.crt,
// client.key, server.crt, server.key) and generates nothing. The same works
// for a server of one's own given by REDIS_ADDR in TLS mode, when its
// certificate is signed by ca.crt for the address's host and it accepts
// client.crt.
const (
	TLSEnv    = "DELAYSTREAM_TLS"     // "1": TLS mode
	TLSDirEnv = "DELAYSTREAM_TLS_DIR" // certificates to use instead of generating them
)

// TLS reports whether TLS mode is on (DELAYSTREAM_TLS=1).
func TLS() bool { return os.Getenv(TLSEnv) == "1" }

// tlsFiles is the certificate set of this process.
type tlsFiles struct {
	dir    string
	owned  bool        // generated here: StopAll removes dir
	client *tls.Config // never handed out: callers get clones
}

func (f *tlsFiles) path(name string) string { return filepath.Join(f.dir, name) }

// serverArgs are the redis-server arguments for a TLS-only server on port.
func (f *tlsFiles) serverArgs(port int) []string {
	return []string{"--port", "0", "--tls-port", strconv.Itoa(port),
		"--tls-cert-file", f.path("server.crt"), "--tls-key-file", f.path("server.key"),
		"--tls-ca-cert-file", f.path("ca.crt"), "--tls-auth-clients", "yes",
		"--tls-replication", "yes", "--tls-cluster", "yes"}
}

// cliArgs are the redis-cli arguments for a TLS connection.
func (f *tlsFiles) cliArgs() []string {
	return []string{"--tls", "--cacert", f.path("ca.crt"),
		"--cert", f.path("client.crt"), "--key", f.path("client.key")}
}

var (
	tlsMu    sync.Mutex
	tlsState *tlsFiles
)

// loadCerts returns the process's certificates, generating them on first use
// (or loading them from DELAYSTREAM_TLS_DIR). It works in either mode: the
// TLS test of this package uses it in plain mode too.
func loadCerts() (*tlsFiles, error) {
	tlsMu.Lock()
	defer tlsMu.Unlock()
	if tlsState != nil {
		return tlsState, nil
	}
	f := &tlsFiles{dir: os.Getenv(TLSDirEnv)}
	if f.dir == "" {
		dir, err := os.MkdirTemp("", "redistest-tls-")
		if err != nil {
			return nil, fmt.Errorf("redistest: tls: %w", err)
		}
		if err := generate(dir, time.Now()); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("redistest: tls: %w", err)
		}
		f.dir, f.owned = dir, true
	}
	ca, err := os.ReadFile(f.path("ca.crt"))
	if err != nil {
		return nil, fmt.Errorf("redistest: tls: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("redistest: tls: no certificate in %s", f.path("ca.crt"))
	}
	cert, err := tls.LoadX509KeyPair(f.path("client.crt"), f.path("client.key"))
	if err != nil {
		return nil, fmt.Errorf("redistest: tls: %w", err)
	}
	// ServerName stays empty: the dialer takes it from the address
	// (127.0.0.1, a SAN of the server certificate).
	f.client = &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	tlsState = f
	return f, nil
}

// removeCerts deletes generated certificates; the next use generates new
// ones. Called by StopAll, once no server uses them.
func removeCerts() {
	tlsMu.Lock()
	defer tlsMu.Unlock()
	if tlsState != nil && tlsState.owned {
		os.RemoveAll(tlsState.dir)
	}
	tlsState = nil
}

// LoadTLSConfig returns the client TLS configuration for the servers
// redistest starts, or nil when TLS mode is off. It is TLSConfig for code
// without a testing.TB, such as a child process (see [Env]). Each call
// returns a new copy.
func LoadTLSConfig() (*tls.Config, error) {
	if !TLS() {
		return nil, nil
	}
	f, err := loadCerts()
	if err != nil {
		return nil, err
	}
	return f.client.Clone(), nil
}

// TLSConfig returns the client TLS configuration for the servers redistest
// starts (the CA as RootCAs and a client certificate), or nil when TLS mode
// is off, so that it can be set as redis.Options.TLSConfig either way. It
// fails tb when the certificates cannot be made.
func TLSConfig(tb testing.TB) *tls.Config {
	tb.Helper()
	c, err := LoadTLSConfig()
	if err != nil {
		tb.Fatalf("%v", err)
	}
	return c
}

// Options returns client options for the server at addr: the address and,
// in TLS mode, the TLS configuration. Tests that build their own client
// start from these and set what else they need.
func Options(tb testing.TB, addr string) *redis.Options {
	tb.Helper()
	return &redis.Options{Addr: addr, TLSConfig: TLSConfig(tb)}
}

// ListenArgs returns the redis-server arguments that make a server listen
// on port: "--port <port>", or in TLS mode a TLS port only, with the
// certificates. For tests that run redis-server themselves (say, to
// restart it on the same port).
func ListenArgs(tb testing.TB, port int) []string {
	tb.Helper()
	if !TLS() {
		return []string{"--port", strconv.Itoa(port)}
	}
	f, err := loadCerts()
	if err != nil {
		tb.Fatalf("%v", err)
	}
	return f.serverArgs(port)
}

// WrapDialer returns dial itself when TLS mode is off, else a dialer that
// runs the TLS handshake over the connections dial makes. go-redis skips
// Options.TLSConfig when Options.Dialer is set: a test with a dialer of its
// own wraps it with this.
func WrapDialer(tb testing.TB, dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	tb.Helper()
	cfg := TLSConfig(tb)
	if cfg == nil {
		return dial
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		c := cfg.Clone()
		if host, _, err := net.SplitHostPort(addr); err == nil {
			c.ServerName = host
		}
		tc := tls.Client(conn, c)
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, err
		}
		return tc, nil
	}
}

// Env returns the environment entries a child process of a test needs to
// reach redistest's servers: none when TLS mode is off, else
// DELAYSTREAM_TLS=1 and DELAYSTREAM_TLS_DIR (the certificates of this
// process). Append them to the child's exec.Cmd.Env.
func Env(tb testing.TB) []string {
	tb.Helper()
	if !TLS() {
		return nil
	}
	f, err := loadCerts()
	if err != nil {
		tb.Fatalf("%v", err)
	}
	return []string{TLSEnv + "=1", TLSDirEnv + "=" + f.dir}
}

// generate writes a CA (ca.crt), a server certificate for 127.0.0.1 and
// localhost usable for server and client authentication (server.crt,
// server.key: redis-server presents it to its replicas' masters and on the
// cluster bus too) and a client certificate (client.crt, client.key), all
// ECDSA P-256 and valid for a day from now, into dir.
func generate(dir string, now time.Time) error {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	ca := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "redistest CA"},
		NotBefore:             now.Add(-time.Hour), // some slack for clock skew
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	if ca, err = x509.ParseCertificate(caDER); err != nil {
		return err
	}
	if err := writePEM(filepath.Join(dir, "ca.crt"), "CERTIFICATE", caDER); err != nil {
		return err
	}
	leaf := func(name string, usage []x509.ExtKeyUsage, san bool) error {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		tmpl := &x509.Certificate{
			SerialNumber: serial(),
			Subject:      pkix.Name{CommonName: "redistest " + name},
			NotBefore:    now.Add(-time.Hour),
			NotAfter:     now.Add(24 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  usage,
		}
		if san {
			tmpl.DNSNames = []string{"localhost"}
			tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return err
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return err
		}
		return errors.Join(writePEM(filepath.Join(dir, name+".crt"), "CERTIFICATE", der),
			writePEM(filepath.Join(dir, name+".key"), "PRIVATE KEY", keyDER))
	}
	return errors.Join(
		leaf("server", []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, true),
		leaf("client", []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, false))
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		panic(err) // crypto/rand.Reader never fails (Go 1.24 and later)
	}
	return n
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}
