package main

import (
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	root := flag.String("root", ".", "the repository's root")
	writeIndex := flag.Bool("write-index", false, "write "+indexPath+" from the files in bench/results, then check")
	flag.Parse()
	if *writeIndex {
		if err := writeResultsIndex(*root); err != nil {
			fmt.Fprintln(os.Stderr, "doccheck:", err)
			os.Exit(2)
		}
	}
	problems, err := check(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "doccheck:", err)
		os.Exit(2)
	}
	for _, p := range problems {
		fmt.Println(p)
	}
	if len(problems) > 0 {
		fmt.Printf("doccheck: %d problems in the docs\n", len(problems))
		os.Exit(1)
	}
}

// check runs every check over the repository at root and returns the
// problems found, each "path:line: what".
func check(root string) ([]string, error) {
	docs, err := readDocs(root)
	if err != nil {
		return nil, err
	}
	a, err := loadAPI(root)
	if err != nil {
		return nil, err
	}
	if err := loadClients(root); err != nil {
		return nil, err
	}
	targets, err := makeTargets(filepath.Join(root, "Makefile"))
	if err != nil {
		return nil, err
	}
	var problems []string
	for _, name := range sortedKeys(docs) {
		d := docs[name]
		problems = append(problems, checkLinks(root, d, docs)...)
		problems = append(problems, checkResults(root, d)...)
		if c := clientOf(name); c != nil {
			problems = append(problems, checkClientNames(d, c, a)...)
		} else {
			problems = append(problems, checkNames(d, a)...)
		}
		problems = append(problems, checkMake(d, targets)...)
	}
	goRefs, err := checkGoRefs(root, docs)
	if err != nil {
		return nil, err
	}
	problems = append(problems, goRefs...)
	index, err := checkResultsIndex(root)
	if err != nil {
		return nil, err
	}
	return append(problems, index...), nil
}

// skipDirs are directories whose markdown is not the project's docs.
var skipDirs = map[string]bool{".git": true, "node_modules": true, "testdata": true, "vendor": true, ".venv": true, ".pytest_cache": true}

// readDocs parses every markdown file under root, keyed by its path
// relative to root (with '/').
func readDocs(root string) (map[string]*doc, error) {
	docs := map[string]*doc{}
	err := walkFiles(root, func(rel string) bool { return strings.HasSuffix(rel, ".md") }, func(rel string, b []byte) {
		docs[rel] = parseDoc(rel, string(b))
	})
	return docs, err
}

// walkFiles calls fn with the path relative to root (with '/') and the
// content of every file under root that keep accepts, outside skipDirs.
func walkFiles(root string, keep func(rel string) bool, fn func(rel string, b []byte)) error {
	return filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() && skipDirs[e.Name()] {
			return filepath.SkipDir
		}
		rel, err := filepath.Rel(root, p)
		if err != nil || e.IsDir() || !keep(filepath.ToSlash(rel)) {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fn(filepath.ToSlash(rel), b)
		return nil
	})
}

// sortedKeys returns m's keys in order, so that problems print in a
// stable order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
