// Command doccheck keeps the repository's markdown true to the code: every
// relative link resolves (file and heading), every results file a doc names
// is in bench/results, every Go identifier a doc names in a code span is
// declared by the public package it names, every `make` target a doc shows
// is in the Makefile, every docs file and heading the Go source points users
// to exists, and bench/results/README.md indexes every results file.
// make lint runs it; make docs-index rewrites the index.
//
//	go run ./internal/doccheck [-root dir] [-write-index]
package main
