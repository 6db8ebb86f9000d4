package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// publicPackages are the directories of the public packages, each read
// for its exported names.
var publicPackages = []string{".", "admin", "codec", "dstest", "contrib/prometheus", "contrib/otel", "contrib/cron"}

// api is the exported surface of the public packages: per package name,
// its top-level names and its types' methods and fields ("T.M").
type api struct {
	pkgs    map[string]map[string]bool
	members map[string]bool // every method and field name, of any type
	embeds  map[string][]string
	tests   map[string]bool // every Test, Example, Benchmark and Fuzz function in the repository
}

// loadAPI reads the non-test Go files of publicPackages under root.
func loadAPI(root string) (*api, error) {
	a := &api{pkgs: map[string]map[string]bool{}, members: map[string]bool{}, embeds: map[string][]string{}, tests: map[string]bool{}}
	for _, dir := range publicPackages {
		files, err := filepath.Glob(filepath.Join(root, dir, "*.go"))
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			if err := a.addFile(f); err != nil {
				return nil, err
			}
		}
	}
	return a, a.addTests(root)
}

var testDeclRE = regexp.MustCompile(`(?m)^func ((?:Test|Example|Benchmark|Fuzz)\w*)\(`)

// addTests records the test functions of every _test.go file under root.
func (a *api) addTests(root string) error {
	return walkFiles(root, func(rel string) bool { return strings.HasSuffix(rel, "_test.go") }, func(_ string, b []byte) {
		for _, m := range testDeclRE.FindAllStringSubmatch(string(b), -1) {
			a.tests[m[1]] = true
		}
	})
}

// addFile records the exported names declared in the Go file f.
func (a *api) addFile(f string) error {
	src, err := os.ReadFile(f)
	if err != nil {
		return err
	}
	file, err := parser.ParseFile(token.NewFileSet(), f, src, parser.SkipObjectResolution)
	if err != nil {
		return err
	}
	pkg := file.Name.Name
	if pkg == "main" {
		return nil
	}
	names := a.pkgs[pkg]
	if names == nil {
		names = map[string]bool{}
		a.pkgs[pkg] = names
	}
	for _, decl := range file.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			a.addFunc(names, d)
		case *ast.GenDecl:
			a.addGen(pkg, names, d)
		}
	}
	return nil
}

// addFunc records an exported function or method.
func (a *api) addFunc(names map[string]bool, d *ast.FuncDecl) {
	if !d.Name.IsExported() {
		return
	}
	if d.Recv == nil || len(d.Recv.List) == 0 {
		names[d.Name.Name] = true
		return
	}
	if recv := typeName(d.Recv.List[0].Type); recv != "" {
		names[recv+"."+d.Name.Name] = true
		a.members[d.Name.Name] = true
	}
}

// addGen records the exported types, constants and variables of a
// declaration, with the fields and methods of struct and interface types.
func (a *api) addGen(pkg string, names map[string]bool, d *ast.GenDecl) {
	for _, s := range d.Specs {
		switch s := s.(type) {
		case *ast.TypeSpec:
			if s.Name.IsExported() {
				names[s.Name.Name] = true
				a.addMembers(pkg, names, s.Name.Name, s.Type)
			}
		case *ast.ValueSpec:
			for _, n := range s.Names {
				if n.IsExported() {
					names[n.Name] = true
				}
			}
		}
	}
}

// addMembers records the exported fields and interface methods of type t,
// and which types it embeds.
func (a *api) addMembers(pkg string, names map[string]bool, t string, expr ast.Expr) {
	var fields *ast.FieldList
	switch x := expr.(type) {
	case *ast.StructType:
		fields = x.Fields
	case *ast.InterfaceType:
		fields = x.Methods
	default:
		return
	}
	for _, f := range fields.List {
		if len(f.Names) == 0 {
			if e := typeName(f.Type); e != "" {
				a.embeds[pkg+"."+t] = append(a.embeds[pkg+"."+t], e)
			}
			continue
		}
		for _, n := range f.Names {
			if n.IsExported() {
				names[t+"."+n.Name] = true
				a.members[n.Name] = true
			}
		}
	}
}

// typeName returns the name of a (possibly pointer or generic) named type
// in the same package, or "".
func typeName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.StarExpr:
		return typeName(x.X)
	case *ast.IndexExpr:
		return typeName(x.X)
	case *ast.IndexListExpr:
		return typeName(x.X)
	case *ast.Ident:
		return x.Name
	}
	return ""
}

// has reports whether package pkg declares name ("X" or "T.M"), a member
// reached through an embedded type included.
func (a *api) has(pkg, name string) bool {
	names, ok := a.pkgs[pkg]
	if !ok {
		return false
	}
	if names[name] {
		return true
	}
	t, m, ok := strings.Cut(name, ".")
	if !ok {
		return false
	}
	for _, e := range a.embeds[pkg+"."+t] {
		if a.has(pkg, e+"."+m) {
			return true
		}
	}
	return false
}

// hasAnywhere reports whether any public package declares name, or, for a
// single word, whether it is a method or field of any public type.
func (a *api) hasAnywhere(name string) bool {
	for pkg := range a.pkgs {
		if a.has(pkg, name) {
			return true
		}
	}
	return !strings.Contains(name, ".") && a.members[name]
}
