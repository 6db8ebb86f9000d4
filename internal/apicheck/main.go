package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// pkg is a public package and the file its recorded API is kept in.
type pkg struct {
	dir    string // relative to the repository's root
	path   string // import path
	record string // under recordDir
}

// recordDir holds the recorded API, one file per public package.
const recordDir = "api"

// releaseTag is the release whose API later versions must keep unless
// CHANGELOG.md announces a new major version.
const releaseTag = "v1.0.0"

var packages = []pkg{
	{".", "github.com/delaystream/delaystream", "delaystream.txt"},
	{"admin", "github.com/delaystream/delaystream/admin", "admin.txt"},
	{"codec", "github.com/delaystream/delaystream/codec", "codec.txt"},
	{"dstest", "github.com/delaystream/delaystream/dstest", "dstest.txt"},
	{"contrib/prometheus", "github.com/delaystream/delaystream/contrib/prometheus", "contrib-prometheus.txt"},
	{"contrib/otel", "github.com/delaystream/delaystream/contrib/otel", "contrib-otel.txt"},
	{"contrib/cron", "github.com/delaystream/delaystream/contrib/cron", "contrib-cron.txt"},
}

func main() {
	root := flag.String("root", ".", "the repository's root")
	write := flag.Bool("write", false, "record the current API in "+recordDir+"/")
	flag.Parse()
	problems, err := run(*root, *write)
	if err != nil {
		fmt.Fprintln(os.Stderr, "apicheck:", err)
		os.Exit(2)
	}
	for _, p := range problems {
		fmt.Println(p)
	}
	if len(problems) > 0 {
		os.Exit(1)
	}
}

// run records (write) or checks the API of every public package under
// root and returns what is wrong.
func run(root string, write bool) ([]string, error) {
	var problems []string
	for _, p := range packages {
		cur, err := surface(filepath.Join(root, p.dir))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.path, err)
		}
		file := filepath.Join(root, recordDir, p.record)
		if write {
			if err := writeRecord(file, p.path, cur); err != nil {
				return nil, err
			}
		}
		rec, err := readRecord(file)
		if err != nil {
			return nil, err
		}
		problems = append(problems, compare(p, rec, cur)...)
		rel, err := released(root, p)
		if err != nil {
			return nil, err
		}
		if rel != nil {
			problems = append(problems, checkRelease(root, p, rel, rec)...)
		}
	}
	return problems, nil
}

// compare reports a difference between the recorded and the current API.
func compare(p pkg, rec, cur []string) []string {
	removed, added := diff(rec, cur)
	if len(removed) == 0 && len(added) == 0 {
		return nil
	}
	out := []string{fmt.Sprintf("%s: the exported API differs from %s/%s (run make api to record it; an incompatible change also needs a CHANGELOG entry under a new major version once %s is released):", p.path, recordDir, p.record, releaseTag)}
	for _, l := range removed {
		out = append(out, "  - "+l)
	}
	for _, l := range added {
		out = append(out, "  + "+l)
	}
	return out
}

// checkRelease reports the incompatible changes from the released API
// rel to the recorded one rec unless CHANGELOG.md has a section for a
// major version above 1.
func checkRelease(root string, p pkg, rel, rec []string) []string {
	bad := incompatible(rel, rec)
	if len(bad) == 0 {
		return nil
	}
	if major, err := changelogMajor(root); err == nil && major > 1 {
		return nil
	}
	out := []string{fmt.Sprintf("%s: incompatible with %s, and CHANGELOG.md announces no new major version (a section \"## v2.0.0\" or later):", p.path, releaseTag)}
	for _, l := range bad {
		out = append(out, "  "+l)
	}
	return out
}

// diff returns the lines of a not in b and those of b not in a.
func diff(a, b []string) (removed, added []string) {
	inA, inB := set(a), set(b)
	for _, l := range a {
		if !inB[l] {
			removed = append(removed, l)
		}
	}
	for _, l := range b {
		if !inA[l] {
			added = append(added, l)
		}
	}
	return removed, added
}

func set(lines []string) map[string]bool {
	m := make(map[string]bool, len(lines))
	for _, l := range lines {
		m[l] = true
	}
	return m
}

var ifaceMemberRE = regexp.MustCompile(`^interface ([A-Za-z0-9_]+)[. ]`)

// incompatible returns what a program written against old may no longer
// compile against in new: every declaration removed or changed, and every
// method added to an interface that old had (its implementations no longer
// satisfy it).
func incompatible(old, new []string) []string {
	removed, added := diff(old, new)
	var out []string
	for _, l := range removed {
		out = append(out, "removed or changed: "+l)
	}
	had := set(old)
	for _, l := range added {
		if m := ifaceMemberRE.FindStringSubmatch(l); m != nil && had["type "+m[1]+" interface"] {
			out = append(out, "added to an interface: "+l)
		}
	}
	return out
}

// writeRecord writes lines as the recorded API of the package at path.
func writeRecord(file, path string, lines []string) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# The exported API of %s, written by make api and checked by make lint.\n", path)
	for _, l := range lines {
		b.WriteString(l + "\n")
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	return os.WriteFile(file, b.Bytes(), 0o644)
}

// readRecord returns a recorded API's lines (none when the file does not
// exist yet).
func readRecord(file string) ([]string, error) {
	b, err := os.ReadFile(file)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return parseRecord(b), nil
}

func parseRecord(b []byte) []string {
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	return lines
}

// released returns the API recorded for p at releaseTag, or nil when the
// repository has no such tag (or no git).
func released(root string, p pkg) ([]string, error) {
	cmd := exec.Command("git", "show", releaseTag+":"+recordDir+"/"+p.record)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return nil, nil // no tag, or the package was not public then
	}
	return parseRecord(out), nil
}

var majorRE = regexp.MustCompile(`(?m)^## v(\d+)\.\d+\.\d+`)

// changelogMajor returns the highest major version CHANGELOG.md has a
// section for.
func changelogMajor(root string) (int, error) {
	b, err := os.ReadFile(filepath.Join(root, "CHANGELOG.md"))
	if err != nil {
		return 0, err
	}
	major := 0
	for _, m := range majorRE.FindAllStringSubmatch(string(b), -1) {
		if n, err := strconv.Atoi(m[1]); err == nil && n > major {
			major = n
		}
	}
	return major, nil
}
