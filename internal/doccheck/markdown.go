package main

import (
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// doc is one markdown file split into what the checks read: its headings'
// anchors, its links, its inline code spans and its fenced code lines,
// each with the line it is on.
type doc struct {
	path    string
	anchors map[string]bool
	links   []span
	code    []span // inline code spans outside fences
	fenced  []span // lines inside fenced code blocks
	text    []span // lines outside fenced code blocks, code spans removed
}

// span is a piece of text and the line it is on (1-based).
type span struct {
	line int
	text string
}

var (
	linkRE      = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	refLinkRE   = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s+(\S+)`)
	codeSpanRE  = regexp.MustCompile("`+[^`]+`+")
	headingRE   = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	htmlAnchors = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
)

// parseDoc splits the markdown text of the file at path.
func parseDoc(path, text string) *doc {
	d := &doc{path: path, anchors: map[string]bool{}}
	seen := map[string]int{}
	fence := ""
	for i, line := range strings.Split(text, "\n") {
		n := i + 1
		trimmed := strings.TrimSpace(line)
		if marker := fenceMarker(trimmed); marker != "" && (fence == "" || strings.HasPrefix(marker, fence)) {
			if fence == "" {
				fence = marker
			} else {
				fence = ""
			}
			continue
		}
		if fence != "" {
			d.fenced = append(d.fenced, span{n, line})
			continue
		}
		if m := headingRE.FindStringSubmatch(line); m != nil {
			d.anchors[uniqueAnchor(slug(m[1]), seen)] = true
		}
		for _, m := range htmlAnchors.FindAllStringSubmatch(line, -1) {
			d.anchors[m[1]] = true
		}
		for _, c := range codeSpanRE.FindAllString(line, -1) {
			d.code = append(d.code, span{n, strings.TrimSpace(strings.Trim(c, "`"))})
		}
		plain := codeSpanRE.ReplaceAllString(line, "")
		d.text = append(d.text, span{n, plain})
		for _, m := range linkRE.FindAllStringSubmatch(plain, -1) {
			d.links = append(d.links, span{n, m[1]})
		}
		if m := refLinkRE.FindStringSubmatch(plain); m != nil {
			d.links = append(d.links, span{n, m[1]})
		}
	}
	return d
}

// fenceMarker returns the fence a line opens or closes (``` or ~~~, as
// long as written), or "".
func fenceMarker(trimmed string) string {
	for _, c := range []string{"`", "~"} {
		if strings.HasPrefix(trimmed, c+c+c) {
			return trimmed[:len(trimmed)-len(strings.TrimLeft(trimmed, c))]
		}
	}
	return ""
}

// slug is the anchor GitHub gives a heading: lower case, code marks and
// punctuation other than '-' and '_' dropped, spaces made '-'.
func slug(heading string) string {
	heading = stripLinks(heading)
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

var inlineLinkRE = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)

// stripLinks replaces each markdown link in s with its text.
func stripLinks(s string) string { return inlineLinkRE.ReplaceAllString(s, "$1") }

// uniqueAnchor returns a, or a-1, a-2… for its later repeats, as GitHub
// numbers headings with the same text.
func uniqueAnchor(a string, seen map[string]int) string {
	n := seen[a]
	seen[a]++
	if n == 0 {
		return a
	}
	return a + "-" + strconv.Itoa(n)
}
