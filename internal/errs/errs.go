// Package errs holds the sentinel errors of every part of the queue, so
// that an error from any internal package matches the root package's
// exported error with errors.Is. The root package re-exports each one and
// documents it; internal packages name them under their own variables.
package errs

import "errors"

// The sentinel errors; see the root package's Err* variables for what each
// means to a caller.
var (
	InvalidOption  = errors.New("delaystream: invalid option")
	Running        = errors.New("delaystream: already running")
	NotFound       = errors.New("delaystream: not found")
	InvalidMessage = errors.New("delaystream: invalid message")
	Duplicate      = errors.New("delaystream: duplicate message id")
	NotReplicated  = errors.New("delaystream: write not confirmed by enough replicas")
	InvalidName    = errors.New("delaystream: invalid name")
	DataLost       = errors.New("delaystream: Redis lost the queue's data")
	ShardCount     = errors.New("delaystream: shard count differs from the queue's")
	WrongType      = errors.New("delaystream: key holds the wrong type")
	Malformed      = errors.New("delaystream: malformed entry")
)
