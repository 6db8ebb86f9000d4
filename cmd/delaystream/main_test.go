package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/internal/redistest"
	"github.com/delaystream/delaystream/internal/seedtest"
)

// binary is the delaystream command built once for every test.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "delaystream-cli-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "delaystream")
	build := exec.Command("go", "build", "-o", binary, ".")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build the delaystream command:", err)
		os.Exit(1)
	}
	code := redistest.Main(m)
	os.RemoveAll(dir)
	os.Exit(code)
}

// target is a Redis the command is pointed at, with a prefix of its own.
type target struct {
	url    string   // --redis-url
	flags  []string // TLS flags in TLS mode
	env    []string
	prefix string
}

// single returns a target on the shared test server.
func single(t *testing.T) target {
	t.Helper()
	return newTarget(t, redistest.Addr(t))
}

func newTarget(t *testing.T, addrs string) target {
	t.Helper()
	tg := target{url: "redis://" + addrs, prefix: redistest.Prefix(t), env: redistest.Env(t)}
	for _, e := range tg.env {
		if dir, ok := strings.CutPrefix(e, redistest.TLSDirEnv+"="); ok {
			tg.url = "rediss://" + addrs
			tg.flags = []string{"--tls-ca", filepath.Join(dir, "ca.crt"),
				"--tls-cert", filepath.Join(dir, "client.crt"), "--tls-key", filepath.Join(dir, "client.key")}
		}
	}
	return tg
}

// result is what one run of the command printed and returned.
type result struct {
	stdout, stderr string
	code           int
}

// run runs the command with args against tg (the URL from the
// environment, as an operator's shell would give it).
func (tg target) run(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, append(append([]string{"--prefix", tg.prefix}, tg.flags...), args...)...)
	cmd.Env = append(append(os.Environ(), "REDIS_URL="+tg.url), tg.env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Stdin = strings.NewReader("y\n") // not a terminal: must not count as a yes
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return result{stdout: out.String(), stderr: errb.String(), code: code}
}

// ok runs the command and requires exit code 0.
func (tg target) ok(t *testing.T, args ...string) string {
	t.Helper()
	r := tg.run(t, args...)
	require.Equal(t, 0, r.code, "delaystream %s\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.stdout, r.stderr)
	return r.stdout
}

// json runs a read command with --json and decodes its output into v.
func (tg target) json(t *testing.T, v any, args ...string) {
	t.Helper()
	out := tg.ok(t, append(args, "--json")...)
	require.NoError(t, json.Unmarshal([]byte(out), v), "output: %s", out)
}

// client returns a client of the target's server.
func (tg target) client(t *testing.T) *redis.Client {
	t.Helper()
	return redistest.Client(t)
}

// seed writes the known state of seedtest.Seed under tg's prefix.
func seed(t *testing.T, tg target) {
	t.Helper()
	seedtest.Seed(t, tg.client(t), tg.prefix)
}
