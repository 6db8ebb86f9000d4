package wire_test

import (
	"bytes"
	"cmp"
	"hash/fnv"
	"regexp"
	"strings"
	"testing"

	"github.com/delaystream/delaystream/codec"
	"github.com/delaystream/delaystream/internal/wire"
)

// Oracles for the layout of generated ids, written from ids.lua (its RANDOM
// pattern and genparts) rather than from wire's own tables, so that the Go
// and Lua readings of a member cannot drift apart unnoticed.
var (
	randomRE    = regexp.MustCompile(`^[0-9A-HJKMNP-TV-Z]{16}$`)
	generatedRE = regexp.MustCompile(`^[0-7][0-9A-HJKMNP-TV-Z]{25}$`)
)

// maxDue is the largest due time a generated id can carry (48 bits).
const maxDue = 1<<48 - 1

// b32Value returns the value of a Crockford base32 digit (upper case).
func b32Value(c byte) int64 {
	return int64(strings.IndexByte("0123456789ABCDEFGHJKMNPQRSTVWXYZ", c))
}

// timePart decodes the due time (Unix ms) of an id in the generated layout.
func timePart(id string) int64 {
	var ms int64
	for i := range 10 {
		ms = ms<<5 | b32Value(id[i])
	}
	return ms
}

// randomBits decodes the 80 bits a random part was made from: the inverse
// of wire.AppendRandomPart.
func randomBits(random string) (out [10]byte) {
	var hi, lo uint64 // 80 bits: the top 16 in hi
	for i := range 16 {
		hi = hi<<5 | lo>>59
		lo = lo<<5 | uint64(b32Value(random[i]))
	}
	out[0], out[1] = byte(hi>>8), byte(hi)
	for i := range 8 {
		out[2+i] = byte(lo >> (56 - 8*i))
	}
	return out
}

// fnv1a is FNV-1a (32 bits) spelled out: ShardOf must stay exactly this
// hash, the same in every process and release.
func fnv1a(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}

// FuzzGeneratedID builds generated ids from any due time and 80 random
// bits: the random part is 16 base32 characters that decode to the same
// bits; the id has the generated layout, decodes to its due time and random
// part, sorts by due time among ids of one random part, and has the shard
// of its random part whatever its due time.
func FuzzGeneratedID(f *testing.F) {
	f.Add(int64(0), []byte{}, int64(0))
	f.Add(int64(1_700_000_000_000), []byte("0123456789"), int64(1_700_000_000_001))
	f.Add(int64(maxDue), bytes.Repeat([]byte{0xFF}, 10), int64(0))
	f.Add(int64(253402300799999), []byte{0x80, 0, 0, 0, 0, 0, 0, 0, 0, 1}, int64(-1))
	f.Add(int64(-1), []byte{1, 2, 3}, int64(1<<62))
	f.Add(int64(31), []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 31}, int64(32))

	f.Fuzz(func(t *testing.T, due int64, rnd []byte, other int64) {
		var r [10]byte
		copy(r[:], rnd)
		random := string(wire.AppendRandomPart(nil, r))
		if !randomRE.MatchString(random) {
			t.Fatalf("random part %q of %x is not 16 base32 characters", random, r)
		}
		if got := randomBits(random); got != r {
			t.Fatalf("random part %q decodes to %x, made from %x", random, got, r)
		}
		if got := string(wire.AppendRandomPart([]byte("x"), r)); got != "x"+random {
			t.Fatalf("AppendRandomPart to a non-empty slice gave %q", got)
		}

		// Any int64 must be safe to format; only 48-bit ones are ids.
		if id := wire.GeneratedID(due, random); len(id) != 26 || id[10:] != random {
			t.Fatalf("GeneratedID(%d, %q) = %q", due, random, id)
		}
		d1, d2 := due&maxDue, other&maxDue
		id1, id2 := wire.GeneratedID(d1, random), wire.GeneratedID(d2, random)
		for _, c := range []struct {
			id  string
			due int64
		}{{id1, d1}, {id2, d2}} {
			if !wire.GeneratedLayout(c.id) || !generatedRE.MatchString(c.id) {
				t.Fatalf("id %q (due %d) does not have the generated layout", c.id, c.due)
			}
			if timePart(c.id) != c.due || c.id[10:] != random {
				t.Fatalf("id %q decodes to due %d, random %q; built from %d, %q", c.id, timePart(c.id), c.id[10:], c.due, random)
			}
		}
		if got, want := strings.Compare(id1, id2), cmp.Compare(d1, d2); got != want {
			t.Fatalf("ids %q and %q compare %d, their due times %d and %d compare %d", id1, id2, got, d1, d2, want)
		}

		n := 1 + int(uint64(other)>>48)%1024 // the bits d2 does not use
		s := wire.ShardOfRandom(random, n)
		if s < 0 || s >= n {
			t.Fatalf("ShardOfRandom(%q, %d) = %d", random, n, s)
		}
		if a, b := wire.ShardOf(id1, n), wire.ShardOf(id2, n); a != s || b != s {
			t.Fatalf("shards of %q and %q are %d and %d, of their random part %d (%d shards)", id1, id2, a, b, s, n)
		}
	})
}

// FuzzShardOf feeds any id and shard count to ShardOf: the shard is in
// range for 1 to 1024 shards, the same on every call, exactly FNV-1a of the
// id (of its random part for ids in the generated layout, so it does not
// depend on the due time), and 0 for a count below 2. GeneratedLayout
// agrees with ids.lua, and an id in that layout is rebuilt exactly from its
// due time and random part.
func FuzzShardOf(f *testing.F) {
	f.Add("", 1)
	f.Add("order:5001:cancel", 16)
	f.Add("01JD0000000000000000000000", 1024)
	f.Add("7ZZZZZZZZZZZZZZZZZZZZZZZZZ", 3)
	f.Add("8ZZZZZZZZZZZZZZZZZZZZZZZZZ", 3)                    // time part beyond 48 bits
	f.Add("01jd0000000000000000000000", 7)                    // lower case: not generated
	f.Add("01JD000000000000000000000I", 7)                    // I is not Crockford
	f.Add("01JD00000000000000000000000", 7)                   // 27 characters
	f.Add("m"+wire.RetrySep+"1700000000000-0", -5)            // a retry member, a negative count
	f.Add("\x01ABCDEFGHJKMNPQRS\xd5\x01", 1<<31)              // a packed member
	f.Add(string([]byte{0xFF, 0xFE, 0x00}), int(^uint(0)>>1)) // not UTF-8, the largest int

	f.Fuzz(func(t *testing.T, id string, n int) {
		layout := wire.GeneratedLayout(id)
		if layout != generatedRE.MatchString(id) {
			t.Fatalf("GeneratedLayout(%q) = %v, ids.lua says %v", id, layout, !layout)
		}
		if n <= 1 {
			if s := wire.ShardOf(id, n); s != 0 {
				t.Fatalf("ShardOf(%q, %d) = %d, want 0", id, n, s)
			}
		}
		k := 1 + int(uint(n)%1024)
		s := wire.ShardOf(id, k)
		if s < 0 || s >= k {
			t.Fatalf("ShardOf(%q, %d) = %d: out of range", id, k, s)
		}
		if again := wire.ShardOf(id, k); again != s {
			t.Fatalf("ShardOf(%q, %d) is not stable: %d then %d", id, k, s, again)
		}
		hashed := id
		if layout {
			hashed = id[10:]
		}
		if want := int(fnv1a(hashed) % uint32(k)); s != want {
			t.Fatalf("ShardOf(%q, %d) = %d, FNV-1a says %d", id, k, s, want)
		}
		h := fnv.New32a()
		_, _ = h.Write([]byte(hashed))
		if h.Sum32() != fnv1a(hashed) {
			t.Fatalf("the reference FNV-1a disagrees with hash/fnv on %q", hashed)
		}
		if !layout {
			return
		}
		due := timePart(id)
		if back := wire.GeneratedID(due, id[10:]); back != id {
			t.Fatalf("id %q decodes to due %d and %q, which build %q", id, due, id[10:], back)
		}
		if r := wire.ShardOfRandom(id[10:], k); r != s {
			t.Fatalf("ShardOf(%q, %d) = %d, ShardOfRandom of its random part %d", id, k, s, r)
		}
		if moved := wire.GeneratedID(maxDue-due, id[10:]); wire.ShardOf(moved, k) != s {
			t.Fatalf("ids %q and %q share a random part but not a shard", id, moved)
		}
	})
}

// FuzzRetryMember builds retry-lane members: for any message id without
// the separator (valid ids have none: it is a control character) the
// member splits back into the id and the failed entry's id, and an entry
// that carries it decodes with the message id, never with the entry id
// attached or with no id at all.
func FuzzRetryMember(f *testing.F) {
	f.Add("order:5001", "1700000000000-0")
	f.Add("01JD0000000000000000000000", "0-1")
	f.Add("m", "")
	f.Add("m", wire.RetrySep)
	f.Add("a"+wire.RetrySep+"b", "1-0") // not a valid id: skipped by the split check
	f.Add("ünïcödé", "18446744073709551615-18446744073709551615")

	env := string(wire.MarshalEnvelope(&codec.Envelope{Attempt: 2, Payload: []byte("p")}))
	f.Fuzz(func(t *testing.T, id, entry string) {
		m := wire.RetryMember(id, entry)
		if m != id+wire.RetrySep+entry {
			t.Fatalf("RetryMember(%q, %q) = %q", id, entry, m)
		}
		e, err := wire.Decode("s", "1-0", map[string]any{wire.FieldID: m, wire.FieldDue: "5", wire.FieldEnvelope: env})
		if err == nil && (e.Envelope.ID == "" || strings.Contains(e.Envelope.ID, wire.RetrySep)) {
			t.Fatalf("entry with member %q decoded as message id %q", m, e.Envelope.ID)
		}
		if id == "" || strings.Contains(id, wire.RetrySep) {
			return // no message has such an id
		}
		if got, rest, ok := strings.Cut(m, wire.RetrySep); !ok || got != id || rest != entry {
			t.Fatalf("member %q splits into %q, %q; built from %q, %q", m, got, rest, id, entry)
		}
		if err != nil {
			t.Fatalf("entry with member %q: %v", m, err)
		}
		if e.Envelope.ID != id || e.Envelope.Attempt != 2 || string(e.Envelope.Payload) != "p" {
			t.Fatalf("entry with member %q decoded as %+v, want id %q", m, e.Envelope, id)
		}
	})
}
