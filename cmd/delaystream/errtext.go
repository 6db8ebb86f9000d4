package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/delaystream/delaystream/internal/logpace"
)

// quietRedisLog is a go-redis logger that drops what it is given: the
// pool's lines ("connection pool: failed to dial ...") would come before
// the command's own error, which says the same once.
type quietRedisLog struct{}

func (quietRedisLog) Printf(context.Context, string, ...any) {}

// pacedRedisLog is the go-redis logger of the long-running commands
// (serve, exporter): while Redis is down the pool logs each failed dial,
// several a second; this writes the first at once and the next ones
// spaced as logpace spaces a failing loop's lines, each saying how many
// it left out. A quiet spell of logpace.Max starts a new run.
type pacedRedisLog struct {
	w       io.Writer
	mu      sync.Mutex
	pace    logpace.Pace
	seen    time.Time // the last line given
	left    int       // lines left out since the last written
	timeNow func() time.Time
}

func newPacedRedisLog(w io.Writer) *pacedRedisLog { return &pacedRedisLog{w: w, timeNow: time.Now} }

func (l *pacedRedisLog) Printf(_ context.Context, format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.timeNow()
	if now.Sub(l.seen) > logpace.Max {
		l.pace.Reset()
	}
	l.seen = now
	if !l.pace.Due(now) {
		l.left++
		return
	}
	line := strings.TrimSuffix(fmt.Sprintf(format, args...), "\n")
	if l.left > 0 {
		line += fmt.Sprintf(" (%d similar lines left out)", l.left)
		l.left = 0
	}
	fmt.Fprintf(l.w, "%s %s\n", now.UTC().Format(time.RFC3339), line) // go-redis's lines say "redis: "
}

// chainParts are the prefixes of sentinel errors and package chains that
// an error line need not repeat: the command prints "delaystream:" once.
var chainParts = []string{
	"delaystream: invalid option: ", "group: invalid option: ", "dsprom: invalid option: ", "web: invalid option: ",
	"delaystream: invalid name: ", "delaystream: ", "admin: ", "inspect: ", "group: ",
}

// sentence returns err as one sentence for the command's error line: a
// Redis that cannot be reached is said so, and the internal package
// chain ("delaystream: invalid option: ...", "group: ...") is dropped.
func sentence(err error) string {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		why := op.Err.Error()
		var se syscall.Errno
		if errors.As(op.Err, &se) {
			why = se.Error()
		}
		return "cannot reach Redis at " + addrOf(op) + ": " + why
	}
	msg := err.Error()
	for _, p := range chainParts {
		msg = strings.ReplaceAll(msg, ": "+p, ": ")
		msg = strings.TrimPrefix(msg, p)
	}
	return msg
}

func addrOf(op *net.OpError) string {
	if op.Addr != nil {
		return op.Addr.String()
	}
	return "?"
}
