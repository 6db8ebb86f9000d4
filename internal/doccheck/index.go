package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// indexPath is the index of the benchmark's results files, generated from
// the files themselves.
const indexPath = "bench/results/README.md"

var resultsNameRE = regexp.MustCompile(`^(\d{4}-\d\d-\d\d)-(?:([0-9a-f]{7,40})-)?(.+?)(\.progress)?\.txt$`)

// resultsIndex returns the text of indexPath for the results files under
// root: one row per file, newest first, with its date, the commit it
// measured when its name says, what it measures, and its first line when
// that is a "# " title.
func resultsIndex(root string) (string, error) {
	dir := filepath.Join(root, "bench", "results")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("# Benchmark results\n\n")
	b.WriteString("Every run the docs quote, newest first. This index is generated from the files in this\n")
	b.WriteString("directory by `make docs-index`, and `make lint` fails when it is out of date. A file is\n")
	b.WriteString("named `<date>-<commit>-<what it measures>.txt`; `.progress.txt` is the same run's progress\n")
	b.WriteString("log. How to read a file: [bench/README.md](../README.md).\n\n")
	b.WriteString("| file | date | commit | measures |\n|---|---|---|---|\n")
	for i := len(entries) - 1; i >= 0; i-- {
		e := entries[i]
		m := resultsNameRE.FindStringSubmatch(e.Name())
		if e.IsDir() || m == nil {
			continue
		}
		what := strings.ReplaceAll(m[3], "-", " ")
		if m[4] != "" {
			what += " (progress log)"
		} else if t := title(filepath.Join(dir, e.Name())); t != "" {
			what += ": " + t
		}
		commit := m[2]
		if commit == "" {
			commit = "(in the file)"
		}
		fmt.Fprintf(&b, "| [%s](%s) | %s | %s | %s |\n", e.Name(), e.Name(), m[1], commit, strings.ReplaceAll(what, "|", "\\|"))
	}
	return b.String(), nil
}

// title returns the first line of file f without its "# " when it has
// one, or "".
func title(f string) string {
	h, err := os.Open(f)
	if err != nil {
		return ""
	}
	defer h.Close()
	s := bufio.NewScanner(h)
	if s.Scan() && strings.HasPrefix(s.Text(), "# ") {
		return strings.TrimPrefix(s.Text(), "# ")
	}
	return ""
}

// writeResultsIndex writes indexPath under root.
func writeResultsIndex(root string) error {
	text, err := resultsIndex(root)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(root, indexPath), []byte(text), 0o644)
}

// checkResultsIndex reports when indexPath under root is not what
// resultsIndex generates, and each results file whose name does not
// follow the naming rule.
func checkResultsIndex(root string) ([]string, error) {
	want, err := resultsIndex(root)
	if err != nil {
		return nil, err
	}
	var problems []string
	got, err := os.ReadFile(filepath.Join(root, indexPath))
	if err != nil || !bytes.Equal(got, []byte(want)) {
		problems = append(problems, indexPath+":1: out of date with the files in bench/results: run make docs-index")
	}
	entries, err := os.ReadDir(filepath.Join(root, "bench", "results"))
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if !e.IsDir() && e.Name() != "README.md" && !resultsNameRE.MatchString(e.Name()) {
			problems = append(problems, fmt.Sprintf("bench/results/%s:1: not named <date>-<commit>-<what>.txt, so not in the index", e.Name()))
		}
	}
	return problems, nil
}
