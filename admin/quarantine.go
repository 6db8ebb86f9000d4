package admin

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream/codec"
	"github.com/delaystream/delaystream/internal/stream"
	"github.com/delaystream/delaystream/internal/wire"
)

// QuarantineEntry is a delayed-set member the mover could not promote,
// kept in a lane's quarantine stream with a reason.
type QuarantineEntry struct {
	// EntryID is the quarantine stream's entry id, "<ms>-<seq>" (its time
	// is when it was quarantined), followed by "@<shard>" on a sharded
	// queue.
	EntryID string    `json:"entry_id"`
	Shard   int       `json:"shard"`
	Lane    string    `json:"lane"` // "main", or "retry:<group>" for a group's retry lane
	At      time.Time `json:"at"`
	ID      string    `json:"id"`           // the message id, "" when unknown
	Due     time.Time `json:"due,omitzero"` // the member's score, when it was a due time
	// Reason says why: "unknown member format", "malformed packed member",
	// "unknown envelope format", "missing envelope" or "invalid due time".
	Reason string `json:"reason"`
	Raw    []byte `json:"raw"` // the envelope bytes found, if any (base64 in JSON)
	// Payload is the message's payload when Raw decodes as an envelope
	// (cut as Raw is by MaxPayloadBytes), for previews; nil otherwise.
	Payload []byte `json:"payload,omitempty"`
	Member  []byte `json:"member,omitempty"`
	// Size is the length in bytes of Raw as stored, or of Member when
	// there is no Raw: whole, also when MaxPayloadBytes cut them.
	Size int `json:"size"`
}

// Content returns what a preview of q shows: its payload when its
// envelope decodes, else the raw envelope, else the member.
func (q QuarantineEntry) Content() []byte {
	switch {
	case q.Payload != nil:
		return q.Payload
	case len(q.Raw) > 0:
		return q.Raw
	}
	return q.Member
}

// lane is one quarantine stream of a queue.
type lane struct {
	name, key string
	shard     int
}

// Quarantine lists up to opts.Limit (0 means 100; it takes no other
// field but MaxPayloadBytes, see [ListOptions]) quarantined entries of
// queue, oldest first: those of its main lanes, then of the retry lanes
// of its groups.
func (in *Inspector) Quarantine(ctx context.Context, queue string, opts ListOptions) ([]QuarantineEntry, error) {
	if err := opts.check("Quarantine", false, false, math.MaxInt); err != nil {
		return nil, err
	}
	h, err := in.open(ctx, queue)
	if err != nil {
		return nil, err
	}
	groups, err := in.groupNames(ctx, h)
	if err != nil {
		return nil, err
	}
	var lanes []lane
	for i := range h.layout.Shards() {
		lanes = append(lanes, lane{"main", h.layout.Shard(i).Main().Quarantine, i})
	}
	for _, g := range groups {
		if stream.ValidateName("group", g) != nil {
			continue // a group created outside delaystream has no retry lane
		}
		for i := range h.layout.Shards() {
			lanes = append(lanes, lane{"retry:" + g, h.layout.Shard(i).Retry(g).Quarantine, i})
		}
	}
	out := []QuarantineEntry{}
	limit := opts.limit()
	for _, l := range lanes {
		if len(out) >= limit {
			break
		}
		qs, err := readQuarantine(ctx, in.rdb, l.key, int64(limit-len(out)), opts.MaxPayloadBytes)
		if err != nil {
			return nil, fmt.Errorf("quarantine of %s: %w", queue, err)
		}
		for _, q := range qs {
			e := QuarantineEntry{EntryID: q.EntryID, Shard: l.shard, Lane: l.name, At: stream.EntryTime(q.EntryID),
				ID: q.MessageID, Due: q.Due, Reason: q.Reason, Raw: q.Raw, Member: q.Member, Size: q.MemberSize}
			if len(q.Raw) > 0 {
				e.Size = q.RawSize
				var env codec.Envelope
				if wire.UnmarshalEnvelope(q.Raw, &env) == nil {
					e.Payload = env.Payload
				}
			}
			if h.layout.Shards() > 1 {
				e.EntryID += "@" + strconv.Itoa(l.shard)
			}
			out = append(out, e)
		}
	}
	slices.SortStableFunc(out, func(a, b QuarantineEntry) int { return a.At.Compare(b.At) })
	return out, nil
}

// readQuarantine reads up to count entries of the quarantine stream key,
// cut to maxPayload bytes of each payload when it is above 0.
func readQuarantine(ctx context.Context, rdb redis.UniversalClient, key string, count int64, maxPayload int) ([]stream.CutQuarantined, error) {
	if maxPayload > 0 {
		return stream.ReadQuarantineCut(ctx, rdb, key, "", count, maxPayload)
	}
	qs, err := stream.ReadQuarantine(ctx, rdb, key, "", count)
	out := make([]stream.CutQuarantined, len(qs))
	for i, q := range qs {
		out[i] = stream.CutQuarantined{Quarantined: q, RawSize: len(q.Raw), MemberSize: len(q.Member)}
	}
	return out, err
}
