package scripts

import (
	"bytes"
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var updateManifest = flag.Bool("update-manifest", false, "rewrite "+manifestFile+" from the scripts Go composes")

// luaFiles are this package's script files, the one source of every
// client's scripts.
//
//go:embed *.lua
var luaFiles embed.FS

// manifestFile says which files make each script, for the clients in other
// languages, which load this directory's files (clients/python/delaystream/lua
// is a link to it): docs/wire.md, "Loading the scripts".
const manifestFile = "manifest.json"

// clientLinks are the clients' links to this directory.
var clientLinks = []string{"../../clients/python/delaystream/lua"}

// manifest says which files make each script, in order, and the SHA1 of
// their concatenation: what a client sends to EVALSHA, shared with Go's.
type manifest struct {
	Layout  int                       `json:"layout"`
	Scripts map[string]manifestScript `json:"scripts"`
}

type manifestScript struct {
	Files []string `json:"files"`
	SHA1  string   `json:"sha1"`
}

// wantManifest returns the manifest of the scripts as Go composes them.
func wantManifest(t *testing.T) []byte {
	t.Helper()
	m := manifest{Layout: 1, Scripts: map[string]manifestScript{}}
	for sha, parts := range sources {
		names := make([]string, len(parts))
		var src []byte
		for i, p := range parts {
			names[i] = p.name
			b, err := luaFiles.ReadFile(p.name)
			if err != nil {
				t.Fatal(err)
			}
			src = append(src, b...)
		}
		sum := sha1.Sum(src)
		if hex.EncodeToString(sum[:]) != sha {
			t.Fatalf("script %s: the concatenation of %v is not what Go sends", names[len(names)-1], names)
		}
		m.Scripts[names[len(names)-1]] = manifestScript{Files: names, SHA1: sha}
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

// The manifest is how Go composes the scripts (go test -run TestManifest
// ./internal/scripts -update-manifest rewrites it), and every client's link
// leads to this directory.
func TestManifest(t *testing.T) {
	want := wantManifest(t)
	if *updateManifest {
		if err := os.WriteFile(manifestFile, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(manifestFile)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("%s differs from the scripts Go composes (%v): run go test -run TestManifest ./internal/scripts -update-manifest", manifestFile, err)
	}
	here, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, link := range clientLinks {
		dir, err := filepath.EvalSymlinks(link)
		if err == nil {
			dir, err = filepath.Abs(dir)
		}
		if err != nil {
			t.Fatalf("%s: %v (a link to internal/scripts)", link, err)
		}
		if dir != here {
			t.Errorf("%s leads to %s, not to internal/scripts", link, dir)
		}
	}
}
