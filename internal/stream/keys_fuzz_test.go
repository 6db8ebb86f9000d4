package stream_test

import (
	"errors"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/delaystream/delaystream/internal/stream"
	"github.com/delaystream/delaystream/internal/wire"
)

// FuzzValidateName feeds any string to ValidateName as prefix, queue and
// group name: it accepts exactly 1 to MaxNameLen bytes of UTF-8 without
// braces, spaces or control characters and refuses anything else with an
// error wrapping ErrInvalidName; NewKeys agrees; and every key built from
// an accepted name carries one hash tag, the queue's (the shard's tag on a
// sharded queue), so all keys of a shard hash to one Cluster slot.
func FuzzValidateName(f *testing.F) {
	for _, s := range []string{
		"orders", "ds", "a", "billing-v2", "ünïcödé:queue", "é", strings.Repeat("q", stream.MaxNameLen),
		"", strings.Repeat("q", stream.MaxNameLen+1), strings.Repeat("é", stream.MaxNameLen/2+1),
		"{orders}", "or}ders", "a b", "tab\there", "nbsp\u00a0", "nl\n", "del\x7f", "\x01packed",
		"m" + wire.RetrySep + "1-0", "\xff\xfe", "\u2028", "\u200b", "}{",
	} {
		f.Add(s)
	}

	f.Fuzz(func(t *testing.T, name string) {
		err := stream.ValidateName("queue", name)
		valid := len(name) >= 1 && len(name) <= stream.MaxNameLen && utf8.ValidString(name) &&
			!strings.ContainsAny(name, "{}") &&
			strings.IndexFunc(name, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) < 0
		_, kerr := stream.NewKeys(name, name, 0, 1)
		if err != nil {
			if !errors.Is(err, stream.ErrInvalidName) || !strings.Contains(err.Error(), "queue") {
				t.Fatalf("error %v does not wrap ErrInvalidName or name the queue", err)
			}
			if valid {
				t.Fatalf("name %q refused: %v", name, err)
			}
			if !errors.Is(kerr, stream.ErrInvalidName) {
				t.Fatalf("NewKeys accepted the invalid name %q (%v)", name, kerr)
			}
			return
		}
		if !valid {
			t.Fatalf("invalid name %q accepted", name)
		}
		if kerr != nil {
			t.Fatalf("NewKeys refused the valid name %q: %v", name, kerr)
		}

		n := 2 + len(name)%7
		for _, c := range []struct{ i, n int }{{0, 1}, {n - 1, n}} {
			k, err := stream.NewKeys(name, name, c.i, c.n)
			if err != nil {
				t.Fatalf("NewKeys(%q, shard %d of %d): %v", name, c.i, c.n, err)
			}
			tag := k.Tag()
			if c.n == 1 && tag != name || c.n > 1 && !strings.HasPrefix(tag, name+":") {
				t.Fatalf("queue %q, shard %d of %d: tag %q", name, c.i, c.n, tag)
			}
			keys := []string{k.DeadLetters(name)}
			for _, l := range []stream.Lane{k.Main(), k.Retry(name)} {
				keys = append(keys, laneKeys(l)...)
				if c.n > 1 {
					keys = append(keys, l.Arrivals)
				}
			}
			for _, key := range keys {
				m := hashTag.FindAllStringSubmatch(key, -1)
				if len(m) != 1 || m[0][1] != tag || strings.Index(key, "{") != strings.Index(key, "{"+tag+"}") {
					t.Fatalf("key %q of queue %q: hash tags %q, want exactly %q", key, name, m, tag)
				}
				if wire.Slot(key) != wire.Slot(tag) {
					t.Fatalf("key %q hashes to slot %d, its tag %q to %d", key, wire.Slot(key), tag, wire.Slot(tag))
				}
			}
		}
	})
}
