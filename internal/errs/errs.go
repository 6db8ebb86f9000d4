// Package errs holds the sentinel errors of every part of the queue, so
// that an error from any internal package matches the root package's
// exported error with errors.Is. The root package re-exports each one and
// documents it; internal packages name them under their own variables.
package errs

import (
	"errors"
	"fmt"
)

// The sentinel errors; see the root package's Err* variables for what each
// means to a caller.
var (
	ErrInvalidOption  = errors.New("delaystream: invalid option")
	ErrRunning        = errors.New("delaystream: already running")
	ErrNotFound       = errors.New("delaystream: not found")
	ErrInvalidMessage = errors.New("delaystream: invalid message")
	ErrDuplicate      = errors.New("delaystream: duplicate message id")
	ErrNotReplicated  = errors.New("delaystream: write not confirmed by enough replicas")
	ErrInvalidName    = errors.New("delaystream: invalid name")
	ErrDataLost       = errors.New("delaystream: Redis lost the queue's data")
	ErrShardCount     = errors.New("delaystream: shard count differs from the queue's")
	ErrWrongType      = errors.New("delaystream: key holds the wrong type")
	ErrMalformed      = errors.New("delaystream: malformed entry")
	ErrDropped        = errors.New("delaystream: dropped by the handler")
	ErrOutOfMemory    = errors.New("delaystream: Redis refused the write: out of memory")
	ErrEvictionPolicy = errors.New("delaystream: Redis may evict the queue's keys")
)

// all are the sentinels above: an error wrapping one of them carries the
// package's "delaystream: " prefix already.
var all = []error{ErrInvalidOption, ErrRunning, ErrNotFound, ErrInvalidMessage, ErrDuplicate,
	ErrNotReplicated, ErrInvalidName, ErrDataLost, ErrShardCount, ErrWrongType, ErrMalformed,
	ErrDropped, ErrOutOfMemory, ErrEvictionPolicy}

// Mark returns err made to match sentinel with errors.Is as well, with one
// "delaystream: " prefix in its text: err itself when it matches sentinel
// already; err's text unchanged when it wraps another of the sentinels
// (an invalid name is an invalid option too: "delaystream: invalid name:
// ...", not "delaystream: invalid option: delaystream: invalid name:
// ..."); else "<sentinel>: <err>". Mark(nil, s) is nil.
func Mark(err, sentinel error) error {
	switch {
	case err == nil || errors.Is(err, sentinel):
		return err
	case prefixed(err):
		return &marked{err: err, sentinel: sentinel}
	default:
		return fmt.Errorf("%w: %w", sentinel, err)
	}
}

// Invalid is Mark(err, ErrInvalidOption).
func Invalid(err error) error { return Mark(err, ErrInvalidOption) }

func prefixed(err error) bool {
	for _, s := range all {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// marked is an error that also matches a sentinel its text does not name.
type marked struct {
	err, sentinel error
}

func (m *marked) Error() string   { return m.err.Error() }
func (m *marked) Unwrap() []error { return []error{m.err, m.sentinel} }
