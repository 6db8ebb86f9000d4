package delaystream

import "github.com/delaystream/delaystream/internal/errs"

// The errors a caller tests with errors.Is. Every error the package returns
// for one of these conditions wraps the matching value, whichever part of
// the queue found it.
var (
	// ErrInvalidOption is wrapped by every error an option, [New] or
	// [Queue.Handle] returns for bad input. Nothing was written.
	ErrInvalidOption = errs.ErrInvalidOption
	// ErrInvalidMessage is wrapped by the error of a call given a bad
	// message: an empty or too long id, a zero [When], a payload over the
	// limit. Nothing was written.
	ErrInvalidMessage = errs.ErrInvalidMessage
	// ErrRunning is returned by [Queue.Run] when the Queue is already
	// running, and wrapped by [Queue.Handle] called while it runs.
	ErrRunning = errs.ErrRunning
	// ErrNotFound is wrapped by the error of a call naming a message or a
	// dead letter that does not exist (any more).
	ErrNotFound = errs.ErrNotFound
	// ErrDuplicate is wrapped by a schedule result's error when the id is
	// already waiting and the duplicate policy is [PolicyReject].
	ErrDuplicate = errs.ErrDuplicate
	// ErrNotReplicated is wrapped by the error of a write made with
	// [WithReplicaAck] that fewer replicas than asked confirmed in time. The
	// write was made on the master and may or may not survive a failover.
	ErrNotReplicated = errs.ErrNotReplicated
	// ErrInvalidName is wrapped by the error of [New] given a queue name or
	// prefix that cannot name Redis keys, and of [Queue.Handle] given such a
	// group name.
	ErrInvalidName = errs.ErrInvalidName
	// ErrShardCount is wrapped by the error of a call on a queue that Redis
	// records with another shard count than [WithShards] gave. Nothing was
	// written.
	ErrShardCount = errs.ErrShardCount
	// ErrWrongType is wrapped by the error of a call that found one of the
	// queue's keys holding another Redis type (another program uses the
	// key). Nothing was written.
	ErrWrongType = errs.ErrWrongType
	// ErrDataLost is reported (to hooks and logs) when Redis lost keys the
	// queue had written: an eviction, a FLUSHALL, a restart without
	// persistence.
	ErrDataLost = errs.ErrDataLost
	// ErrMalformed is wrapped by the reason of an entry found in Redis that
	// is not what the queue writes; the entry goes to quarantine or to the
	// dead letters, and everything else keeps going.
	ErrMalformed = errs.ErrMalformed
	// ErrDropped is matched by the errors [Drop] returns, for middleware
	// that tells a dropped delivery from a failed one.
	ErrDropped = errs.ErrDropped
	// ErrOutOfMemory is wrapped by the error of a write Redis refused
	// because its memory is full (maxmemory reached under the noeviction
	// policy); the error says how full (used, maxmemory, policy). Nothing
	// of the refused call was written (in a batch, other chunks may have
	// been: see its Results). Retry once memory is freed.
	ErrOutOfMemory = errs.ErrOutOfMemory
	// ErrEvictionPolicy is wrapped by the error of [Queue.Run] and of
	// scheduling under [WithNoEvictionRequired] when a Redis server's
	// maxmemory-policy can evict the queue's keys. Nothing was written.
	ErrEvictionPolicy = errs.ErrEvictionPolicy
)
