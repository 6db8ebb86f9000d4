package stream

import (
	"bytes"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream/codec"
	"github.com/delaystream/delaystream/internal/wire"
)

// FuzzParseQuarantined feeds any quarantine entry (each of the fields "i",
// "d", "e", "m" present or not) to parseQuarantined: it never panics, keeps
// what it found, and names the message of a member exactly as wire.Unpack
// splits it: a packed member with a usable due time gets the generated id
// it spells and its envelope bytes; anything else keeps the entry's own
// "i" and "e", never an id made up from a malformed member.
func FuzzParseQuarantined(f *testing.F) {
	const all = 0xF
	env := string(wire.MarshalEnvelope(&codec.Envelope{Attempt: 1, Payload: []byte("x")}))
	f.Add(uint8(all), "", "1700000000000", "", []byte("\x01ABCDEFGHJKMNPQRS"+env))
	f.Add(uint8(all), "", "1700000000000", "", []byte("\x01abcdefghjkmnpqrs"+env))
	f.Add(uint8(all), "", "-5", "", []byte("\x01ABCDEFGHJKMNPQRS"+env))
	f.Add(uint8(all), "", "281474976710656", "", []byte("\x01ABCDEFGHJKMNPQRS"+env))
	f.Add(uint8(all), "", "soon", "", []byte("\x01ABCDEFGHJKMNPQRS"+env))
	f.Add(uint8(0b1101), "", "", "", []byte("\x01ABCDEFGHJKMNPQRS"+env)) // no "d"
	f.Add(uint8(all), "", "5", "", []byte("\x01short"))
	f.Add(uint8(all), "", "5", "", []byte(""))
	f.Add(uint8(0b0111), "order:5001", "1700000000000", "\x00\x01garbage", []byte(nil)) // a plain member
	f.Add(uint8(all), "foreign", "+12", env, []byte("\x02ABCDEFGHJKMNPQRS"))
	f.Add(uint8(0), "", "", "", []byte(nil))

	f.Fuzz(func(t *testing.T, fields uint8, id, due, envelope string, member []byte) {
		values := map[string]any{wire.FieldReason: ReasonMalformedPacked}
		for bit, kv := range []struct {
			k string
			v any
		}{{wire.FieldID, id}, {wire.FieldDue, due}, {wire.FieldEnvelope, envelope}, {wire.FieldMember, string(member)}} {
			if fields&(1<<bit) != 0 {
				values[kv.k] = kv.v
			}
		}
		hasID, hasDue, hasEnv, hasMember := fields&1 != 0, fields&2 != 0, fields&4 != 0, fields&8 != 0

		q := parseQuarantined(redis.XMessage{ID: "1-0", Values: values})
		if q.EntryID != "1-0" || q.Reason != ReasonMalformedPacked {
			t.Fatalf("entry id %q, reason %q", q.EntryID, q.Reason)
		}
		ms, err := strconv.ParseInt(due, 10, 64)
		dueOK := hasDue && err == nil
		var wantDue time.Time
		if dueOK {
			wantDue = time.UnixMilli(ms)
		}
		if !q.Due.Equal(wantDue) {
			t.Fatalf("due %q (present %v) read as %v", due, hasDue, q.Due)
		}
		if hasMember && !bytes.Equal(q.Member, member) || !hasMember && q.Member != nil {
			t.Fatalf("member %q (present %v) kept as %q", member, hasMember, q.Member)
		}

		wantID, wantRaw := "", []byte(nil)
		if hasID {
			wantID = id
		}
		if hasEnv {
			wantRaw = []byte(envelope)
		}
		if hasMember && dueOK {
			if gid, genv, err := wire.Unpack(ms, string(member)); err == nil {
				wantID, wantRaw = gid, []byte(genv)
			}
		}
		if q.MessageID != wantID || !bytes.Equal(q.Raw, wantRaw) {
			t.Fatalf("entry i=%q d=%q e=%q m=%q (fields %04b) read as message %q, raw %q; want %q, %q",
				id, due, envelope, member, fields, q.MessageID, q.Raw, wantID, wantRaw)
		}
		// Nothing cut: the sizes are the lengths of what is kept.
		if c := parseCutQuarantined(redis.XMessage{ID: "1-0", Values: values}, nil); c.RawSize != len(q.Raw) || c.MemberSize != len(q.Member) {
			t.Fatalf("sizes %d, %d of raw %q and member %q, nothing cut", c.RawSize, c.MemberSize, q.Raw, q.Member)
		}
	})
}
