package main

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
)

// tmux runs tmux on the test's own server socket.
func tmux(t *testing.T, sock string, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command("/usr/bin/tmux", append([]string{"-L", sock}, args...)...).CombinedOutput()
	return string(out), err
}

// shellQuote quotes s for sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// TestWatch runs `watch` in a detached tmux session of a fixed size,
// reads the screen, changes the queue and sees the figures follow, then
// quits with q.
func TestWatch(t *testing.T) {
	t.Parallel()
	tg := single(t)
	seed(t, tg)
	sock := fmt.Sprintf("ds-watch-%d", time.Now().UnixNano())
	t.Cleanup(func() { _, _ = tmux(t, sock, "kill-server") })

	words := []string{"env", "REDIS_URL=" + tg.url}
	words = append(words, tg.env...)
	words = append(words, binary, "--prefix", tg.prefix)
	words = append(words, tg.flags...)
	words = append(words, "watch", "--interval", "200ms")
	for i, w := range words {
		words[i] = shellQuote(w)
	}
	out, err := tmux(t, sock, "new-session", "-d", "-s", "w", "-x", "150", "-y", "50", strings.Join(words, " "))
	require.NoError(t, err, out)

	var screen string
	see := func(pattern string) {
		t.Helper()
		re := regexp.MustCompile(pattern)
		require.Eventually(t, func() bool {
			screen, _ = tmux(t, sock, "capture-pane", "-p", "-t", "w")
			return re.MatchString(screen)
		}, 30*time.Second, 50*time.Millisecond, "pattern %s never showed; last screen:\n%s", pattern, screen)
	}
	see(`delaystream watch\s+prefix ` + regexp.QuoteMeta(tg.prefix))
	see(`queue orders\s+1 shard`)
	see(`(?m)^\s+waiting\s+3 `)
	see(`(?m)^\s+overdue\s+1\s+oldest due 1m\d+s ago`)
	see(`(?m)^\s+billing\s+1\s+0 \S+\s+0 -\s+0\s+3\s+0\s+\d\s*$`)
	see(`(?m)^\s+audit\s+1\s+0 \S+\s+0 -\s+0\s+0\s+\d\s+0\s*$`)
	see(`queue jobs\s+1 shard\s+quarantined\s+1`)

	// A change shows at the next refresh.
	orders, err := delaystream.New(tg.client(t), "orders", delaystream.WithPrefix(tg.prefix))
	require.NoError(t, err)
	for i := range 4 {
		_, err := orders.Schedule(context.Background(), delaystream.Message{ID: fmt.Sprintf("new-%d", i)}, delaystream.After(time.Hour))
		require.NoError(t, err)
	}
	see(`(?m)^\s+waiting\s+7 `)

	out, err = tmux(t, sock, "send-keys", "-t", "w", "q")
	require.NoError(t, err, out)
	require.Eventually(t, func() bool {
		_, err := tmux(t, sock, "has-session", "-t", "w")
		return err != nil
	}, 10*time.Second, 50*time.Millisecond, "watch did not quit on q")
}
