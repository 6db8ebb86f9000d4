package stream_test

import (
	"encoding/hex"
	"encoding/json"
	"flag"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/codec"
	"github.com/delaystream/delaystream/internal/stream"
	"github.com/delaystream/delaystream/internal/wire"
)

var updateVectors = flag.Bool("update-vectors", false, "rewrite "+vectorsFile+" from the Go code")

// vectorsFile holds the wire format's test vectors that every client's
// tests read (docs/wire.md, "Test vectors").
const vectorsFile = "../wire/testdata/vectors.json"

// vectors are what docs/wire.md's test vectors section lists: shard of an
// id, cluster slot of a key, shard tags, and envelope bytes.
type vectors struct {
	ShardOf   []shardVector     `json:"shard_of"`
	Slots     []slotVector      `json:"slots"`
	Tags      []tagVector       `json:"tags"`
	Envelopes []envelopeVector  `json:"envelopes"`
	Generated []generatedVector `json:"generated_ids"`
}

// generatedVector is a generated id from its due time and random bytes,
// and its packed member with envelope V1.
type generatedVector struct {
	DueMs        int64  `json:"due_ms"`
	RandomHex    string `json:"random_bytes_hex,omitempty"` // the 10 random bytes, when the random part is made from them
	Random       string `json:"random"`                     // the id's random part
	ID           string `json:"id"`
	PackedMember string `json:"packed_member_hex"`
}

type shardVector struct {
	ID     string `json:"id"`
	Shards int    `json:"shards"`
	Shard  int    `json:"shard"`
}

type slotVector struct {
	Key  string `json:"key"`
	Slot int    `json:"slot"`
}

type tagVector struct {
	Queue  string `json:"queue"`
	Shards int    `json:"shards"`
	Shard  int    `json:"shard"`
	Tag    string `json:"tag"`
}

type envelopeVector struct {
	Attempt    int               `json:"attempt"`
	CreatedMs  int64             `json:"created_ms,omitempty"` // 0: no creation time
	DeadlineMs int64             `json:"deadline_ms,omitempty"`
	Headers    map[string]string `json:"headers,omitempty"`
	PayloadHex string            `json:"payload_hex"`
	Hex        string            `json:"hex"`
}

// generateVectors computes the vectors from the Go code.
func generateVectors(t *testing.T) vectors {
	t.Helper()
	var v vectors
	ids := []string{"anything", "order:5001:cancel", "01HF7YAT00RC8JEFXHRF88SGQA", "01JD0000000000000000000000",
		"8ZZZZZZZZZZZZZZZZZZZZZZZZZ", "01jd0000000000000000000000"}
	for _, id := range ids {
		for _, n := range []int{1, 2, 3, 16, 1024} {
			v.ShardOf = append(v.ShardOf, shardVector{ID: id, Shards: n, Shard: wire.ShardOf(id, n)})
		}
	}
	for _, k := range []string{"123456789", "foo", "bar", "", "{orders}:z", "ds:1:{q:0.57}:s"} {
		v.Slots = append(v.Slots, slotVector{Key: k, Slot: wire.Slot(k)})
	}
	for _, q := range []struct {
		queue string
		n     int
	}{{"orders", 1}, {"orders", 2}, {"orders", 16}, {"q", 4}, {"billing:eu", 3}} {
		for i := range q.n {
			k, err := stream.NewKeys("ds", q.queue, i, q.n)
			require.NoError(t, err)
			v.Tags = append(v.Tags, tagVector{Queue: q.queue, Shards: q.n, Shard: i, Tag: k.Tag()})
		}
	}
	v1 := wire.MarshalEnvelope(&codec.Envelope{Attempt: 1, Payload: []byte("p")})
	for _, g := range []struct {
		due    int64
		rnd    *[10]byte // nil: random is given
		random string
	}{
		{due: 0, rnd: &[10]byte{}},
		{due: 1<<48 - 1, rnd: &[10]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}},
		{due: 1700000000000, rnd: &[10]byte{0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0x01}},
		{due: 1700000000000, random: "RC8JEFXHRF88SGQA"},
	} {
		gv := generatedVector{DueMs: g.due, Random: g.random}
		if g.rnd != nil {
			gv.RandomHex, gv.Random = hex.EncodeToString(g.rnd[:]), string(wire.AppendRandomPart(nil, *g.rnd))
		}
		gv.ID = wire.GeneratedID(g.due, gv.Random)
		gv.PackedMember = hex.EncodeToString(append(append([]byte{0x01}, gv.Random...), v1...))
		v.Generated = append(v.Generated, gv)
	}
	// docs/wire.md's envelope vectors V1 to V4.
	for _, e := range []codec.Envelope{
		{Attempt: 1, Payload: []byte("p")},
		{Attempt: 2, Created: time.UnixMilli(1), Headers: map[string]string{"k": "v"}, Payload: []byte("hi")},
		{Attempt: 1, Deadline: time.UnixMilli(5), Payload: []byte("p")},
		{Attempt: 1, Created: time.UnixMilli(1700000000123), Headers: map[string]string{"trace": "abc", "tenant": "t1"}, Payload: []byte("p")},
	} {
		ev := envelopeVector{Attempt: e.Attempt, Headers: e.Headers,
			PayloadHex: hex.EncodeToString(e.Payload), Hex: hex.EncodeToString(wire.MarshalEnvelope(&e))}
		if !e.Created.IsZero() {
			ev.CreatedMs = e.Created.UnixMilli()
		}
		if !e.Deadline.IsZero() {
			ev.DeadlineMs = e.Deadline.UnixMilli()
		}
		v.Envelopes = append(v.Envelopes, ev)
	}
	return v
}

// The shared test vectors file is what the Go code computes (go test
// -run TestVectors ./internal/stream -update-vectors rewrites it), and its
// envelopes decode back to what they encode.
func TestVectors(t *testing.T) {
	t.Parallel()
	want := generateVectors(t)
	b, err := json.MarshalIndent(want, "", "  ")
	require.NoError(t, err)
	b = append(b, '\n')
	if *updateVectors {
		require.NoError(t, os.WriteFile(vectorsFile, b, 0o644))
	}
	got, err := os.ReadFile(vectorsFile)
	require.NoError(t, err, "run go test -run TestVectors ./internal/stream -update-vectors")
	require.JSONEq(t, string(b), string(got), "the vectors file differs from what the Go code computes")
	// The bytes docs/wire.md spells out.
	docHex := []string{"d5010100 0070", "d5010202 01016b01 766869", "d5020100 0a0070",
		"d50101f6 a1abfef9 62020674 656e616e 74027431 05747261 63650361 626370"}
	for k, ev := range want.Envelopes {
		require.Equal(t, strings.ReplaceAll(docHex[k], " ", ""), ev.Hex, "docs/wire.md's V%d", k+1)
		raw, err := hex.DecodeString(ev.Hex)
		require.NoError(t, err)
		var e codec.Envelope
		require.NoError(t, wire.UnmarshalEnvelope(raw, &e))
		require.Equal(t, ev.Attempt, e.Attempt)
		require.Equal(t, ev.PayloadHex, hex.EncodeToString(e.Payload))
		require.Equal(t, ev.Headers, e.Headers)
	}
}
