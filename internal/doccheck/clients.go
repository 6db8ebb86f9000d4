package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// A client is one of the clients in other languages: its docs name its own
// API beside Go's, and the names of its language and Redis library.
type client struct {
	dir     string          // its directory, "clients/python/"
	sources string          // glob of the files that declare its API
	declRE  *regexp.Regexp  // a declaration in those files; group 1 is the name
	known   map[string]bool // its language's and its Redis library's names the docs use
	names   map[string]bool // what its sources declare (filled in by loadClients)
}

var clients = []*client{
	{
		dir: "clients/python/", sources: "clients/python/delaystream/*.py",
		declRE: regexp.MustCompile(`(?m)^(?:class|def) ([A-Za-z_][A-Za-z0-9_]*)|^([A-Z][A-Z0-9_]*) = `),
		known:  map[string]bool{"RedisCluster": true},
	},
	{
		dir: "clients/node/", sources: "clients/node/src/*.ts",
		declRE: regexp.MustCompile(`(?m)^export (?:async )?(?:class|function|const|interface|type) ([A-Za-z_][A-Za-z0-9_]*)`),
		known:  map[string]bool{"Redis": true, "Cluster": true, "Buffer": true, "Uint8Array": true, "Date": true},
	},
}

// loadClients reads what each client's sources declare.
func loadClients(root string) error {
	for _, c := range clients {
		files, err := filepath.Glob(filepath.Join(root, c.sources))
		if err != nil {
			return err
		}
		c.names = map[string]bool{}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			for _, m := range c.declRE.FindAllStringSubmatch(string(b), -1) {
				for _, name := range m[1:] {
					if name != "" {
						c.names[name] = true
					}
				}
			}
		}
	}
	return nil
}

// clientOf returns the client whose docs path is, or nil.
func clientOf(path string) *client {
	for _, c := range clients {
		if strings.HasPrefix(path, c.dir) {
			return c
		}
	}
	return nil
}

// checkClientNames is checkNames for a client's docs: a name is right when
// the client declares it (in fenced code qualified by the client's
// package, delaystream.Consumer), or, in a code span, when Go's API
// does (the docs map one to the other) or it is one of the client's
// language's known names.
func checkClientNames(d *doc, c *client, a *api) []string {
	var problems []string
	for _, s := range d.code {
		m := identRE.FindStringSubmatch(s.text)
		if m == nil || allCapsRE.MatchString(m[2]) || c.names[m[2]] || c.known[m[2]] {
			continue
		}
		if p := checkSpan(s.text, a); p != "" {
			problems = append(problems, fmt.Sprintf("%s:%d: `%s`: neither %s nor Go declares %s", d.path, s.line, s.text, c.dir, m[2]))
		}
	}
	for _, l := range d.fenced {
		for _, m := range qualifiedRE.FindAllStringSubmatch(l.text, -1) {
			if m[1] == "delaystream" && !c.names[m[2]] {
				problems = append(problems, fmt.Sprintf("%s:%d: delaystream.%s: %s declares no %s", d.path, l.line, m[2], c.dir, m[2]))
			}
		}
	}
	return problems
}
