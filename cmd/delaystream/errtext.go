package main

import (
	"context"
	"errors"
	"net"
	"strings"
	"syscall"
)

// quietRedisLog is a go-redis logger that drops what it is given: the
// pool's lines ("connection pool: failed to dial ...") would come before
// the command's own error, which says the same once.
type quietRedisLog struct{}

func (quietRedisLog) Printf(context.Context, string, ...any) {}

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
