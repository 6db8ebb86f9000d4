package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

var (
	// cliRE matches a command line of this CLI that starts a code span or
	// a line of a fenced block (after a prompt and variables): what follows
	// "delaystream " (or "go run ./cmd/delaystream ") up to a pipe, a
	// semicolon, a redirection or the end of the code.
	cliRE = regexp.MustCompile(`^\s*(?:\$\s+)?(?:[A-Z_]+=\S*\s+)*(?:go run \S*cmd/delaystream|(?:\S*/)?delaystream)\s+([a-z][a-z-]*(?:\s[^|;&>]*)?)(?:$|[|;&>])`)
	// lonelyFlagRE matches a code span that is a flag alone: `--read-only`.
	lonelyFlagRE = regexp.MustCompile(`^--([a-z][a-z0-9-]*)(?:[= ].*)?$`)
	codeSpanRE   = regexp.MustCompile("`[^`]+`")
	fenceRE      = regexp.MustCompile("^\\s*(```|~~~)")
)

// Every command line of the CLI that a doc of the repository shows in code
// names commands and flags that exist (make lint runs this test).
func TestDocsNameRealCommands(t *testing.T) {
	root := (&app{}).rootCmd()
	root.InitDefaultHelpCmd()
	n := 0
	err := filepath.WalkDir("../..", func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() && (e.Name() == ".git" || e.Name() == "node_modules" || e.Name() == "testdata") {
			return filepath.SkipDir
		}
		if e.IsDir() || !strings.HasSuffix(p, ".md") || strings.HasSuffix(p, "CHANGELOG.md") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for i, code := range docCode(string(b)) {
			for _, line := range code {
				if m := lonelyFlagRE.FindStringSubmatch(line); m != nil && !anyHasFlag(root, m[1]) && !redisServerFlags[m[1]] {
					t.Errorf("%s:%d: --%s: no command of the CLI has this flag", strings.TrimPrefix(p, "../../"), i, m[1])
				}
				for _, m := range cliRE.FindAllStringSubmatch(line, -1) {
					n++
					if problem := checkCommandLine(root, strings.Fields(m[1])); problem != "" {
						t.Errorf("%s:%d: delaystream %s: %s", strings.TrimPrefix(p, "../../"), i, strings.TrimSpace(m[1]), problem)
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d command lines checked", n)
	if n < 20 {
		t.Errorf("found %d command lines in the docs: the pattern no longer matches how they are written", n)
	}
}

// docCode returns, per line number (1-based), the code on that line of a
// markdown text: its code spans, or the whole line inside a fenced block.
func docCode(text string) map[int][]string {
	out := map[int][]string{}
	fenced := false
	for i, line := range strings.Split(text, "\n") {
		if fenceRE.MatchString(line) {
			fenced = !fenced
			continue
		}
		if fenced {
			out[i+1] = []string{line}
			continue
		}
		for _, c := range codeSpanRE.FindAllString(line, -1) {
			out[i+1] = append(out[i+1], strings.Trim(c, "`"))
		}
	}
	return out
}

// checkCommandLine follows args down root's commands and reports a word
// where a command is needed that names none, or a flag the command it
// reached does not have. Placeholders (<queue>, [group], …) end the
// command words.
func checkCommandLine(root *cobra.Command, args []string) string {
	cmd := root
	for len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		sub := findSub(cmd, args[0])
		if sub == nil {
			if cmd == root {
				return "no command " + args[0]
			}
			break
		}
		cmd, args = sub, args[1:]
	}
	for _, a := range args {
		if !strings.HasPrefix(a, "-") || a == "-" || a == "--" {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		name = strings.Trim(name, "[]…,.)")
		if name == "" {
			continue
		}
		if strings.HasPrefix(a, "--") && !hasFlag(cmd, name) {
			return "no flag --" + name + " on " + cmd.CommandPath()
		}
		if !strings.HasPrefix(a, "--") && len(name) == 1 && cmd.Flags().ShorthandLookup(name) == nil && cmd.InheritedFlags().ShorthandLookup(name) == nil {
			return "no flag -" + name + " on " + cmd.CommandPath()
		}
	}
	return ""
}

// findSub returns cmd's subcommand named (or aliased) name, or nil.
func findSub(cmd *cobra.Command, name string) *cobra.Command {
	for _, c := range cmd.Commands() {
		if c.Name() == name || c.HasAlias(name) {
			return c
		}
	}
	return nil
}

// hasFlag reports whether cmd has the flag name, its own or inherited.
func hasFlag(cmd *cobra.Command, name string) bool {
	return cmd.Flags().Lookup(name) != nil || cmd.InheritedFlags().Lookup(name) != nil
}

// The check finds a command, subcommand or flag that does not exist, and
// passes placeholders, values and inherited flags.
func TestCheckCommandLine(t *testing.T) {
	root := (&app{}).rootCmd()
	for line, want := range map[string]string{
		"dlq ls <queue> <group> --limit 5":        "",
		"locate orders order:1 --redis-url=u":     "",
		"serve --addr 127.0.0.1:8080 --read-only": "",
		"dlq show <queue> <group> <id>":           "",
		"lsq":                                     "no command lsq",
		"peek <queue> --newest":                   "no flag --newest on delaystream peek",
		"dlq ls <queue> <group> -Z":               "no flag -Z on delaystream dlq ls",
	} {
		if got := checkCommandLine(root, strings.Fields(line)); got != want {
			t.Errorf("%s: got %q, want %q", line, got, want)
		}
	}
}

// redisServerFlags are the redis-server flags the docs name alone.
var redisServerFlags = map[string]bool{"save": true, "port": true}

// anyHasFlag reports whether cmd or any command under it has the flag name.
func anyHasFlag(cmd *cobra.Command, name string) bool {
	if hasFlag(cmd, name) {
		return true
	}
	for _, c := range cmd.Commands() {
		if anyHasFlag(c, name) {
			return true
		}
	}
	return false
}
