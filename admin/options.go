package admin

import (
	"fmt"
	"slices"
	"time"

	"github.com/delaystream/delaystream"
)

// defaultLimit is the Limit of a listing given 0.
const defaultLimit = 100

// ListOptions select what a listing returns: [Operator.Peek] takes IDs or
// Limit and MaxPayloadBytes, [Operator.Quarantine] takes Limit and
// MaxPayloadBytes, [Operator.DeadLetters] takes every field. A field the
// listing does not take fails the call with an error wrapping
// delaystream.ErrInvalidOption. The zero value lists the first 100
// entries, payloads whole.
type ListOptions struct {
	// IDs, when not empty, lists exactly these entries, in this order:
	// message ids for Peek, entry ids (as listed) for DeadLetters. An id
	// that names nothing fails the call with an error wrapping
	// delaystream.ErrNotFound. Not with the other fields.
	IDs []string
	// Limit is the most entries returned; 0 means 100. Peek takes at most
	// [MaxPeek].
	Limit int
	// After starts the listing after this entry id, as listed ("" for the
	// oldest, or with Newest the newest), to page through dead letters.
	After string
	// Newest lists dead letters newest first (After then pages towards
	// older ones). Default false: oldest first.
	Newest bool
	// From and To narrow dead letters down to those dead-lettered at or
	// after From and before To; a zero time is no bound.
	From, To time.Time
	// Reason narrows dead letters down to those with exactly this reason,
	// as listings show it (see the package doc); "" takes any. A reason no
	// dead letter can have fails the call.
	Reason string
	// MaxPayloadBytes, when above 0, makes a listing by Limit read at most
	// this many bytes of each payload, for previews: Payload (and a
	// quarantined entry's Raw and Member) then holds at most its first
	// MaxPayloadBytes bytes (an envelope's headers are always read whole),
	// while Size keeps the whole length. The cut is made in Redis, by a
	// read-only script (EVALSHA/EVAL running ZRANGE, HGET and XRANGE, which
	// the operator's ACL rules hold), so a listing of large messages costs
	// neither the network nor this process their size. Default 0: payloads
	// whole. Negative, or with IDs, fails the call.
	MaxPayloadBytes int
}

// ActionOptions say what an action takes and how. [Operator.Redrive] and
// [Operator.Purge] take the dead letters IDs names, or with All every one
// that From, To and Reason match (with those zero: all of them), and
// DryRun; Redrive also takes Delay. [Operator.Cancel] takes the waiting
// messages IDs names and those whose id starts with IDPrefix, and DryRun.
// [Operator.DeleteQueue] takes Force and DryRun. A field the action does
// not take fails the call with an error wrapping
// delaystream.ErrInvalidOption.
type ActionOptions struct {
	// IDs are the dead letters' entry ids, as listed (Redrive, Purge:
	// exactly one of IDs and All must be given), or the waiting messages'
	// ids (Cancel).
	IDs []string
	// All takes every dead letter present when the action starts that
	// From, To and Reason match.
	All bool
	// From, To and Reason narrow All down as in [ListOptions].
	From, To time.Time
	Reason   string
	// IDPrefix takes every waiting message whose id starts with it
	// (Cancel): messages with ids of their own, as generated ids have no
	// prefix of the caller's.
	IDPrefix string
	// DryRun resolves the selection and reports it, writing nothing.
	DryRun bool
	// Delay makes each redriven message due this long after the call, by
	// the Redis clock. Default 0: at once. It must not be negative.
	Delay time.Duration
	// Force deletes the queue even while it is in use (DeleteQueue): its
	// live consumers and promoting processes recreate some keys and fail
	// on others.
	Force bool
}

// only refuses the fields of o that action does not take: any beyond
// those takes names ("ids", "all", "filter", "prefix", "dry", "delay",
// "force").
func (o ActionOptions) only(action string, takes ...string) error {
	given := map[string]bool{"ids": len(o.IDs) > 0, "all": o.All, "filter": !o.filter().empty(), "prefix": o.IDPrefix != "",
		"dry": o.DryRun, "delay": o.Delay != 0, "force": o.Force}
	for _, name := range []string{"ids", "all", "filter", "prefix", "dry", "delay", "force"} {
		if given[name] && !slices.Contains(takes, name) {
			return fmt.Errorf("%w: %s takes no %s", delaystream.ErrInvalidOption, action, optionNames[name])
		}
	}
	return nil
}

var optionNames = map[string]string{"ids": "IDs", "all": "All", "filter": "From, To or Reason", "prefix": "IDPrefix",
	"dry": "DryRun", "delay": "Delay", "force": "Force"}

// filter narrows dead letters down; the zero filter takes every one.
type filter struct {
	from, to time.Time
	reason   string
}

func (f filter) match(d delaystream.DeadLetterEntry) bool {
	return (f.from.IsZero() || !d.At.Before(f.from)) && (f.to.IsZero() || d.At.Before(f.to)) &&
		(f.reason == "" || d.Reason == f.reason)
}

func (f filter) empty() bool { return f == filter{} }

// check refuses a reason no dead letter can have, naming the valid ones.
func (f filter) check() error {
	if f.reason == "" {
		return nil
	}
	_, err := delaystream.ParseReason(f.reason)
	return err
}

func (o ListOptions) filter() filter { return filter{o.From, o.To, storedReason(o.Reason)} }

func (o ActionOptions) filter() filter { return filter{o.From, o.To, storedReason(o.Reason)} }

// storedReason returns the stored reason r names in either spelling
// (delaystream.ParseReason), or r as it is when it names none (check
// refuses it).
func storedReason(r string) string {
	if s, err := delaystream.ParseReason(r); err == nil {
		return s
	}
	return r
}

// check validates o for a listing that takes IDs (byID), After and the
// filter (paged) or neither, and a Limit up to maxLimit.
func (o ListOptions) check(what string, byID, paged bool, maxLimit int) error {
	var bad string
	switch {
	case len(o.IDs) > 0 && !byID:
		bad = "no IDs"
	case len(o.IDs) > 0 && (o.Limit != 0 || o.MaxPayloadBytes != 0 || o.paging()):
		bad = "IDs alone, without Limit, After, Newest, a filter or MaxPayloadBytes"
	case !paged && o.paging():
		bad = "no After, Newest or filter (From, To, Reason)"
	case o.Limit < 0:
		bad = fmt.Sprintf("no negative limit (%d)", o.Limit)
	case o.Limit > maxLimit:
		bad = fmt.Sprintf("a limit of at most %d, not %d", maxLimit, o.Limit)
	case o.MaxPayloadBytes < 0:
		bad = fmt.Sprintf("no negative MaxPayloadBytes (%d)", o.MaxPayloadBytes)
	}
	if bad != "" {
		return fmt.Errorf("%w: %s takes %s", delaystream.ErrInvalidOption, what, bad)
	}
	return o.filter().check()
}

// paging reports whether o sets After, Newest or a filter.
func (o ListOptions) paging() bool { return o.After != "" || o.Newest || !o.filter().empty() }

// limit returns o.Limit, or the default for 0.
func (o ListOptions) limit() int {
	if o.Limit == 0 {
		return defaultLimit
	}
	return o.Limit
}
