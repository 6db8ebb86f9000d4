package group

import (
	"bytes"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream/codec"
	"github.com/delaystream/delaystream/internal/wire"
)

// deadLettersOf returns a handle on the dead letters of a queue of n
// shards, enough for parsing ids (it talks to no server).
func deadLettersOf(n int) *DeadLetters {
	return &DeadLetters{group: "g", shards: make([]deadShard, n)}
}

// deadRefRE is the syntax of dead-letter ids: a stream entry id, then on a
// sharded queue "@" and the shard in canonical decimal.
var deadRefRE = regexp.MustCompile(`^([0-9]+)-([0-9]+)(?:@(0|[1-9][0-9]*))?$`)

// FuzzParseRef feeds any string to parseRef on queues of 1 to 1024 shards:
// it never panics; it accepts exactly "<ms>-<seq>" (64-bit decimals) on an
// unsharded queue and "<ms>-<seq>@<shard>" with an existing shard on a
// sharded one, and refuses anything else with an error wrapping
// ErrInvalidOption; what it accepts is the id List would return for that
// entry, so the shard is never misread.
func FuzzParseRef(f *testing.F) {
	for _, c := range []struct {
		s string
		n uint16
	}{
		{"1700000000000-0", 0}, {"1700000000000-0@3", 7}, {"0-0@0", 1}, {"5-1@1023", 1023},
		{"18446744073709551615-18446744073709551615", 0}, {"18446744073709551616-0", 0},
		{"1-0@", 3}, {"1-0@01", 3}, {"1-0@-1", 3}, {"1-0@+1", 3}, {"1-0@3", 2}, {"1-0@1", 0},
		{"1-0@1@1", 3}, {"1-0", 3}, {"", 0}, {"-", 0}, {"1", 0}, {"1-", 0}, {"-1", 0}, {"+1-0", 0},
		{"1-+0", 0}, {"1-0 ", 0}, {"1-0-0", 0}, {"1-0@9223372036854775808", 3}, {"١-٠", 0},
	} {
		f.Add(c.s, c.n)
	}

	f.Fuzz(func(t *testing.T, s string, n uint16) {
		shards := 1 + int(n)%1024
		d := deadLettersOf(shards)
		ref, err := d.parseRef(s)

		m := deadRefRE.FindStringSubmatch(s)
		valid := m != nil && (shards == 1) == (m[3] == "")
		if valid {
			_, err1 := strconv.ParseUint(m[1], 10, 64)
			_, err2 := strconv.ParseUint(m[2], 10, 64)
			sh, err3 := strconv.Atoi(m[3])
			valid = err1 == nil && err2 == nil && (shards == 1 || err3 == nil && sh < shards)
		}
		if err != nil {
			if !errors.Is(err, ErrInvalidOption) {
				t.Fatalf("parseRef(%q) with %d shards: error %v does not wrap ErrInvalidOption", s, shards, err)
			}
			if valid {
				t.Fatalf("parseRef(%q) with %d shards refused a valid id: %v", s, shards, err)
			}
			return
		}
		if !valid {
			t.Fatalf("parseRef(%q) with %d shards accepted an invalid id as %+v", s, shards, ref)
		}
		if ref.shard < 0 || ref.shard >= shards {
			t.Fatalf("parseRef(%q) gave shard %d of %d", s, ref.shard, shards)
		}
		if back := d.parse(ref.shard, redis.XMessage{ID: ref.id}).EntryID; back != s {
			t.Fatalf("parseRef(%q) = %+v, which List names %q", s, ref, back)
		}
		if compareIDs(s, ref.id) != 0 {
			t.Fatalf("%q and its entry id %q do not compare equal", s, ref.id)
		}
	})
}

// FuzzDeadLetterID names a dead letter of any entry id and shard as List
// does and parses the name back: the entry id and shard come back exactly,
// and a queue with another shard layout refuses the name instead of
// reading it as some other entry.
func FuzzDeadLetterID(f *testing.F) {
	f.Add(uint64(1_700_000_000_000), uint64(0), uint16(0), uint16(0))
	f.Add(uint64(0), uint64(0), uint16(3), uint16(7))
	f.Add(^uint64(0), ^uint64(0), uint16(1023), uint16(1023))
	f.Add(uint64(5), uint64(10), uint16(2000), uint16(1))

	f.Fuzz(func(t *testing.T, ms, seq uint64, shard, n uint16) {
		shards := 1 + int(n)%1024
		i := int(shard) % shards
		id := strconv.FormatUint(ms, 10) + "-" + strconv.FormatUint(seq, 10)
		d := deadLettersOf(shards)
		e := d.parse(i, redis.XMessage{ID: id})
		if e.Shard != i {
			t.Fatalf("dead letter %s of shard %d names shard %d", id, i, e.Shard)
		}
		ref, err := d.parseRef(e.EntryID)
		if err != nil {
			t.Fatalf("parseRef(%q), %d shards: %v", e.EntryID, shards, err)
		}
		if ref != (deadRef{id: id, shard: i}) {
			t.Fatalf("dead letter %s of shard %d named %q, parsed as %+v", id, i, e.EntryID, ref)
		}
		if compareIDs(e.EntryID, id) != 0 || e.At() != wire.EntryTime(id) {
			t.Fatalf("name %q does not order or date like entry %s", e.EntryID, id)
		}
		other := deadLettersOf(1)
		if shards == 1 {
			other = deadLettersOf(2)
		}
		if ref, err := other.parseRef(e.EntryID); !errors.Is(err, ErrInvalidOption) {
			t.Fatalf("%q (%d shards) parsed on a queue of %d shards as %+v, %v", e.EntryID, shards, len(other.shards), ref, err)
		}
	})
}

// FuzzParseDeadLetter feeds any dead-letter entry (each of "i", "d", "e"
// and "p" present or not) to parseDeadLetter: it never panics, keeps the
// stored bytes, and names the message as the stream entry would decode:
// a retry-lane member ("<id>\x1f<entry id>") gives its message id, never
// the member itself, whether or not the envelope decodes.
func FuzzParseDeadLetter(f *testing.F) {
	const all = 0xF
	env := string(wire.MarshalEnvelope(&codec.Envelope{Attempt: 3, Payload: []byte("x")}))
	f.Add(uint8(0b0111), "order:5001", "1700000000000", env, "")
	f.Add(uint8(0b0111), wire.RetryMember("order:5001", "1700000000000-0"), "1700000000000", env, "")
	f.Add(uint8(0b0111), wire.RetryMember("order:5001", "1700000000000-0"), "1700000000000", "\xd5\x01\x80", "")
	f.Add(uint8(0b0011), wire.RetryMember("order:5001", "1-0"), "soon", "", "")
	f.Add(uint8(0b1010), "", "1700000000000", "", "\x01ABCDEFGHJKMNPQRS"+env)
	f.Add(uint8(0b1010), "", "1700000000000", "", "\x01short")
	f.Add(uint8(all), wire.RetrySep, "5", env, "\x01ABCDEFGHJKMNPQRS"+env)
	f.Add(uint8(0), "", "", "", "")

	f.Fuzz(func(t *testing.T, fields uint8, id, due, envelope, packed string) {
		values := map[string]any{wire.FieldReason: "handler failed", fieldError: "boom", fieldAttempt: "3"}
		for bit, kv := range []struct{ k, v string }{
			{wire.FieldID, id}, {wire.FieldDue, due}, {wire.FieldEnvelope, envelope}, {wire.FieldPacked, packed},
		} {
			if fields&(1<<bit) != 0 {
				values[kv.k] = kv.v
			}
		}
		hasID, hasEnv, hasPacked := fields&1 != 0, fields&4 != 0, fields&8 != 0

		dl := parseDeadLetter(redis.XMessage{ID: "1-0", Values: values})
		if dl.EntryID != "1-0" || dl.Reason != "handler failed" || dl.LastError != "boom" || dl.Attempt != 3 {
			t.Fatalf("dead letter read as %+v", dl)
		}
		var wantRaw string
		switch {
		case hasEnv:
			wantRaw = envelope
		case hasPacked:
			wantRaw = packed
		}
		if !bytes.Equal(dl.Raw, []byte(wantRaw)) {
			t.Fatalf("raw %q, want %q", dl.Raw, wantRaw)
		}
		if strings.Contains(dl.Envelope.ID, wire.RetrySep) {
			t.Fatalf("message id %q keeps the retry member's entry id", dl.Envelope.ID)
		}
		e, err := wire.Decode("1-0", "1-0", values)
		if dl.Decoded != (err == nil && (hasEnv || hasPacked)) {
			t.Fatalf("decoded %v, wire.Decode says %v", dl.Decoded, err)
		}
		if dl.Decoded {
			if dl.Envelope.ID != e.Envelope.ID || !dl.Envelope.Due.Equal(e.Envelope.Due) || dl.Envelope.Attempt != e.Envelope.Attempt {
				t.Fatalf("envelope %+v, the entry decodes as %+v", dl.Envelope, e.Envelope)
			}
			return
		}
		want := ""
		if hasID {
			want, _, _ = strings.Cut(id, wire.RetrySep)
		}
		if dl.Envelope.ID != want {
			t.Fatalf("undecodable entry with id %q named %q, want %q", id, dl.Envelope.ID, want)
		}
	})
}
