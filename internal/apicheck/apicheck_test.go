package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const src = `package p

import "context"

// Thing is exported.
type Thing struct {
	Name  string
	count int
	Embedded
}

type Embedded struct{ X, Y int }

type Codec interface {
	Marshal(v any) ([]byte, error)
}

type Policy int

const (
	Keep Policy = iota
	Replace
	hidden
)

var ErrGone error

func New(ctx context.Context, name string, opts ...Option) (*Thing, error) { return nil, nil }

func (t *Thing) Do(ctx context.Context, a, b int) error { return nil }

func (t *Thing) private() {}

func Get[T any](v T) T { return v }

type Option func(*Thing) error

type Alias = Thing
`

// The surface lists every exported declaration, member and field, without
// parameter names, comments or unexported names.
func TestSurface(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "p.go"), []byte(src), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "p_test.go"), []byte("package p\n\nfunc TestX() {}\n"), 0o644))
	got, err := surface(dir)
	require.NoError(t, err)
	assert.Equal(t, []string{
		"const Keep Policy",
		"const Replace Policy",
		"embed Thing Embedded",
		"field Embedded.X int",
		"field Embedded.Y int",
		"field Thing.Name string",
		"func Get[T any](T) T",
		"func New(context.Context, string, ...Option) (*Thing, error)",
		"interface Codec.Marshal(any) ([]byte, error)",
		"method (*Thing) Do(context.Context, int, int) error",
		"type Alias = Thing",
		"type Codec interface",
		"type Embedded struct",
		"type Option func(*Thing) error",
		"type Policy int",
		"type Thing struct",
		"var ErrGone error",
	}, got)
}

// A removed or changed declaration and a method added to an interface are
// incompatible; an added function, type or field is not.
func TestIncompatible(t *testing.T) {
	old := []string{"func New(string) error", "type Codec interface", "interface Codec.Marshal(any) ([]byte, error)", "type T struct", "field T.A int"}
	compatible := append([]string{"func Other()", "field T.B string"}, old...)
	assert.Empty(t, incompatible(old, compatible))
	changed := []string{"func New(string, int) error", "type Codec interface", "interface Codec.Marshal(any) ([]byte, error)",
		"interface Codec.Unmarshal([]byte, any) error", "type T struct", "field T.A int"}
	assert.Equal(t, []string{
		"removed or changed: func New(string) error",
		"added to an interface: interface Codec.Unmarshal([]byte, any) error",
	}, incompatible(old, changed))
}

// The check passes on a record written from the code, fails once the code
// changes, and names what changed.
func TestRecordAndCheck(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "p.go"), []byte(src), 0o644))
	p := pkg{dir: ".", path: "example.com/p", record: "p.txt"}
	file := filepath.Join(dir, recordDir, p.record)
	cur, err := surface(dir)
	require.NoError(t, err)
	require.NoError(t, writeRecord(file, p.path, cur))
	rec, err := readRecord(file)
	require.NoError(t, err)
	assert.Empty(t, compare(p, rec, cur))

	changed := append([]string{"func Added()"}, cur[1:]...)
	problems := compare(p, rec, changed)
	require.NotEmpty(t, problems)
	assert.Contains(t, problems, "  - "+cur[0])
	assert.Contains(t, problems, "  + func Added()")
}

// CHANGELOG's highest "## vN.x.y" section is the major version a release
// may break the previous one's API with.
func TestChangelogMajor(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "CHANGELOG.md"), []byte("# Changelog\n\n## Unreleased\n\n## v1.2.0\n\n## v1.0.0\n"), 0o644))
	n, err := changelogMajor(dir)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "CHANGELOG.md"), []byte("## v2.0.0\n\n## v1.0.0\n"), 0o644))
	n, err = changelogMajor(dir)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
}
