package main

import (
	"encoding/json"

	"flag"
	"fmt"
	"io"
	"os"
	"time"
)

// Names shared by the parent and its children.
const (
	queueName = "chaos"
	keyPrefix = "chaos"
)

// groups are the consumer groups; each gets consumersPerGroup processes.
var groups = []string{"billing", "audit"}

const (
	consumersPerGroup = 3
	movers            = 2
	// maxAttempts is the groups' WithMaxAttempts: poison messages (which
	// always fail) are dead-lettered after this many attempts.
	maxAttempts = 4
)

// plan is what one run does; see planFor.
type plan struct {
	Mode      string
	Messages  int
	Producers int
	// Window is how long the producers take to send their schedules; each
	// message is due MinDelay to MaxDelay after it is sent.
	Window             time.Duration
	MinDelay, MaxDelay time.Duration
	// Fault cadence: a consumer is killed every ConsumerKillEvery, a mover
	// every MoverKillEvery; RedisFaults Redis-wide faults (pauses, sleeps,
	// connection kills, one restart) are spread evenly over the time
	// messages are sent and fall due.
	ConsumerKillEvery time.Duration
	MoverKillEvery    time.Duration
	RedisFaults       int
	PauseFor          time.Duration // CLIENT PAUSE and DEBUG SLEEP length
	// Drain bounds the wait, after the last message fell due, until
	// every group has handled everything.
	Drain    time.Duration
	FailRate float64 // probability that a handler call fails (retried)
	Workers  int     // handlers per consumer
}

func planFor(mode string) (plan, error) {
	p := plan{
		Mode: mode, Producers: 3, MinDelay: 200 * time.Millisecond,
		ConsumerKillEvery: 2 * time.Second, MoverKillEvery: 5 * time.Second,
		PauseFor: 2500 * time.Millisecond, FailRate: 0.08, Workers: 8,
	}
	switch mode {
	case "short":
		p.Messages, p.Window, p.MaxDelay = 6000, 24*time.Second, 10*time.Second
		p.RedisFaults, p.Drain = 6, 40*time.Second
	case "long":
		p.Messages, p.Producers, p.Window, p.MaxDelay = 100_000, 4, 240*time.Second, 60*time.Second
		p.RedisFaults, p.Drain = 15, 120*time.Second
	default:
		return p, fmt.Errorf("unknown mode %q (short or long)", mode)
	}
	return p, nil
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run is the program: the chaos run (the parent) or, with -child, one of
// its child processes. It returns the exit status: 0 when the run found
// no violation, 1 when it found some, 2 when it could not run.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		mode     = fs.String("mode", "short", "short (about 50 s, 6000 messages) or long (about 7 min, 100k messages)")
		fsync    = fs.String("fsync", "always", "the server's appendfsync: always or everysec")
		messages = fs.Int("messages", 0, "messages to schedule (0: the mode's count)")
		dir      = fs.String("dir", "", "work directory (ledgers, logs, the AOF); default a new temporary one, removed after a passing run")
		summary  = fs.String("summary", "", "write the figures as JSON to this file")
		seed     = fs.Uint64("seed", 0, "random seed (0: from the clock); printed, so a run can be repeated")
		child    = fs.String("child", "", "internal: run as a child process with this JSON spec")
	)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *child != "" {
		var spec childSpec
		if err := json.Unmarshal([]byte(*child), &spec); err != nil {
			fmt.Fprintln(stderr, "chaos child: bad spec:", err)
			return 2
		}
		return childMain(spec, stderr)
	}
	p, err := planFor(*mode)
	if err != nil {
		fmt.Fprintln(stderr, "chaos:", err)
		return 2
	}
	if *messages > 0 {
		p.Messages = *messages
	}
	if *fsync != "always" && *fsync != "everysec" {
		fmt.Fprintf(stderr, "chaos: -fsync %q: always or everysec\n", *fsync)
		return 2
	}
	if *seed == 0 {
		*seed = uint64(time.Now().UnixNano())
	}
	sum, err := parentMain(p, *fsync, *dir, *seed, stdout)
	if sum != nil && *summary != "" {
		if werr := writeSummary(*summary, sum); werr != nil && err == nil {
			err = werr
		}
	}
	switch {
	case err != nil:
		fmt.Fprintln(stderr, "chaos:", err)
		return 2
	case sum.Violations > 0:
		return 1
	}
	return 0
}

func writeSummary(path string, s *Summary) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
