// Command apicheck keeps the public packages' exported API on record: it
// writes each package's surface (every exported declaration, method, field
// and interface method, one per line, without names of parameters or
// comments) to api/<package>.txt with -write (make api), and otherwise
// fails when the code's surface differs from the record, so that every
// change of the API shows in review. Once v1.0.0 is tagged, a record that
// is incompatible with the release's (a declaration removed or changed, a
// method added to an interface) also needs a CHANGELOG.md section for a new
// major version. make lint runs it.
//
//	go run ./internal/apicheck [-root dir] [-write]
package main
