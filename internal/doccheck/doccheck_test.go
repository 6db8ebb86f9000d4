package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writeTree writes files (path → content) under a new directory and
// returns it.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, content := range files {
		full := filepath.Join(root, filepath.FromSlash(p))
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(content), 0o644))
	}
	return root
}

// A tree whose docs are right passes; each kind of wrong statement is
// reported on its own line, with the file and line it is on.
func TestCheck(t *testing.T) {
	good := map[string]string{
		"Makefile":        "test: lint\n\tgo test\nlint:\n\tgo vet\ndocs-index:\n",
		"bench/README.md": "# bench\n",
		"queue.go":        "package delaystream\n\ntype Queue struct{ Name string }\n\nfunc (q *Queue) Cancel() {}\n\nfunc New() *Queue { return nil }\n",
		"admin/admin.go":  "package admin\n\ntype Operator struct{ embedded }\n\ntype embedded struct{}\n\nfunc (embedded) Locate() {}\n",
		"queue_test.go":   "package delaystream\n\nfunc TestCancel(t *testing.T) {}\n",
		"bench/results/2026-12-01-abc1234-burst.txt": "# the burst\n",
		"docs/guide.md": "# Guide\n\n## Two words\n\nSee [the other](other.md#a-heading), [here](#two-words),\n" +
			"`delaystream.New`, `Queue.Cancel(ctx, id)`, `admin.Operator.Locate`, `Name`, `XADD`,\n" +
			"`TestCancel`, `make test`, [a run](../bench/results/2026-12-01-abc1234-burst.txt).\n\n```go\nq := delaystream.New()\n```\n",
		"docs/other.md": "# Other\n\n## A heading\n",
		"main.go":       "package main\n\n// see docs/guide.md (\"Two words\")\nfunc main() {}\n",
	}
	root := writeTree(t, good)
	require.NoError(t, writeResultsIndex(root))
	problems, err := check(root)
	require.NoError(t, err)
	assert.Empty(t, problems)

	bad := map[string]string{
		"docs/bad.md": "# Bad\n\n[gone](missing.md) [no anchor](other.md#nowhere) [self](#nope)\n" +
			"`Queue.Stop` `admin.Reader` `TestGone` `make release` 2026-12-02-abc1234-gone.txt\n\n" +
			"```sh\nmake bench\n```\n\n```go\ndelaystream.Old()\n```\n",
		"cmd.go": "package main\n\n// docs/none.md and docs/guide.md (\"Three words\")\nfunc f() {}\n",
	}
	for p, c := range bad {
		good[p] = c
	}
	root = writeTree(t, good)
	require.NoError(t, writeResultsIndex(root))
	problems, err = check(root)
	require.NoError(t, err)
	want := []string{
		"docs/bad.md:3: link to missing.md: no such file",
		"docs/bad.md:3: link to other.md#nowhere: no heading with anchor #nowhere in docs/other.md",
		"docs/bad.md:3: link to #nope: no heading with anchor #nope in docs/bad.md",
		"docs/bad.md:4: results file 2026-12-02-abc1234-gone.txt is not in bench/results",
		"docs/bad.md:4: `Queue.Stop`: no public package declares Queue.Stop",
		"docs/bad.md:4: `admin.Reader`: package admin declares no Reader",
		"docs/bad.md:4: `TestGone`: no test declares TestGone",
		"docs/bad.md:11: delaystream.Old: package delaystream declares no Old",
		"docs/bad.md:4: make release: no such target in the Makefile",
		"docs/bad.md:7: make bench: no such target in the Makefile",
		"cmd.go:3: docs/none.md: no such file",
		`cmd.go:3: docs/guide.md has no heading "Three words"`,
	}
	assert.ElementsMatch(t, want, problems)
}

// The results index lists every results file, newest first, and the
// check fails once a file is added without regenerating it.
func TestResultsIndex(t *testing.T) {
	root := writeTree(t, map[string]string{
		"Makefile":                                              "lint:\ndocs-index:\n",
		"bench/README.md":                                       "# bench\n",
		"bench/results/2026-11-01-full.txt":                     "delaystream benchmark\n",
		"bench/results/2026-11-01-full.progress.txt":            "",
		"bench/results/2026-12-01-abc1234-burst-trickle-ab.txt": "# promote before and after\n",
	})
	require.NoError(t, writeResultsIndex(root))
	b, err := os.ReadFile(filepath.Join(root, indexPath))
	require.NoError(t, err)
	text := string(b)
	assert.Contains(t, text, "| [2026-12-01-abc1234-burst-trickle-ab.txt](2026-12-01-abc1234-burst-trickle-ab.txt) | 2026-12-01 | abc1234 | burst trickle ab: promote before and after |")
	assert.Contains(t, text, "| [2026-11-01-full.progress.txt](2026-11-01-full.progress.txt) | 2026-11-01 | (in the file) | full (progress log) |")
	assert.Less(t, strings.Index(text, "2026-12-01"), strings.Index(text, "2026-11-01"), "newest first")

	require.NoError(t, os.WriteFile(filepath.Join(root, "bench/results/2026-12-02-def5678-new.txt"), nil, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "bench/results/notes.txt"), nil, 0o644))
	problems, err := check(root)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{
		"bench/results/README.md:1: out of date with the files in bench/results: run make docs-index",
		"bench/results/notes.txt:1: not named <date>-<commit>-<what>.txt, so not in the index",
	}, problems)
}

// Anchors follow GitHub's rule: lower case, punctuation dropped, spaces
// made hyphens, repeats numbered.
func TestSlug(t *testing.T) {
	d := parseDoc("x.md", "# A full Redis\n## `Queue.Locate` and (more)!\n## Twice\n## Twice\n```\n# not a heading\n```\n## [Linked](y.md) text\n")
	for _, a := range []string{"a-full-redis", "queuelocate-and-more", "twice", "twice-1", "linked-text"} {
		assert.True(t, d.anchors[a], a)
	}
	assert.False(t, d.anchors["not-a-heading"])
}

// A client's docs name its own API (from its sources) beside Go's; a name
// neither declares is reported.
func TestClientNames(t *testing.T) {
	tree := map[string]string{
		"Makefile":        "docs-index:\nlint:\n",
		"bench/README.md": "# bench\n",
		"bench/results/2026-12-01-abc1234-burst.txt": "# the burst\n",
		"queue.go":                        "package delaystream\n\ntype Queue struct{}\n",
		"clients/python/delaystream/c.py": "class Consumer:\n    pass\n\n\nMAX_HEADERS = 64\n",
		"clients/node/src/queue.ts":       "export class DuplicateError extends Error {}\n",
		"clients/python/README.md":        "# Py\n\n`Queue`, `Consumer`, `RedisCluster`, `Gone`\n\n```python\ndelaystream.Consumer()\ndelaystream.Nope()\n```\n",
		"clients/node/README.md":          "# Node\n\n`DuplicateError`, `Buffer`, `Missing`\n",
	}
	root := writeTree(t, tree)
	require.NoError(t, writeResultsIndex(root))
	problems, err := check(root)
	require.NoError(t, err)
	assert.Equal(t, []string{
		"clients/node/README.md:3: `Missing`: neither clients/node/ nor Go declares Missing",
		"clients/python/README.md:3: `Gone`: neither clients/python/ nor Go declares Gone",
		"clients/python/README.md:7: delaystream.Nope: clients/python/ declares no Nope",
	}, problems)
}
