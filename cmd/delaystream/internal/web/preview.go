package web

import (
	"bytes"
	"strings"
	"unicode/utf8"

	"github.com/delaystream/delaystream/cmd/delaystream/internal/cli"
)

// preview is what the pages and the JSON API show of a payload: never more
// than the preview limit.
type preview struct {
	Text      string `json:"preview"`   // cli.Preview of the payload, at most the limit's bytes
	Size      int    `json:"size"`      // the payload's length in bytes
	Truncated bool   `json:"truncated"` // Text is cut
}

// preview renders a payload of size bytes, of which payload holds the
// first ones (all of them, or the first ReadBytes the listings read), in
// at most the configured number of bytes: the cli.Preview of it (text as
// is, msgpack as JSON, else hex), cut at a character boundary and marked
// with an ellipsis when longer.
func (s *Server) preview(payload []byte, size int) preview {
	return previewOf(payload, size, s.cfg.previewBytes)
}

// previewOf renders payload, the first bytes of a payload of size bytes
// (size is at least len(payload)), in at most limit bytes. A payload read
// in part is always marked cut; its last character, when the cut split it,
// is left out, so that a text stays text.
func previewOf(payload []byte, size, limit int) preview {
	const ellipsis = "…"
	size = max(size, len(payload))
	partial := size > len(payload)
	if partial {
		payload = trimPartialRune(payload)
	}
	text := cli.Preview(payload, limit)
	cut := partial || strings.HasSuffix(text, ellipsis) && !bytes.HasSuffix(payload, []byte(ellipsis))
	if partial && !strings.HasSuffix(text, ellipsis) {
		text += ellipsis
	}
	if len(text) > limit {
		end := limit - len(ellipsis)
		for end > 0 && !utf8.RuneStart(text[end]) {
			end--
		}
		text, cut = text[:end]+ellipsis, true
	}
	return preview{Text: text, Size: size, Truncated: cut}
}

// trimPartialRune returns b without a UTF-8 sequence that its end cuts
// short (at most utf8.UTFMax-1 bytes); b itself when it ends with a whole
// character or with bytes that are no UTF-8 at all.
func trimPartialRune(b []byte) []byte {
	for i := 1; i < utf8.UTFMax && i <= len(b); i++ {
		if start := len(b) - i; utf8.RuneStart(b[start]) {
			if b[start] >= utf8.RuneSelf && !utf8.FullRune(b[start:]) {
				return b[:start]
			}
			return b
		}
	}
	return b
}
