package scripts

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// PermissionError is a script call that the Redis user's ACL refused
// midway: a command, or a channel it publishes to. Redis 7.0 does not name
// the command in its reply ("The user executing the script can't run this
// command or subcommand script: <sha1>, on @user_script:<line>."); the
// script and the line do, and this error says what is there. Unwrap
// returns Redis's reply.
type PermissionError struct {
	Script  string // the script's file, e.g. "retry.lua"
	Line    int    // the line in that file
	Command string // the command called on that line, "one of A, B" for a helper's, "" when unknown
	Source  string // the line itself, trimmed
	Err     error  // Redis's reply
}

// Error implements error.
func (e *PermissionError) Error() string {
	what := "this script's line"
	if e.Command != "" {
		what = e.Command
	}
	return fmt.Sprintf("%v (refused: %s, %s line %d: %s; the permissions each part needs are in docs/acl.md)",
		e.Err, what, e.Script, e.Line, e.Source)
}

// Unwrap returns Redis's reply.
func (e *PermissionError) Unwrap() error { return e.Err }

// part is one file of a script's source.
type part struct {
	name  string
	lines []string
}

var (
	sources   = map[string][]part{} // by SHA1: the files the script is made of, in order
	reWhere   = regexp.MustCompile(`script: ([0-9a-f]{40}), on @user_script:(\d+)`)
	reCommand = regexp.MustCompile(`(?:call|pcall|send)\('([A-Z]+)'`)
	reRaise   = regexp.MustCompile(`pcall\('([A-Z]+)'`)
	reHelper  = regexp.MustCompile(`send\('([A-Z]+)'`)
)

// command returns the command called on line n (1-based) of the file: the
// one written on it; for a pcall's error raised again (publish.lua's
// error(r)), the pcall's just above; for a helper that takes the command
// as an argument (schedule.lua's send), the commands passed to it.
func (p part) command(n int) string {
	if c := reCommand.FindStringSubmatch(p.lines[n-1]); c != nil {
		return c[1]
	}
	if strings.Contains(p.lines[n-1], "error(") {
		for k := n - 1; k >= max(1, n-5); k-- {
			if c := reRaise.FindStringSubmatch(p.lines[k-1]); c != nil {
				return c[1]
			}
		}
	}
	var names []string
	for _, l := range p.lines {
		for _, c := range reHelper.FindAllStringSubmatch(l, -1) {
			names = append(names, c[1])
		}
	}
	if len(names) > 0 {
		return "one of " + strings.Join(names, ", ")
	}
	return ""
}

// register records the files of s for Explain.
func register(s *redis.Script, files ...part) *redis.Script {
	sources[s.Hash()] = files
	return s
}

// Name returns the file of this package's script whose SHA1 is sha (its
// own file, after any prelude: "promote.lua"), or "" for another script.
func Name(sha string) string {
	files := sources[strings.ToLower(sha)]
	if len(files) == 0 {
		return ""
	}
	return files[len(files)-1].name
}

// Explain returns err as a *PermissionError when it is a script's refusal
// by the ACL (naming the command and the line), else err unchanged (also
// when it is explained already).
func Explain(err error) error {
	var rerr redis.Error
	if err == nil || !errors.As(err, &rerr) {
		return err
	}
	if pe := (*PermissionError)(nil); errors.As(err, &pe) {
		return err
	}
	msg := rerr.Error()
	if !strings.Contains(msg, "The user executing the script can't") && !strings.Contains(msg, "ACL failure in script") {
		return err
	}
	m := reWhere.FindStringSubmatch(msg)
	if m == nil {
		return err
	}
	n, _ := strconv.Atoi(m[2])
	for _, p := range sources[m[1]] {
		if n > len(p.lines) {
			n -= len(p.lines)
			continue
		}
		return &PermissionError{Script: p.name, Line: n, Source: strings.TrimSpace(p.lines[n-1]),
			Command: p.command(n), Err: err}
	}
	return err
}
