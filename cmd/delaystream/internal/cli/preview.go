package cli

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/vmihailenco/msgpack/v5"
)

// PreviewLen is how many characters of a payload listings show.
const PreviewLen = 80

// Preview renders payload for a human in at most max characters (an
// ellipsis marks a cut): printable UTF-8 text (JSON included) as it is, a
// msgpack value (the default codec's encoding) as JSON prefixed with
// "msgpack:", anything else as "hex:" and its bytes. An empty payload is "".
func Preview(payload []byte, max int) string {
	if len(payload) == 0 {
		return ""
	}
	var s string
	switch {
	case printable(payload):
		s = string(payload)
	default:
		var v any
		r := bytes.NewReader(payload) // an io.ByteScanner: the decoder reads it unbuffered
		dec := msgpack.NewDecoder(r)
		if err := dec.Decode(&v); err == nil && r.Len() == 0 {
			if js, err := json.Marshal(jsonable(v)); err == nil {
				s = "msgpack:" + string(js)
				break
			}
		}
		s = "hex:" + hex.EncodeToString(payload[:min(len(payload), max)])
	}
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) > max && max > 1 {
		r := []rune(s)
		s = string(r[:max-1]) + "…"
	}
	return s
}

// printable reports whether b is valid UTF-8 made of printable characters
// and whitespace.
func printable(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if !unicode.IsPrint(r) && !unicode.IsSpace(r) {
			return false
		}
	}
	return true
}

// jsonable turns what msgpack decodes into something encoding/json takes
// (maps with non-string keys, byte strings).
func jsonable(v any) any {
	switch x := v.(type) {
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[fmt.Sprint(k)] = jsonable(e)
		}
		return m
	case map[string]any:
		for k, e := range x {
			x[k] = jsonable(e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = jsonable(e)
		}
		return x
	case []byte:
		if printable(x) {
			return string(x)
		}
		return "hex:" + hex.EncodeToString(x)
	}
	return v
}
