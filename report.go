package delaystream

import (
	"time"

	"github.com/delaystream/delaystream/internal/group"
)

// Hooks are callbacks for a group's delivery events, for metrics and
// tracing; see [WithHooks]. Any may be nil. They run on the consumer's
// goroutines and must return quickly.
type Hooks struct {
	OnDelivered func(d *Delivery)                     // before the handler runs
	OnAcked     func(d *Delivery, took time.Duration) // the handler succeeded
	// OnFailed is called for every failure of the handler (an error or a
	// panic, and a [Snooze], whose err says so; not a [Drop] error), once it is settled,
	// with the handler's error, as River and asynq call their error
	// handlers: when the message is retried, retryIn is the wait before
	// the next attempt; for the last failure (the last attempt, a
	// [DeadLetter] error, a payload that could not be decoded) retryIn is
	// 0 and OnDeadLettered follows with the reason. So one hook can log
	// every failure's error, the final one included; OnHandled's outcome
	// ([HandlerRetried] or [HandlerDeadLettered]) tells them apart.
	OnFailed       func(d *Delivery, err error, retryIn time.Duration)
	OnDeadLettered func(d *Delivery, reason string)    // d is nil for entries that could not be read
	OnDropped      func(d *Delivery, err error)        // the handler returned a [Drop] error
	OnReclaimed    func(stream string, n, deleted int) // n entries of crashed consumers taken over; deleted were gone
	// OnDataLoss is called once per loss when the consumer finds that
	// Redis lost the queue's data (err wraps [ErrDataLost]).
	OnDataLoss func(err error)
	// OnHandled is called once per run of the handler, with how it ended.
	OnHandled func(d *Delivery, outcome HandlerOutcome, took time.Duration)
	// OnLimitWait is called after each wait of the consumer, with workers
	// free, for the group's flow limits, with its length.
	OnLimitWait func(d time.Duration)
}

func (h Hooks) internal() group.Hooks {
	var g group.Hooks
	if f := h.OnDelivered; f != nil {
		g.OnDelivered = func(m *group.Message) { f(delivery(m)) }
	}
	if f := h.OnAcked; f != nil {
		g.OnAcked = func(m *group.Message, took time.Duration) { f(delivery(m), took) }
	}
	if f := h.OnFailed; f != nil {
		g.OnFailed = func(m *group.Message, err error, in time.Duration) { f(delivery(m), err, in) }
	}
	if f := h.OnDeadLettered; f != nil {
		g.OnDeadLettered = func(m *group.Message, reason string) { f(delivery(m), reason) }
	}
	if f := h.OnDropped; f != nil {
		g.OnDropped = func(m *group.Message, err error) { f(delivery(m), err) }
	}
	if f := h.OnHandled; f != nil {
		g.OnHandled = func(m *group.Message, o group.Outcome, took time.Duration) { f(delivery(m), HandlerOutcome(o), took) }
	}
	g.OnReclaimed, g.OnDataLoss, g.OnLimitWait = h.OnReclaimed, h.OnDataLoss, h.OnLimitWait
	return g
}

// MoverHooks are callbacks for promotion events, for metrics and tracing;
// see [WithMoverHooks]. Any may be nil. lane is the stream key a call
// promoted into (the queue's, or a group's retry lane).
type MoverHooks struct {
	// OnPromote is called after every promote call that moved or
	// quarantined anything.
	OnPromote func(lane string, moved, quarantined int, took time.Duration)
	// OnLease is called when this process gains (true) or loses (false)
	// the lease of a lane.
	OnLease func(lane string, owner bool)
	// OnError is called after every failed promote call; stuck reports an
	// error that repeats until someone fixes the lane's keys or data.
	OnError func(lane string, err error, stuck bool)
	// OnOwnership is called with the shards this process promotes
	// whenever that set changes.
	OnOwnership func(owned []int)
	// OnDataLoss is called once per loss when Redis lost the queue's data
	// (err wraps [ErrDataLost]).
	OnDataLoss func(err error)
}

// HandlerOutcome is how one run of a handler ended, as [Hooks].OnHandled
// reports it.
type HandlerOutcome int

// The handler outcomes.
const (
	// HandlerAcked: the handler returned nil; the entry is acknowledged.
	HandlerAcked HandlerOutcome = iota + 1
	// HandlerRetried: the handler failed; the next attempt is scheduled.
	HandlerRetried
	// HandlerDeadLettered: the handler failed its last attempt or asked
	// for it; the message is in the dead letters.
	HandlerDeadLettered
	// HandlerDropped: the handler returned a [Drop] error.
	HandlerDropped
	// HandlerReclaimed: another consumer took the entry over before this
	// one settled it; the other one handles it.
	HandlerReclaimed
	// HandlerHandedBack: the drain timeout cancelled the handler at
	// shutdown; the entry was handed back to the group.
	HandlerHandedBack
	// HandlerUnsettled: settling a failure failed in Redis (logged); the
	// entry is taken over after the visibility timeout.
	HandlerUnsettled
)

// String returns the outcome's name ("acked", ...), as metrics label it.
func (o HandlerOutcome) String() string { return group.Outcome(o).String() }

// The reasons of dead letters ([DeadLetterEntry].Reason).
const (
	ReasonAttempts    = group.ReasonAttempts    // the last allowed attempt failed
	ReasonDeliveries  = group.ReasonDeliveries  // delivered too often: its consumers crashed
	ReasonHandler     = group.ReasonHandler     // the handler returned a [DeadLetter] error
	ReasonUndecodable = group.ReasonUndecodable // the entry or its payload could not be decoded
	ReasonDeleted     = group.ReasonDeleted     // the entry was deleted from the stream while pending
	ReasonExpired     = group.ReasonExpired     // its deadline passed before the group handled it
)

// Counters are what one process's consumer of a group has done since it
// was built ([Group.Counters]).
type Counters struct {
	Delivered           uint64 // entries handed to the handler (incl. taken-over ones)
	Acked               uint64 // handler succeeded and the acknowledgement went through
	Failed              uint64 // handler returned an error or panicked
	Retried             uint64 // failures scheduled for another attempt
	DeadLettered        uint64 // entries appended to the dead letters (all reasons)
	DeadLettersDropped  uint64 // old dead letters trimmed by the dead-letter cap
	Dropped             uint64 // handler returned a Drop error: acknowledged without retry
	Reclaimed           uint64 // entries taken over from other consumers
	DeletedWhilePending uint64 // pending entries found deleted from the stream (dead-lettered)
	HandedBack          uint64 // entries handed back to the group: at shutdown, at a pause, or claimed without a flow permit
	OwnershipLost       uint64 // handlers whose entry another consumer took over
	Panics              uint64 // handler panics (also counted in Failed)
	Expired             uint64 // messages past their deadline, dead-lettered unhandled
	// MemoryRefused counts the writes settling a failure (its retry, its
	// dead letter) that Redis refused for memory ([ErrOutOfMemory]): the
	// entry stays held and pending, and the write is tried again after a
	// pause, without running the handler again.
	MemoryRefused uint64
	// LimitWait is how long the consumer waited, with workers free, for
	// the group's flow limits ([WithConcurrencyLimit], [WithRateLimit]).
	LimitWait time.Duration
}

// Stats are the figures of a queue's waiting messages, by the Redis clock
// ([Queue.Stats]).
type Stats struct {
	Waiting int64     // scheduled, not yet promoted
	Overdue int64     // waiting past their due time (promotion is late or absent)
	NextDue time.Time // earliest waiting due time; zero when none
	Now     time.Time // the Redis clock when the figures were taken
	// Recurring is the number of recurring schedules defined (see
	// [Queue.DefineRecurring]).
	Recurring int64
	// PausedSince is when the queue's promotion was paused ([Queue.Pause]),
	// by the Redis clock; zero when it is not.
	PausedSince time.Time
	// Evicting are the servers whose maxmemory-policy can evict the
	// queue's keys (see [RedisMemory].Evicts); nil when none, or when
	// their settings cannot be read.
	Evicting []RedisMemory
}

// GroupStats are a group's figures from Redis ([Group.Stats]).
type GroupStats struct {
	Group         string
	Consumers     int64         // consumers known to the group
	Pending       int64         // delivered, not yet acknowledged
	OldestPending time.Duration // time since the oldest pending entry was appended to its stream (waiting to be read, then held); 0 when none
	Lag           int64         // entries due and not yet delivered to the group (-1 unknown)
	RetryWaiting  int64         // messages waiting for their next attempt
	DeadLetters   int64         // entries in the group's dead letters
	// PausedSince is when the group was paused ([Group.Pause]), by the
	// Redis clock; zero when it is not.
	PausedSince time.Time
}

func groupStats(s group.Stats) GroupStats {
	return GroupStats{Group: s.Group, Consumers: s.Consumers, Pending: s.Pending, OldestPending: s.OldestPending,
		Lag: s.Lag, RetryWaiting: s.RetryWaiting, DeadLetters: s.DeadLetters}
}

// DeadLetterEntry is one entry of a group's dead letters ([Group.DeadLetters],
// and the operator's listings).
type DeadLetterEntry struct {
	// EntryID identifies the dead letter: "<ms>-<seq>", whose time is when
	// it was dead-lettered, followed by "@<shard>" on a sharded queue.
	EntryID    string    `json:"entry_id"`
	Shard      int       `json:"shard"`      // the queue shard whose dead letters hold it
	At         time.Time `json:"at"`         // when it was dead-lettered (Redis clock)
	ID         string    `json:"id"`         // the message id; "" when undecodable
	Reason     string    `json:"reason"`     // one of the Reason constants
	LastError  string    `json:"last_error"` // the handler's (or decoder's) error text
	Attempt    int       `json:"attempt"`    // the attempt that failed
	Deliveries int64     `json:"deliveries"` // deliveries of the failed entry
	Source     string    `json:"source"`     // the stream it was read from
	SourceID   string    `json:"source_id"`  // its entry id there
	// Decoded says whether its envelope could be decoded: undecodable
	// ones cannot be redriven, and have no ID, Due, Created, Deadline or
	// Headers.
	Decoded  bool              `json:"decoded"`
	Due      time.Time         `json:"due,omitzero"`
	Created  time.Time         `json:"created,omitzero"`
	Deadline time.Time         `json:"deadline,omitzero"`
	Headers  map[string]string `json:"headers,omitempty"`
	// Size is the payload's length in bytes: whole, also when a listing
	// cut Payload (admin.ListOptions.MaxPayloadBytes).
	Size int `json:"size"`
	// Payload is the message's payload, or the stored bytes when
	// undecodable (base64 in JSON).
	Payload []byte `json:"payload"`
}

// Quarantined is one entry of a quarantine: a waiting message that
// promotion could not read, set aside in its lane's quarantine with a
// reason ([Queue.Quarantine], and the operator's listings).
type Quarantined struct {
	// EntryID is the quarantine stream's entry id, "<ms>-<seq>" (its time
	// is when it was quarantined), followed by "@<shard>" on a sharded
	// queue.
	EntryID string    `json:"entry_id"`
	Shard   int       `json:"shard"`
	Lane    string    `json:"lane"` // "main", or "retry:<group>" for a group's retry lane
	At      time.Time `json:"at"`   // when it was set aside (Redis clock)
	ID      string    `json:"id"`   // the message id, "" when unknown
	// Due is when it was due (the member's score); zero when the score
	// was not a due time.
	Due time.Time `json:"due,omitzero"`
	// Reason says why: "unknown member format", "malformed packed member",
	// "unknown envelope format", "missing envelope" or "invalid due time".
	Reason string `json:"reason"`
	Raw    []byte `json:"raw"` // the envelope bytes found, if any (base64 in JSON)
	// Payload is the message's payload when Raw decodes as an envelope
	// (cut as Raw is in an operator's listing with MaxPayloadBytes); nil
	// otherwise.
	Payload []byte `json:"payload,omitempty"`
	// Member is the raw waiting-set member, when it was not a plain id.
	Member []byte `json:"member,omitempty"`
	// Size is the length in bytes of Raw as stored, or of Member when
	// there is no Raw: whole, also when a listing cut them.
	Size int `json:"size"`
}

// Content returns what a preview of q shows: its payload when its
// envelope decodes, else the raw envelope, else the member.
func (q Quarantined) Content() []byte {
	switch {
	case q.Payload != nil:
		return q.Payload
	case len(q.Raw) > 0:
		return q.Raw
	}
	return q.Member
}
