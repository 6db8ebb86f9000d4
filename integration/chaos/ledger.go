package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// The ledger is kept outside Redis: every process appends records to a
// file of its own, one line per record, tab-separated, first field the
// kind. Each record is one write(2) on a file opened with O_APPEND and no
// user-space buffer, so a record written before a process is killed with
// SIGKILL is in the file (the kernel has it), and records of concurrent
// goroutines never interleave.
//
// Producer records (written after the call returned):
//
//	S  token msgid dueMs outcome startNs endNs        schedule acknowledged (nil error)
//	U  token msgid|- startNs endNs err                 schedule failed: outcome unknown
//	C  token msgid 1|0|E startNs endNs err             cancel: true, false, error
//	R  token msgid dueMs ok|nf|E targetMs startNs endNs err
//	                                                   reschedule (At target): moved to dueMs,
//	                                                   not found, error
//	END producer                                       the producer finished
//
// Consumer records (written inside the handler, before it returns, so
// before the entry can be acknowledged; and from the hooks):
//
//	H  group consumer token msgid q|r entryID dueMs attempt deliveries ok|fail nowNs
//	D  group consumer token|- msgid|- reason nowNs      dead-lettered (hook)
//	L  group consumer nowNs err                         the consumer reported Redis data loss
const (
	recScheduled  = "S"
	recUnknown    = "U"
	recCancel     = "C"
	recReschedule = "R"
	recEnd        = "END"
	recHandled    = "H"
	recDead       = "D"
	recDataLoss   = "L"
)

// ledger appends records to one file.
type ledger struct {
	f  *os.File
	mu sync.Mutex
}

func openLedger(path string) (*ledger, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &ledger{f: f}, nil
}

// write appends one record. Fields must not contain tabs or newlines;
// they are replaced by spaces.
func (l *ledger) write(fields ...string) {
	var b strings.Builder
	for i, f := range fields {
		if i > 0 {
			b.WriteByte('\t')
		}
		b.WriteString(strings.NewReplacer("\t", " ", "\n", " ").Replace(f))
	}
	b.WriteByte('\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.f.WriteString(b.String()); err != nil {
		// A ledger that cannot be written makes the run meaningless.
		fmt.Fprintln(os.Stderr, "chaos: ledger write:", err)
		os.Exit(3)
	}
}

func (l *ledger) close() error { return l.f.Close() }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// record is one parsed ledger line.
type record struct {
	file   string
	fields []string
}

func (r record) kind() string { return r.fields[0] }

func (r record) str(i int) string {
	if i < len(r.fields) {
		return r.fields[i]
	}
	return ""
}

func (r record) num(i int) int64 {
	n, _ := strconv.ParseInt(r.str(i), 10, 64)
	return n
}

// readLedgers reads every *.log file under dir, in name order. A last line
// without its newline (it cannot happen with single writes, but a disk
// could fill up) is counted in torn and skipped.
func readLedgers(dir string) (recs []record, torn int, err error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		return nil, 0, err
	}
	sort.Strings(names)
	for _, name := range names {
		f, err := os.Open(name)
		if err != nil {
			return nil, 0, err
		}
		r := bufio.NewReaderSize(f, 1<<16)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				if line != "" {
					torn++
				}
				break
			}
			fields := strings.Split(strings.TrimSuffix(line, "\n"), "\t")
			recs = append(recs, record{file: filepath.Base(name), fields: fields})
		}
		f.Close()
	}
	return recs, torn, nil
}
