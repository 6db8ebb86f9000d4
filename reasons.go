package delaystream

import (
	"fmt"
	"strconv"
	"strings"
)

// ReasonOther is the label of a dead-letter reason this release does not
// know ([ReasonLabel]).
const ReasonOther = "other"

// reasonTable is the one table of dead-letter reasons: the stored reason
// ([DeadLetterEntry].Reason, what listings show) and its short label (what
// metrics label it with). Filters take either.
var reasonTable = []struct{ reason, label string }{
	{ReasonAttempts, "attempts"},
	{ReasonDeliveries, "deliveries"},
	{ReasonHandler, "handler"},
	{ReasonUndecodable, "undecodable"},
	{ReasonDeleted, "deleted"},
	{ReasonExpired, "expired"},
}

// Reasons returns the dead-letter reasons, as stored and listed.
func Reasons() []string {
	out := make([]string, len(reasonTable))
	for i, r := range reasonTable {
		out[i] = r.reason
	}
	return out
}

// ReasonLabel returns the short label of dead-letter reason ("attempts"
// for [ReasonAttempts], ...), as metrics label it; [ReasonOther] for a
// reason this release does not know. A label is returned as it is.
func ReasonLabel(reason string) string {
	for _, r := range reasonTable {
		if r.reason == reason || r.label == reason {
			return r.label
		}
	}
	return ReasonOther
}

// ParseReason returns the stored dead-letter reason s names, in either
// spelling: as stored and listed ("attempts exhausted") or as labelled
// ("attempts"), ignoring case. Anything else is an error wrapping
// [ErrInvalidOption] that names the valid values.
func ParseReason(s string) (string, error) {
	t := strings.TrimSpace(s)
	for _, r := range reasonTable {
		if strings.EqualFold(t, r.reason) || strings.EqualFold(t, r.label) {
			return r.reason, nil
		}
	}
	valid := make([]string, len(reasonTable))
	for i, r := range reasonTable {
		valid[i] = strconv.Quote(r.label) + " (" + strconv.Quote(r.reason) + ")"
	}
	return "", fmt.Errorf("%w: unknown dead-letter reason %q: want one of %s", ErrInvalidOption, s, strings.Join(valid, ", "))
}
