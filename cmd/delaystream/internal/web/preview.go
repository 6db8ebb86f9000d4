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

// preview renders payload in at most the configured number of bytes: the
// cli.Preview of it (text as is, msgpack as JSON, else hex), cut at a
// character boundary and marked with an ellipsis when longer.
func (s *Server) preview(payload []byte) preview {
	return previewOf(payload, s.cfg.previewBytes)
}

func previewOf(payload []byte, limit int) preview {
	const ellipsis = "…"
	text := cli.Preview(payload, limit)
	cut := strings.HasSuffix(text, ellipsis) && !bytes.HasSuffix(payload, []byte(ellipsis))
	if len(text) > limit {
		end := limit - len(ellipsis)
		for end > 0 && !utf8.RuneStart(text[end]) {
			end--
		}
		text, cut = text[:end]+ellipsis, true
	}
	return preview{Text: text, Size: len(payload), Truncated: cut}
}
