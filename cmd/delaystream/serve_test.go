package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestIsLoopback(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]bool{
		"127.0.0.1:8080":   true,
		"127.0.0.2:8080":   true,
		"[::1]:8080":       true,
		"localhost:8080":   true,
		"LOCALHOST:0":      true,
		"0.0.0.0:8080":     false,
		"[::]:8080":        false,
		":8080":            false,
		"10.1.2.3:8080":    false,
		"192.168.0.1:8080": false,
	} {
		got, err := isLoopback(context.Background(), addr)
		require.NoError(t, err, addr)
		assert.Equal(t, want, got, addr)
	}
	_, err := isLoopback(context.Background(), "no-port")
	assert.Error(t, err)
}

// TestServeRefuses checks the flags serve refuses before listening.
func TestServeRefuses(t *testing.T) {
	t.Parallel()
	tg := single(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--addr", "0.0.0.0:0"}, "--allow-remote"},
		{[]string{"serve", "--addr", ":0"}, "not a loopback address"},
		{[]string{"serve", "--addr", "127.0.0.1:0", "--basic-auth", "no-colon"}, "user:password"},
		{[]string{"serve", "--addr", "127.0.0.1:0", "--preview-bytes", "1"}, "preview bytes"},
		{[]string{"serve", "--addr", "127.0.0.1:0", "--sample-interval", "1ms"}, "sample interval"},
		{[]string{"serve", "--addr", "127.0.0.1:0", "--allowed-host", "http://evil.example/"}, "allowed host"},
	} {
		r := tg.run(t, c.args...)
		assert.Equal(t, exitUsage, r.code, "%v: %s", c.args, r.stderr)
		assert.Contains(t, r.stderr, c.want, c.args)
		assert.Empty(t, r.stdout, c.args)
	}
}

// serving is a `delaystream serve` process.
type serving struct {
	url  string // http://127.0.0.1:port
	cmd  *exec.Cmd
	done chan error
}

// startServe starts `delaystream serve` on a free loopback port against
// tg, with env added to the environment, and reads the address it prints.
func startServe(t *testing.T, tg target, env []string, args ...string) *serving {
	t.Helper()
	all := append(append([]string{"--prefix", tg.prefix}, tg.flags...), "serve", "--addr", "127.0.0.1:0")
	cmd := exec.Command(binary, append(all, args...)...)
	cmd.Env = append(append(append(os.Environ(), "REDIS_URL="+tg.url), tg.env...), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	s := &serving{cmd: cmd, done: make(chan error, 1)}
	t.Cleanup(func() {
		if s.cmd.ProcessState == nil {
			_ = s.cmd.Process.Kill()
			<-s.done
		}
	})
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, out)
		s.done <- cmd.Wait()
	}()
	select {
	case line := <-lines:
		m := regexp.MustCompile(`on (http://127\.0\.0\.1:\d+)/`).FindStringSubmatch(line)
		require.NotNil(t, m, "first line: %q", line)
		s.url = m[1]
	case <-time.After(60 * time.Second):
		t.Fatal("serve printed no address within 60s")
	}
	return s
}

// stop interrupts the server and requires a clean exit.
func (s *serving) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, s.cmd.Process.Signal(syscall.SIGINT))
	select {
	case err := <-s.done:
		require.NoError(t, err, "serve exited badly after SIGINT")
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop within 30s of SIGINT")
	}
}

func get(t *testing.T, u string, user, pass string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	require.NoError(t, err)
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	c := &http.Client{Timeout: 30 * time.Second}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// TestServe runs the command and reads its pages and API.
func TestServe(t *testing.T) {
	t.Parallel()
	tg := single(t)
	seed(t, tg)
	s := startServe(t, tg, nil, "--sample-interval", "100ms", "--preview-bytes", "16")
	p := url.PathEscape(tg.prefix)

	code, body := get(t, s.url+"/", "", "")
	require.Equal(t, http.StatusOK, code) // redirected to the prefix's page
	assert.Contains(t, body, `data-queue="jobs"`)
	assert.Contains(t, body, `data-queue="orders"`)

	code, body = get(t, s.url+"/p/"+p+"/q/jobs", "", "")
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `data-group="billing"`)
	assert.Contains(t, body, `data-message="job-1"`)
	assert.Contains(t, body, `class="redrive"`)
	assert.Contains(t, body, "unknown member format", "the quarantined member")
	code, body = get(t, s.url+"/p/"+p+"/q/orders", "", "")
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `data-message="late"`)

	require.Eventually(t, func() bool {
		code, body := get(t, s.url+"/api/p/"+p+"/q/orders/history", "", "")
		var h struct {
			Samples []struct{ Waiting int64 } `json:"samples"`
		}
		return code == http.StatusOK && json.Unmarshal([]byte(body), &h) == nil &&
			len(h.Samples) >= 2 && h.Samples[0].Waiting == 3
	}, 30*time.Second, 100*time.Millisecond, "the sampler records the queue")
	s.stop(t)
}

// TestServeReadOnlyAndAuth runs the command read-only with basic auth
// from the environment.
func TestServeReadOnlyAndAuth(t *testing.T) {
	t.Parallel()
	tg := single(t)
	seed(t, tg)
	s := startServe(t, tg, []string{basicAuthEnv + "=ops:s3cret"}, "--read-only", "--max-overdue", "10s")
	page := s.url + "/p/" + url.PathEscape(tg.prefix) + "/q/jobs"

	code, _ := get(t, page, "", "")
	assert.Equal(t, http.StatusUnauthorized, code)
	code, _ = get(t, page, "ops", "wrong")
	assert.Equal(t, http.StatusUnauthorized, code)
	code, body := get(t, page, "ops", "s3cret")
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `data-message="job-1"`)
	assert.NotContains(t, body, `<form method="post"`, "no action")
	assert.Contains(t, body, `id="read-only"`)

	req, err := http.NewRequest(http.MethodPost, page+"/g/billing/purge", strings.NewReader("all=1&csrf=x"))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth("ops", "s3cret")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)

	// /healthz names nothing and needs no credentials; /health names the
	// queues and does, and fails on the seeded queue whose earliest
	// message is a minute overdue (past --max-overdue).
	code, body = get(t, s.url+"/healthz", "", "")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ok\n", body)
	code, _ = get(t, s.url+"/health", "", "")
	assert.Equal(t, http.StatusUnauthorized, code)
	code, body = get(t, s.url+"/health", "ops", "s3cret")
	assert.Equal(t, http.StatusServiceUnavailable, code, body)
	// serve exports the metrics too, behind the same credentials.
	code, _ = get(t, s.url+"/metrics", "", "")
	assert.Equal(t, http.StatusUnauthorized, code)
	code, metrics := get(t, s.url+"/metrics", "ops", "s3cret")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, metrics, "delaystream_up 1")
	assert.Contains(t, metrics, `delaystream_history_dead_lettered_total{group="billing",queue="jobs"} 3`)
	assert.Regexp(t, `(?m)^fail  queue orders: the earliest waiting message is overdue by `, body)
	assert.Regexp(t, `(?m)^ok    group jobs/audit: `, body)
	s.stop(t)
}

// The command answers only the Host names it is reached by: its address,
// localhost, and those of --allowed-host; any other (a name rebound to
// its address) is refused with 421.
func TestServeHostCheck(t *testing.T) {
	t.Parallel()
	tg := single(t)
	seed(t, tg)
	s := startServe(t, tg, nil, "--allowed-host", "queues.example", "--allowed-host", "proxy.example:8443")
	page := s.url + "/p/" + url.PathEscape(tg.prefix) + "/"
	_, port, err := net.SplitHostPort(strings.TrimPrefix(s.url, "http://"))
	require.NoError(t, err)
	for host, want := range map[string]int{
		"":                       http.StatusOK, // the URL's own: 127.0.0.1:<port>
		"localhost:" + port:      http.StatusOK,
		"queues.example":         http.StatusOK,
		"proxy.example:8443":     http.StatusOK,
		"proxy.example":          http.StatusMisdirectedRequest,
		"evil.example":           http.StatusMisdirectedRequest,
		"evil.example:" + port:   http.StatusMisdirectedRequest,
		"127.0.0.1.evil.example": http.StatusMisdirectedRequest,
	} {
		req, err := http.NewRequest(http.MethodGet, page, nil)
		require.NoError(t, err)
		if host != "" {
			req.Host = host
		}
		resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, want, resp.StatusCode, "Host %q: %s", host, body)
		if want == http.StatusOK {
			assert.Contains(t, string(body), `data-queue="orders"`, host)
		}
	}
	s.stop(t)
}
