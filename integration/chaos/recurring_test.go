package main

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

// occ is a consumer's record of an occurrence at ms from stream entry entry.
func occ(group string, ms int64, lane, entry string, ok bool) record {
	res := "fail"
	if ok {
		res = "ok"
	}
	return rec(recOccurrence, group, "c1", fmt.Sprint(ms), fmt.Sprintf("%s@%d#1", recurID, ms), lane, entry, res, "0")
}

// The recurring checks: every occurrence handled in every group, each
// from one stream entry, none after the deletion.
func TestJudgeOccurrences(t *testing.T) {
	t.Parallel()
	schedule := rec(recSchedule, "10500", "13200") // occurrences at 11, 12 s expected (13 s may race the delete)
	all := func(extra ...record) []record {
		out := []record{schedule}
		for _, g := range groups {
			out = append(out, occ(g, 11000, "q", "11000-0", true), occ(g, 12000, "q", "12000-0", true))
		}
		return append(out, extra...)
	}
	for _, c := range []struct {
		name       string
		recs       []record
		violations int
	}{
		{"clean", all(), 0},
		{"a redelivery of the same entry", all(occ("billing", 11000, "q", "11000-0", true)), 0},
		{"a retry from the retry lane", all(occ("audit", 12000, "r", "12500-0", true)), 0},
		{"created twice", all(occ("billing", 11000, "q", "11800-0", true)), 1},
		{"skipped", []record{schedule, occ("billing", 11000, "q", "a", true), occ("billing", 12000, "q", "b", true),
			occ("audit", 12000, "q", "b", true)}, 1},
		{"only failed", []record{schedule, occ("billing", 11000, "q", "a", true), occ("billing", 12000, "q", "b", true),
			occ("audit", 11000, "q", "a", false), occ("audit", 12000, "q", "b", true)}, 1},
		{"after the delete", all(occ("audit", 15000, "q", "c", true)), 1},
		{"no schedule record", []record{occ("audit", 15000, "q", "c", true)}, 1},
		{"no schedule at all", nil, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			var o occurrences
			for _, r := range c.recs {
				o.add(r)
			}
			var got []string
			o.judge(func(f string, args ...any) { got = append(got, fmt.Sprintf(f, args...)) })
			assert.Len(t, got, c.violations, "%v", got)
		})
	}
}
