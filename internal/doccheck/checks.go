package main

import (
	"bufio"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

// checkLinks reports each relative link of d whose file does not exist,
// or whose anchor is not a heading of the markdown file it names.
func checkLinks(root string, d *doc, docs map[string]*doc) []string {
	var problems []string
	for _, l := range d.links {
		target := l.text
		if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
			continue
		}
		file, anchor, _ := strings.Cut(target, "#")
		resolved := d.path
		if file != "" {
			resolved = path.Clean(path.Join(path.Dir(d.path), file))
			if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(resolved))); err != nil {
				problems = append(problems, fmt.Sprintf("%s:%d: link to %s: no such file", d.path, l.line, target))
				continue
			}
		}
		if anchor == "" {
			continue
		}
		t, ok := docs[resolved]
		if !ok {
			continue // an anchor into a non-markdown file (a line of code)
		}
		if !t.anchors[anchor] {
			problems = append(problems, fmt.Sprintf("%s:%d: link to %s: no heading with anchor #%s in %s", d.path, l.line, target, anchor, resolved))
		}
	}
	return problems
}

var resultsFileRE = regexp.MustCompile(`\b20\d\d-\d\d-\d\d-[A-Za-z0-9._-]*[A-Za-z0-9]\.txt\b`)

// checkResults reports each results file d names (a dated .txt file)
// that is not in bench/results.
func checkResults(root string, d *doc) []string {
	var problems []string
	all := append(append(append([]span{}, d.text...), d.code...), d.fenced...)
	for _, l := range all {
		for _, name := range resultsFileRE.FindAllString(l.text, -1) {
			if _, err := os.Stat(filepath.Join(root, "bench", "results", name)); err != nil {
				problems = append(problems, fmt.Sprintf("%s:%d: results file %s is not in bench/results", d.path, l.line, name))
			}
		}
	}
	// Links were read with code spans removed; a results file linked under
	// a name of its own is checked by checkLinks.
	return dedupe(problems)
}

// dedupe drops repeated lines, keeping the first of each.
func dedupe(lines []string) []string {
	seen := map[string]bool{}
	out := lines[:0]
	for _, l := range lines {
		if !seen[l] {
			seen[l] = true
			out = append(out, l)
		}
	}
	return out
}

// ourPackages maps the package names a doc may qualify an identifier with
// to the package names the API holds.
var ourPackages = map[string]bool{"delaystream": true, "admin": true, "codec": true, "dstest": true, "dsprom": true, "dsotel": true, "cron": true}

// identRE matches a code span that names a Go identifier: an optional
// package, a name, an optional member, optional type arguments and call
// parentheses (`Queue.Locate`, `admin.Operator.Locate(ctx, id)`, `Schedule[T]`).
var identRE = regexp.MustCompile(`^[*&]?(?:([a-z][a-z0-9]*)\.)?([A-Z][A-Za-z0-9_]*)(?:\[[^\]]*\])?(?:\.([A-Z][A-Za-z0-9_]*))?(?:\(.*\))?$`)

var (
	allCapsRE  = regexp.MustCompile(`^[A-Z0-9_]+$`)
	testFuncRE = regexp.MustCompile(`^(Test|Example|Benchmark|Fuzz)[A-Z_]`)
)

// checkNames reports each code span of d that names an identifier of one
// of the public packages (qualified by its package, or unqualified) that
// the package does not declare, each test, example, benchmark or fuzz
// target it names that no test file declares, and each name qualified by
// a public package in its fenced code that the package does not declare.
// Redis commands and other all-capital words are not Go names and are not
// checked.
func checkNames(d *doc, a *api) []string {
	if d.path == "CHANGELOG.md" {
		return nil // its upgrade notes name what was removed
	}
	var problems []string
	for _, c := range d.code {
		if p := checkSpan(c.text, a); p != "" {
			problems = append(problems, fmt.Sprintf("%s:%d: `%s`: %s", d.path, c.line, c.text, p))
		}
	}
	for _, l := range d.fenced {
		for _, m := range qualifiedRE.FindAllStringSubmatch(l.text, -1) {
			name := m[2]
			if m[3] != "" && a.has(m[1], name+"."+m[3]) {
				continue
			}
			if !a.has(m[1], name) {
				problems = append(problems, fmt.Sprintf("%s:%d: %s.%s: package %s declares no %s", d.path, l.line, m[1], name, m[1], name))
			}
		}
	}
	return problems
}

// checkSpan returns what is wrong with the identifier a code span names,
// or "" when it names none or one that exists.
func checkSpan(text string, a *api) string {
	m := identRE.FindStringSubmatch(text)
	if m == nil || allCapsRE.MatchString(m[2]) {
		return ""
	}
	pkg, name := m[1], m[2]
	if m[3] != "" {
		name += "." + m[3]
	}
	switch {
	case pkg == "" && testFuncRE.MatchString(name):
		if !a.tests[name] {
			return "no test declares " + name
		}
	case pkg == "":
		if !a.hasAnywhere(name) && !knownElsewhere[name] {
			return "no public package declares " + name
		}
	case ourPackages[pkg]:
		if !a.has(pkg, name) {
			return "package " + pkg + " declares no " + name
		}
	}
	return ""
}

// qualifiedRE matches a name qualified by one of the public packages in
// code: delaystream.After, admin.Operator.Locate.
var qualifiedRE = regexp.MustCompile(`\b(delaystream|admin|codec|dstest|dsprom|dsotel)\.([A-Z][A-Za-z0-9_]*)(?:\.([A-Z][A-Za-z0-9_]*))?`)

// knownElsewhere are unqualified capitalised names the docs use that are
// not ours: go-redis's settings and types, asynq's calls the benchmark
// compares with, and the standard library's.
var knownElsewhere = map[string]bool{
	// go-redis
	"MaxRetries": true, "ClientName": true, "ReadOnly": true, "RouteByLatency": true, "RouteRandomly": true,
	"SentinelUsername": true, "ClusterClient": true, "TLSConfig": true, "PoolStats": true,
	// asynq
	"Server": true, "Enqueue": true, "ProcessAt": true, "ProcessIn": true, "RetryDelayFunc": true, "ErrLeaseExpired": true,
	// the standard library
	"Pdeathsig": true, "Printf": true,
}

var makeRE = regexp.MustCompile(`(?:^|[\s$;&(|])make\s+((?:[A-Z_]+=\S*\s+)*)([a-z][a-z0-9-]*)`)

// checkMake reports each `make <target>` in d's code whose target the
// Makefile does not define.
func checkMake(d *doc, targets map[string]bool) []string {
	var problems []string
	for _, l := range append(append([]span{}, d.code...), d.fenced...) {
		for _, m := range makeRE.FindAllStringSubmatch(l.text, -1) {
			if !targets[m[2]] {
				problems = append(problems, fmt.Sprintf("%s:%d: make %s: no such target in the Makefile", d.path, l.line, m[2]))
			}
		}
	}
	return problems
}

var targetRE = regexp.MustCompile(`^([a-zA-Z0-9_-]+(?:\s+[a-zA-Z0-9_-]+)*)\s*:([^=]|$)`)

// makeTargets returns the targets the Makefile at p defines.
func makeTargets(p string) (map[string]bool, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	targets := map[string]bool{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		if m := targetRE.FindStringSubmatch(s.Text()); m != nil {
			for _, t := range strings.Fields(m[1]) {
				targets[t] = true
			}
		}
	}
	return targets, s.Err()
}

// goDocRefRE matches a docs file named in Go source, and the quoted
// heading that may follow it ("docs/operations.md, \"Redis memory\"").
var goDocRefRE = regexp.MustCompile(`docs/([a-z0-9-]+\.md)(?:[ ,(]{0,3}\\?"([^"\\]+)\\?")?`)

// checkGoRefs reports each docs file named in the non-test Go source under
// root that does not exist, and each heading quoted after it that the
// file does not have.
func checkGoRefs(root string, docs map[string]*doc) ([]string, error) {
	var problems []string
	goSource := func(rel string) bool { return strings.HasSuffix(rel, ".go") && !strings.HasSuffix(rel, "_test.go") }
	err := walkFiles(root, goSource, func(rel string, b []byte) {
		for i, line := range strings.Split(string(b), "\n") {
			for _, m := range goDocRefRE.FindAllStringSubmatch(line, -1) {
				problems = append(problems, checkGoRef(rel, i+1, m[1], m[2], docs)...)
			}
		}
	})
	return problems, err
}

// checkGoRef checks one reference from Go source to docs/file and, when
// heading is not empty, to its heading.
func checkGoRef(src string, line int, file, heading string, docs map[string]*doc) []string {
	d, ok := docs["docs/"+file]
	if !ok {
		return []string{fmt.Sprintf("%s:%d: docs/%s: no such file", src, line, file)}
	}
	if heading != "" && !d.anchors[slug(heading)] {
		return []string{fmt.Sprintf("%s:%d: docs/%s has no heading %q", src, line, file, heading)}
	}
	return nil
}
