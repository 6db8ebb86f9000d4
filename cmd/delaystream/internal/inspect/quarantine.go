package inspect

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/delaystream/delaystream/internal/stream"
)

// Quarantined is a delayed-set member the mover could not promote, kept
// in a lane's quarantine stream with a reason.
type Quarantined struct {
	// EntryID is the quarantine stream's entry id, "<ms>-<seq>" (its time
	// is when it was quarantined), followed by "@<shard>" on a sharded
	// queue.
	EntryID string    `json:"entry_id"`
	Shard   int       `json:"shard"`
	Lane    string    `json:"lane"` // "main", or "retry:<group>" for a group's retry lane
	At      time.Time `json:"at"`
	ID      string    `json:"id"`           // the message id, "" when unknown
	Due     time.Time `json:"due,omitzero"` // the member's score, when it was a due time
	Reason  string    `json:"reason"`       // a stream.Reason* constant
	Raw     []byte    `json:"raw"`          // the envelope bytes found, if any (base64 in JSON)
	Member  []byte    `json:"member,omitempty"`
	Preview string    `json:"preview"` // of Raw, or of Member when there is no Raw
}

// Quarantine lists up to limit (0 means 100) quarantined entries of queue:
// its main lanes, shard by shard, then the retry lanes of its groups,
// each oldest first.
func (in *Inspector) Quarantine(ctx context.Context, queue string, limit int) ([]Quarantined, error) {
	if limit == 0 {
		limit = 100
	}
	if limit < 0 {
		return nil, fmt.Errorf("%w: negative limit %d", ErrInvalid, limit)
	}
	h, err := in.open(ctx, queue)
	if err != nil {
		return nil, err
	}
	groups, err := in.groupNames(ctx, h)
	if err != nil {
		return nil, err
	}
	type lane struct {
		name, key string
		shard     int
	}
	var lanes []lane
	for i := range h.layout.Shards() {
		lanes = append(lanes, lane{"main", h.layout.Shard(i).Main().Quarantine, i})
	}
	for _, g := range groups {
		for i := range h.layout.Shards() {
			lanes = append(lanes, lane{"retry:" + g, h.layout.Shard(i).Retry(g).Quarantine, i})
		}
	}
	out := []Quarantined{}
	for _, l := range lanes {
		if len(out) >= limit {
			break
		}
		qs, err := stream.ReadQuarantine(ctx, in.rdb, l.key, "", int64(limit-len(out)))
		if err != nil {
			return nil, fmt.Errorf("quarantine of %s: %w", queue, err)
		}
		for _, q := range qs {
			e := Quarantined{EntryID: q.EntryID, Shard: l.shard, Lane: l.name, At: stream.EntryTime(q.EntryID),
				ID: q.MessageID, Due: q.Due, Reason: q.Reason, Raw: q.Raw, Member: q.Member}
			if h.layout.Shards() > 1 {
				e.EntryID += "@" + strconv.Itoa(l.shard)
			}
			if len(q.Raw) > 0 {
				e.Preview = Preview(q.Raw, PreviewLen)
			} else {
				e.Preview = Preview(q.Member, PreviewLen)
			}
			out = append(out, e)
		}
	}
	slices.SortStableFunc(out, func(a, b Quarantined) int { return a.At.Compare(b.At) })
	return out, nil
}
