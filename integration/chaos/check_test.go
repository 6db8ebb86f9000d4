package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rec builds a ledger record from tab-free fields.
func rec(fields ...string) record { return record{file: "test.log", fields: fields} }

// sched is an acknowledged schedule of token (id m:<token>) due at dueMs,
// returned at endNs.
func sched(token string, dueMs, endNs int64) record {
	return rec(recScheduled, token, callerID(token), itoa(dueMs), "created", itoa(endNs-1000), itoa(endNs))
}

// handled is a handler call of group for token, from the queue stream,
// appended at appendedMs, with Message.Due dueMs.
func handled(group, token string, appendedMs, dueMs int64, ok bool) record {
	res := "fail"
	if ok {
		res = "ok"
	}
	return rec(recHandled, group, group+"-c1-1", token, callerID(token), "q", itoa(appendedMs)+"-0", itoa(dueMs), "1", "1", res, itoa(appendedMs*1e6+5e6))
}

func both(token string, appendedMs, dueMs int64) []record {
	var out []record
	for _, g := range groups {
		out = append(out, handled(g, token, appendedMs, dueMs, true))
	}
	return out
}

// TestJudge shows that every check of the run can fail: each case feeds
// the judge a ledger with one known defect (or one known excuse for what
// looks like one) and asserts the verdict and the figure.
func TestJudge(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1000, 0)
	kill := fault{Kind: faultClientKill, Start: time.Unix(2000, 0), End: time.Unix(2000, 1e6), InFlight: map[string]int64{}}
	restart := fault{Kind: faultRestart, Start: time.Unix(3000, 0), End: time.Unix(3000, 5e8), InFlight: map[string]int64{}}
	const tok, poison = "p0-000001", "p0-000007" // isPoison(7)
	cases := []struct {
		name       string
		fsync      string
		recs       []record
		faults     []fault
		final      *finalRedis
		violations int
		check      func(t *testing.T, s *Summary)
	}{
		{name: "clean", recs: append([]record{sched(tok, 1000, 500e6)}, both(tok, 1000, 1000)...),
			check: func(t *testing.T, s *Summary) {
				assert.Equal(t, 1, s.Expected)
				assert.Equal(t, 1, s.Groups[0].Delivered)
			}},
		{name: "lost in one group", recs: []record{sched(tok, 1000, 500e6), handled("billing", tok, 1000, 1000, true)}, violations: 1,
			check: func(t *testing.T, s *Summary) { assert.Equal(t, 1, s.Groups[1].Lost) }},
		{name: "only failed calls are not handled", recs: append([]record{sched(tok, 1000, 500e6), handled("billing", tok, 1000, 1000, false)}, handled("audit", tok, 1000, 1000, true)),
			violations: 1, check: func(t *testing.T, s *Summary) { assert.Equal(t, 1, s.Groups[0].Lost) }},
		{name: "early", recs: append([]record{sched(tok, 1000, 500e6)}, both(tok, 999, 1000)...), violations: 2,
			check: func(t *testing.T, s *Summary) { assert.Equal(t, 1, s.Groups[0].Early) }},
		{name: "superseded due time", recs: append([]record{sched(tok, 1000, 500e6),
			rec(recReschedule, tok, callerID(tok), "2000", "ok", "2000", "600", "700", "")}, both(tok, 1500, 1000)...), violations: 2,
			check: func(t *testing.T, s *Summary) {
				assert.Equal(t, 1, s.Groups[0].WrongDue)
				assert.Equal(t, 1, s.Rescheduled)
			}},
		{name: "failed reschedule: either due time", recs: append([]record{sched(tok, 1000, 500e6),
			rec(recReschedule, tok, callerID(tok), "2000", "E", "2000", "600", "700", "timeout")}, both(tok, 2000, 2000)...),
			check: func(t *testing.T, s *Summary) { assert.Equal(t, 1, s.RescheduleUnknown) }},
		{name: "delivered after Cancel true", recs: append([]record{sched(tok, 1000, 500e6),
			rec(recCancel, tok, callerID(tok), "1", "600", "700", "")}, handled("audit", tok, 1000, 1000, false)), violations: 1,
			check: func(t *testing.T, s *Summary) {
				assert.Equal(t, 1, s.Groups[1].CancelledDelivered)
				assert.Zero(t, s.Expected)
			}},
		{name: "Cancel false but never delivered", recs: []record{sched(tok, 1000, 500e6),
			rec(recCancel, tok, callerID(tok), "0", "600", "700", "")}, violations: 2},
		{name: "Cancel false re-sent across a connection kill", faults: []fault{kill}, recs: []record{sched(tok, 1000, 500e6),
			rec(recCancel, tok, callerID(tok), "0", itoa(kill.Start.UnixNano()-1e6), itoa(kill.Start.UnixNano()+1e6), "")},
			violations: 1, check: func(t *testing.T, s *Summary) { assert.Equal(t, 1, s.RetriedCancelFalse) }},
		{name: "duplicate without a fault", recs: append(append([]record{sched(tok, 1000, 500e6)}, both(tok, 1000, 1000)...), handled("billing", tok, 1000, 1000, true)),
			violations: 1, check: func(t *testing.T, s *Summary) { assert.Equal(t, 1, s.Groups[0].Duplicates) }},
		{name: "duplicate within the bound", faults: []fault{{Kind: faultConsumerKill, Start: t0, End: t0, InFlight: map[string]int64{"billing": 1}}},
			recs:  append(append([]record{sched(tok, 1000, 500e6)}, both(tok, 1000, 1000)...), handled("billing", tok, 1000, 1000, true)),
			check: func(t *testing.T, s *Summary) { assert.Equal(t, int64(1), s.Groups[0].Bound) }},
		{name: "unexpected message", recs: append([]record{sched(tok, 1000, 500e6)}, append(both(tok, 1000, 1000), handled("audit", "p9-000003", 1000, 1000, true))...),
			violations: 1},
		{name: "poison dead-lettered by hook and by Redis", recs: []record{sched(poison, 1000, 500e6),
			handled("billing", poison, 1000, 1000, false), rec(recDead, "billing", "billing-c1-1", poison, callerID(poison), "attempts exhausted", "1")},
			final: &finalRedis{deadTokens: map[string]map[string]string{"audit": {poison: "attempts exhausted"}}},
			check: func(t *testing.T, s *Summary) { assert.Equal(t, 1, s.Groups[1].DeadLettered) }},
		{name: "poison not dead-lettered", recs: []record{sched(poison, 1000, 500e6)}, violations: 2},
		{name: "data loss reported", recs: []record{rec(recDataLoss, "audit", "audit-c1-1", "1", "lost")}, violations: 1},
		{name: "lost in the restart window, always", faults: []fault{restart}, recs: []record{sched(tok, 1000, restart.Start.UnixNano()-1e9)}, violations: 2},
		{name: "lost in the restart window, everysec", fsync: "everysec", faults: []fault{restart}, recs: []record{sched(tok, 1000, restart.Start.UnixNano()-1e9)},
			check: func(t *testing.T, s *Summary) { assert.Equal(t, 1, s.Restart.Schedules) }},
		{name: "lost before the restart window, everysec", fsync: "everysec", faults: []fault{restart}, recs: []record{sched(tok, 1000, restart.Start.UnixNano()-60e9)},
			violations: 2},
		{name: "promoted twice", recs: append(append([]record{sched(tok, 1000, 500e6)}, both(tok, 1000, 1000)...), handled("billing", tok, 1001, 1000, true)),
			violations: 2}, // and a duplicate beyond the bound
		{name: "Schedule re-sent across a connection kill", faults: []fault{kill}, recs: append(append([]record{
			rec(recScheduled, tok, callerID(tok), "1400", "created", itoa(kill.Start.UnixNano()-1e6), itoa(kill.Start.UnixNano()+1e6))},
			both(tok, 1010, 1000)...), both(tok, 1400, 1400)...),
			check: func(t *testing.T, s *Summary) {
				assert.Equal(t, 1, s.Groups[0].ResentEarly)
				assert.Equal(t, 1, s.Groups[0].Twins)
				assert.Zero(t, s.Groups[0].Duplicates)
				assert.Len(t, s.Findings, 2)
			}, violations: 4}, // twins and early, in each group
		{name: "quarantined", recs: nil, final: &finalRedis{quarantined: 3}, violations: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			fsync := c.fsync
			if fsync == "" {
				fsync = "always"
			}
			s, err := judge(c.recs, 0, c.faults, c.final, fsync, plan{Mode: "test"}, t0)
			require.NoError(t, err)
			assert.Equal(t, c.violations, s.Violations, "violations: %s", strings.Join(s.ViolationList, "; "))
			if c.check != nil {
				c.check(t, s)
			}
		})
	}
}

// TestPlanTokens checks the producers' plans: reproducible from the seed,
// and with every kind of step the run relies on.
func TestPlanTokens(t *testing.T) {
	t.Parallel()
	spec := childSpec{Index: 1, Count: 4000, MinDelay: 200 * time.Millisecond, MaxDelay: 10 * time.Second, Seed: 42}
	a, b := planTokens(spec), planTokens(spec)
	require.Equal(t, len(a), len(b))
	var gen, cancels, resched, twice, poisons int
	for i := range a {
		require.Equal(t, a[i].token, b[i].token)
		require.Equal(t, a[i].delay, b[i].delay)
		assert.GreaterOrEqual(t, a[i].delay, spec.MinDelay)
		assert.LessOrEqual(t, a[i].delay, spec.MaxDelay)
		if a[i].generated {
			gen++
		}
		if a[i].poison {
			poisons++
			assert.Empty(t, a[i].follow, "poison is never cancelled or rescheduled")
		}
		switch {
		case len(a[i].follow) == 1 && a[i].follow[0].cancel:
			cancels++
		case len(a[i].follow) == 1:
			resched++
		case len(a[i].follow) == 2:
			twice++
		}
	}
	assert.Equal(t, 10, poisons)
	for name, n := range map[string]int{"generated": gen, "cancels": cancels, "reschedules": resched, "twice": twice} {
		assert.Positive(t, n, name)
	}
}
