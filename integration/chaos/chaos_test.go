package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/internal/redistest"
)

// execEnv makes the test binary run the chaos program instead of the tests:
// TestChaosShort runs it that way, and the program re-executes the same
// binary for its children.
const execEnv = "DELAYSTREAM_CHAOS_EXEC"

func TestMain(m *testing.M) {
	if os.Getenv(execEnv) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(redistest.Main(m))
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestChaosShort runs the chaos program's short mode as a process (this
// test binary, re-executed) and asserts its verdict: exit status 0, and the
// figures of its table: nothing lost, early, delivered at a superseded due
// time or after a successful cancel, duplicates within the bound, every
// fault kind injected, and work resuming after each Redis-wide fault.
func TestChaosShort(t *testing.T) {
	dir := t.TempDir()
	sumPath := filepath.Join(dir, "summary.json")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-mode", "short", "-summary", sumPath)
	cmd.Env = append(append(os.Environ(), execEnv+"=1"), redistest.Env(t)...)
	// Its own process group, so that the cleanup reaches every child even
	// if the program dies; its children also die with it (Pdeathsig).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	err := cmd.Wait()
	t.Logf("chaos program output:\n%s", out.String())
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		t.Fatalf("chaos program exited with status %d (1: violations, 2: the run failed)", exit.ExitCode())
	}
	require.NoError(t, err)

	b, err := os.ReadFile(sumPath)
	require.NoError(t, err)
	var s Summary
	require.NoError(t, json.Unmarshal(b, &s))

	// Nothing the program started outlives it.
	require.NotEmpty(t, s.Pids)
	for _, pid := range s.Pids {
		assert.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH, "process %d still exists", pid)
	}

	// The verdict and the judged figures.
	assert.Equal(t, "PASS", s.Verdict)
	assert.Zero(t, s.Violations, "violations: %v", s.ViolationList)
	assert.True(t, s.Drained, "every group drained")
	assert.Empty(t, s.Harness)
	// Schedule calls fail while a fault lasts (their outcome is then
	// unknown, and checked as such); how many depends on the machine's
	// load during the faults. Most succeed: the run did its work.
	assert.GreaterOrEqual(t, s.Scheduled, s.Messages*3/4, "most schedules acknowledged")
	assert.Positive(t, s.Cancelled, "Cancel true")
	assert.Positive(t, s.Rescheduled, "rescheduled")
	assert.Positive(t, s.RescheduledTwice, "rescheduled twice")
	assert.Positive(t, s.Poison, "poison messages")
	assert.Positive(t, s.Generated, "generated ids")
	assert.Greater(t, s.Expected, s.Messages/2)
	assert.Zero(t, s.Quarantine)
	assert.Zero(t, s.DataLoss)
	require.Len(t, s.Groups, len(groups))
	for _, g := range s.Groups {
		assert.Zero(t, g.Lost, "%s: lost", g.Group)
		assert.Zero(t, g.Early, "%s: early", g.Group)
		assert.Zero(t, g.WrongDue, "%s: delivered at a superseded due time", g.Group)
		assert.Zero(t, g.CancelledDelivered, "%s: delivered after Cancel returned true", g.Group)
		assert.Zero(t, g.Unexpected, "%s: unexpected deliveries", g.Group)
		assert.Equal(t, s.Expected, g.Delivered+g.DeadLettered, "%s: every expected message handled or dead-lettered", g.Group)
		assert.GreaterOrEqual(t, g.DeadLettered, s.Poison, "%s: poison dead-lettered", g.Group)
		assert.LessOrEqual(t, int64(g.Duplicates), g.Bound, "%s: duplicates within the in-flight bound", g.Group)
		assert.Positive(t, g.Failures, "%s: handler failures (retries) happened", g.Group)
	}

	// Every fault kind struck, as often as the short mode plans (the
	// kill loops run late when a Redis-wide fault holds them up).
	assert.GreaterOrEqual(t, s.Faults[faultConsumerKill], 8)
	assert.GreaterOrEqual(t, s.Faults[faultMoverKill], 4)
	assert.Equal(t, 1, s.Faults[faultRestart])
	for _, k := range []string{faultPauseWrite, faultPauseAll, faultSleep, faultClientKill} {
		assert.GreaterOrEqual(t, s.Faults[k], 1, k)
	}
	// Work resumes after every Redis-wide fault: generous bounds for a
	// loaded machine (about a lease TTL is typical).
	require.Len(t, s.Recovery, 6)
	for _, r := range s.Recovery {
		if assert.GreaterOrEqual(t, r.Promotion, 0.0, "%s at %.1fs: promotion resumed", r.Kind, r.At) {
			assert.LessOrEqual(t, r.Promotion, 10.0, "%s at %.1fs: promotion resumed within 10 s", r.Kind, r.At)
		}
		for _, g := range groups {
			if assert.GreaterOrEqual(t, r.Delivery[g], 0.0, "%s at %.1fs: %s handled again", r.Kind, r.At, g) {
				assert.LessOrEqual(t, r.Delivery[g], 10.0, "%s at %.1fs: %s handled again within 10 s", r.Kind, r.At, g)
			}
		}
	}
	assert.Positive(t, s.Lateness.N)

	// The printed table says the same.
	text := out.String()
	assert.Contains(t, text, "verdict: PASS")
	for _, c := range []struct {
		re   string
		want int
	}{
		{`scheduled \(acknowledged\)\s+(\d+)`, s.Scheduled},
		{`cancelled \(Cancel true\)\s+(\d+)`, s.Cancelled},
		{`expected per group\s+(\d+)`, s.Expected},
		{`consumer SIGKILL\s+(\d+)`, s.Faults[faultConsumerKill]},
		{`restart from AOF\s+(\d+)`, s.Faults[faultRestart]},
	} {
		m := regexp.MustCompile(c.re).FindStringSubmatch(text)
		if assert.Len(t, m, 2, "table line %s", c.re) {
			assert.Equal(t, strconv.Itoa(c.want), m[1], "table line %s", c.re)
		}
	}
	for _, g := range s.Groups {
		m := regexp.MustCompile(`\s` + g.Group + `\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)`).FindStringSubmatch(text)
		if assert.Len(t, m, 5, "table row of %s", g.Group) {
			assert.Equal(t, []string{strconv.Itoa(g.Delivered), strconv.Itoa(g.DeadLettered), "0", "0"}, m[1:], "table row of %s", g.Group)
		}
	}
}
