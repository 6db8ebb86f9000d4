package main

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// surface returns the exported API of the Go package in dir (its non-test
// files) as sorted lines, one per declaration, member or field, each
// independent of the others so that two surfaces compare line by line:
//
//	func New(redis.UniversalClient, string, ...Option) (*Queue, error)
//	method (*Queue) Cancel(context.Context, string) (bool, error)
//	type Queue struct
//	field Message.ID string
//	type Codec interface
//	interface Codec.Marshal(any) ([]byte, error)
//	const Keep Policy
//	var ErrNotFound error
//
// Parameter names, comments and unexported names are left out: they do
// not change what compiles against the package.
func surface(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	var lines []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		file, err := parser.ParseFile(fset, f, src, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		if file.Name.Name == "main" {
			continue
		}
		p := &lister{fset: fset}
		for _, d := range file.Decls {
			p.decl(d)
		}
		lines = append(lines, p.lines...)
	}
	sort.Strings(lines)
	return dedupe(lines), nil
}

// lister collects the lines of one file's exported declarations.
type lister struct {
	fset  *token.FileSet
	lines []string
}

func (p *lister) add(parts ...string) { p.lines = append(p.lines, strings.Join(parts, " ")) }

// expr prints a type expression as Go source.
func (p *lister) expr(e ast.Expr) string {
	var b bytes.Buffer
	_ = printer.Fprint(&b, p.fset, e) // printing an expression parsed from source cannot fail
	return strings.Join(strings.Fields(b.String()), " ")
}

// fields prints a parameter or result list as types only.
func (p *lister) fields(fl *ast.FieldList) string {
	if fl == nil {
		return ""
	}
	var out []string
	for _, f := range fl.List {
		t := p.expr(f.Type)
		for range max(1, len(f.Names)) {
			out = append(out, t)
		}
	}
	return strings.Join(out, ", ")
}

// sig prints a function type's parameters and results.
func (p *lister) sig(ft *ast.FuncType) string {
	s := "(" + p.fields(ft.Params) + ")"
	if ft.Results == nil || len(ft.Results.List) == 0 {
		return s
	}
	r := p.fields(ft.Results)
	if len(ft.Results.List) == 1 && len(ft.Results.List[0].Names) <= 1 {
		return s + " " + r
	}
	return s + " (" + r + ")"
}

// typeParams prints a declaration's type parameters ("[T any]"), or "".
func (p *lister) typeParams(fl *ast.FieldList) string {
	if fl == nil || len(fl.List) == 0 {
		return ""
	}
	var out []string
	for _, f := range fl.List {
		for _, n := range f.Names {
			out = append(out, n.Name+" "+p.expr(f.Type))
		}
	}
	return "[" + strings.Join(out, ", ") + "]"
}

func (p *lister) decl(d ast.Decl) {
	switch d := d.(type) {
	case *ast.FuncDecl:
		p.funcDecl(d)
	case *ast.GenDecl:
		p.genDecl(d)
	}
}

func (p *lister) funcDecl(d *ast.FuncDecl) {
	if !d.Name.IsExported() {
		return
	}
	if d.Recv == nil || len(d.Recv.List) == 0 {
		p.add("func " + d.Name.Name + p.typeParams(d.Type.TypeParams) + p.sig(d.Type))
		return
	}
	recv := d.Recv.List[0].Type
	if !ast.IsExported(baseName(recv)) {
		return
	}
	p.add("method (" + p.expr(recv) + ") " + d.Name.Name + p.sig(d.Type))
}

// baseName returns the name of a receiver's type: T for T, *T, T[K] and *T[K].
func baseName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.StarExpr:
		return baseName(x.X)
	case *ast.IndexExpr:
		return baseName(x.X)
	case *ast.IndexListExpr:
		return baseName(x.X)
	case *ast.Ident:
		return x.Name
	}
	return ""
}

func (p *lister) genDecl(d *ast.GenDecl) {
	var lastType string // a const block's type carries over to the specs that repeat it (iota)
	for _, s := range d.Specs {
		switch s := s.(type) {
		case *ast.TypeSpec:
			p.typeSpec(s)
		case *ast.ValueSpec:
			if s.Type != nil {
				lastType = p.expr(s.Type)
			} else if len(s.Values) > 0 {
				lastType = ""
			}
			for _, n := range s.Names {
				if n.IsExported() {
					p.add(strings.TrimSpace(d.Tok.String() + " " + n.Name + " " + lastType))
				}
			}
		}
	}
}

func (p *lister) typeSpec(s *ast.TypeSpec) {
	if !s.Name.IsExported() {
		return
	}
	name := s.Name.Name + p.typeParams(s.TypeParams)
	switch t := s.Type.(type) {
	case *ast.StructType:
		p.add("type " + name + " struct")
		for _, f := range t.Fields.List {
			if len(f.Names) == 0 {
				if ast.IsExported(baseName(f.Type)) {
					p.add("embed " + s.Name.Name + " " + p.expr(f.Type))
				}
				continue
			}
			for _, n := range f.Names {
				if n.IsExported() {
					p.add("field " + s.Name.Name + "." + n.Name + " " + p.expr(f.Type))
				}
			}
		}
	case *ast.InterfaceType:
		p.add("type " + name + " interface")
		for _, m := range t.Methods.List {
			switch {
			case len(m.Names) == 0:
				p.add("interface " + s.Name.Name + " embeds " + p.expr(m.Type))
			case m.Names[0].IsExported():
				if ft, ok := m.Type.(*ast.FuncType); ok {
					p.add("interface " + s.Name.Name + "." + m.Names[0].Name + p.sig(ft))
				}
			default:
				p.add("interface " + s.Name.Name + " has unexported methods")
			}
		}
	default:
		if s.Assign.IsValid() {
			p.add("type " + name + " = " + p.expr(s.Type))
		} else {
			p.add("type " + name + " " + p.expr(s.Type))
		}
	}
}

// dedupe drops repeated lines of a sorted slice.
func dedupe(lines []string) []string {
	out := lines[:0]
	for i, l := range lines {
		if i == 0 || l != lines[i-1] {
			out = append(out, l)
		}
	}
	return out
}
