// Package errs holds the sentinel errors of every part of the queue, so
// that an error from any internal package matches the root package's
// exported error with errors.Is. The root package re-exports each one and
// documents it; internal packages name them under their own variables.
package errs

import "errors"

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
