package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/admin"
	"github.com/delaystream/delaystream/cmd/delaystream/internal/cli"
)

// Exit codes; see the package doc.
const (
	exitOK          = 0
	exitError       = 1
	exitUsage       = 2
	exitNotFound    = 3
	exitNotConfirmd = 4
)

// errNotConfirmed is returned when a destructive command was declined or
// could not ask.
var errNotConfirmed = errors.New("not confirmed")

// usageError marks an error in how the command was called.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// app is the state every command shares: flags, streams, the client.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer

	url, prefix            string
	cluster                bool
	tlsCA, tlsCert, tlsKey string
	tlsInsecure            bool
	timeout                time.Duration
	jsonOut                bool
	yes                    bool
	terminal               func() bool // whether stdin is a terminal; tests never are
	rdb                    redis.UniversalClient
	in                     *admin.Operator
}

// run runs the command line args and returns the exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr, terminal: func() bool {
		f, ok := stdin.(*os.File)
		return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
	}}
	root := a.rootCmd()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if a.rdb != nil {
		_ = a.rdb.Close()
	}
	if err == nil {
		return exitOK
	}
	fmt.Fprintln(stderr, "delaystream:", sentence(err))
	var ue usageError
	switch {
	case errors.As(err, &ue), errors.Is(err, delaystream.ErrInvalidOption), errors.Is(err, delaystream.ErrInvalidName),
		errors.Is(err, delaystream.ErrInvalidMessage),
		strings.HasPrefix(err.Error(), "unknown command "): // cobra has no sentinel for it
		return exitUsage
	case errors.Is(err, delaystream.ErrNotFound):
		return exitNotFound
	case errors.Is(err, errNotConfirmed):
		return exitNotConfirmd
	}
	return exitError
}

func (a *app) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "delaystream",
		Short: "Inspect and operate delaystream queues on Redis",
		Long: `delaystream shows the queues of a delaystream deployment on Redis (single server or Cluster):
what waits, what is overdue, which consumer group is behind or stuck and since when, dead letters
and quarantine; and it cancels, reschedules, redrives and purges.

Exit codes: 0 ok, 1 error, 2 usage, 3 not found, 4 not confirmed (destructive command without --yes).`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.PersistentPreRun = func(c *cobra.Command, _ []string) {
		if c.Name() != "serve" && c.Name() != "exporter" {
			// One-shot commands: their error line says what the pool's
			// log lines would.
			redis.SetLogger(quietRedisLog{})
		} else {
			redis.SetLogger(newPacedRedisLog(a.stderr))
		}
	}
	f := root.PersistentFlags()
	f.StringVar(&a.url, "redis-url", envOr("REDIS_URL", cli.DefaultURL),
		"redis://[user:password@]host:port[/db] or rediss:// (TLS); comma-separated hosts for a Cluster ($REDIS_URL)")
	f.BoolVar(&a.cluster, "cluster", false, "connect to a Redis Cluster even with one seed address")
	f.StringVar(&a.prefix, "prefix", envOr("DELAYSTREAM_PREFIX", delaystream.DefaultPrefix), "key prefix of the queues ($DELAYSTREAM_PREFIX)")
	f.StringVar(&a.tlsCA, "tls-ca", "", "PEM file of the CA that signed the server's certificate (implies TLS)")
	f.StringVar(&a.tlsCert, "tls-cert", "", "PEM file of a client certificate (with --tls-key)")
	f.StringVar(&a.tlsKey, "tls-key", "", "PEM file of the client certificate's key")
	f.BoolVar(&a.tlsInsecure, "tls-insecure", false, "do not verify the server's certificate")
	f.DurationVar(&a.timeout, "timeout", 5*time.Second, "dial, read and write timeout")

	root.AddCommand(a.queuesCmd(), a.statsCmd(), a.peekCmd(), a.getCmd(), a.cancelCmd(), a.rescheduleCmd(),
		a.groupsCmd(), a.forgetGroupCmd(), a.dlqCmd(), a.quarantineCmd(), a.watchCmd(), a.pauseCmd(), a.resumeCmd(),
		a.memoryCmd(), a.locateCmd(), a.exporterCmd(), a.deleteQueueCmd(), a.historyCmd())
	root.AddCommand(a.recurringCmd()) // cmd_recurring.go
	root.AddCommand(a.serveCmd())     // the web view, serve.go
	// Unknown commands and wrong argument counts are usage errors.
	for _, c := range allCommands(root) {
		if c.Args != nil {
			check := c.Args
			c.Args = func(cmd *cobra.Command, args []string) error {
				if err := check(cmd, args); err != nil {
					return usageError{err}
				}
				return nil
			}
		}
	}
	return root
}

func allCommands(c *cobra.Command) []*cobra.Command {
	out := []*cobra.Command{c}
	for _, s := range c.Commands() {
		out = append(out, allCommands(s)...)
	}
	return out
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// addJSON adds --json to a read command.
func (a *app) addJSON(c *cobra.Command) {
	c.Flags().BoolVar(&a.jsonOut, "json", false, "print one JSON document instead of text")
}

// addYes adds --yes to a destructive command.
func (a *app) addYes(c *cobra.Command) {
	c.Flags().BoolVarP(&a.yes, "yes", "y", false, "do not ask for confirmation (required when stdin is not a terminal)")
}

// inspector connects (once) and returns the Operator.
func (a *app) inspector() (*admin.Operator, error) {
	if a.in != nil {
		return a.in, nil
	}
	if a.prefix == "" {
		return nil, usagef("--prefix must not be empty")
	}
	tc, err := a.tlsConfig()
	if err != nil {
		return nil, err
	}
	rdb, err := cli.Connect(cli.ConnConfig{URL: a.url, Cluster: a.cluster, TLS: tc, Timeout: a.timeout})
	if err != nil {
		return nil, err
	}
	in, err := admin.New(rdb, a.prefix)
	if err != nil {
		_ = rdb.Close()
		return nil, err
	}
	a.rdb, a.in = rdb, in
	return in, nil
}

// tlsConfig builds the TLS configuration of the --tls-* flags, nil when
// none is given.
func (a *app) tlsConfig() (*tls.Config, error) {
	if a.tlsCA == "" && a.tlsCert == "" && a.tlsKey == "" && !a.tlsInsecure {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: a.tlsInsecure} //nolint:gosec // asked for
	if a.tlsCA != "" {
		pem, err := os.ReadFile(a.tlsCA)
		if err != nil {
			return nil, usagef("--tls-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, usagef("--tls-ca: no PEM certificate in %s", a.tlsCA)
		}
		tc.RootCAs = pool
	}
	if (a.tlsCert == "") != (a.tlsKey == "") {
		return nil, usagef("--tls-cert and --tls-key go together")
	}
	if a.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(a.tlsCert, a.tlsKey)
		if err != nil {
			return nil, usagef("--tls-cert/--tls-key: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	if h := hostOf(a.url); h != "" {
		tc.ServerName = h
	}
	return tc, nil
}

// hostOf returns the host name of the first address of a redis URL.
func hostOf(u string) string {
	_, rest, ok := strings.Cut(u, "://")
	if !ok {
		rest = u
	}
	if _, after, ok := strings.Cut(rest, "@"); ok {
		rest = after
	}
	rest, _, _ = strings.Cut(rest, "/")
	rest, _, _ = strings.Cut(rest, ",")
	if i := strings.LastIndex(rest, ":"); i >= 0 && !strings.HasSuffix(rest, "]") {
		rest = rest[:i]
	}
	return strings.Trim(rest, "[]")
}

// confirm asks the user to confirm what, or requires --yes.
func (a *app) confirm(what string) error {
	if a.yes {
		return nil
	}
	if !a.terminal() {
		return fmt.Errorf("%w: refusing to %s without --yes (stdin is not a terminal)", errNotConfirmed, what)
	}
	fmt.Fprintf(a.stderr, "%s? [y/N] ", upperFirst(what))
	line, _ := bufio.NewReader(a.stdin).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	return fmt.Errorf("%w: %s declined", errNotConfirmed, what)
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// printJSON writes v as indented JSON.
func (a *app) printJSON(v any) error {
	enc := json.NewEncoder(a.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table returns a tabwriter on stdout; call Flush.
func (a *app) table() *tabwriter.Writer {
	return tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
}

// ctxOf returns the command's context.
func ctxOf(c *cobra.Command) context.Context { return c.Context() }
