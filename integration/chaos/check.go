package main

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/delaystream/delaystream/internal/stream"
)

// Summary is the run's figures and verdict, printed as the table and
// written as JSON with -summary.
type Summary struct {
	Mode       string
	Fsync      string
	Seed       uint64
	Dir        string `json:",omitempty"` // kept when the run failed
	RunSeconds float64
	Messages   int // planned

	Scheduled          int // Schedule acknowledged (nil error)
	ScheduleUnknown    int // Schedule failed: may or may not have been written
	Generated          int // of the acknowledged, with generated ids
	Cancelled          int // Cancel returned true
	CancelFalse        int // Cancel returned false (already promoted)
	CancelUnknown      int // Cancel failed
	Rescheduled        int // messages moved by at least one acknowledged Reschedule
	RescheduledTwice   int // by two
	RescheduleNotFound int // Reschedule found the message promoted already
	RescheduleUnknown  int // Reschedule failed
	Poison             int // acknowledged poison messages: every group must dead-letter them
	// Expected is how many messages every group must handle or
	// dead-letter: acknowledged, not cancelled, and no failed Cancel.
	Expected int
	// RetriedCancelFalse counts Cancel calls that returned false for a
	// message no group ever got, while the call spanned a connection kill
	// or a restart: go-redis re-sent the script after the connection
	// dropped, the first run had removed the message, the second found
	// nothing. Not a loss (the message was cancelled), but Cancel's answer
	// was wrong.
	RetriedCancelFalse int
	// Occurrences is how many occurrences of the recurring schedule every
	// group must handle, each from one stream entry (see recurring.go).
	Occurrences int

	Groups []GroupFigures

	Faults     map[string]int
	InFlight   map[string]int64 // per group: the duplicate bound, summed over the faults
	Recovery   []Recovery
	FaultList  []fault
	Restart    *RestartLoss
	Lateness   Dist // first deliveries: handled (local clock) - due
	DataLoss   int  // consumers' OnDataLoss reports
	Quarantine int64
	Torn       int // ledger lines torn (never expected)

	// Findings are anomalies that are not violations of the run's checks
	// but are worth a look (see ResentEarly).
	Findings      []string `json:",omitempty"`
	ViolationList []string // the first violations, for the report
	Violations    int

	Drained      bool
	Harness      []string `json:",omitempty"` // the run itself failed (not a finding about the library)
	ChildExits   []string `json:",omitempty"` // children that exited on their own (restarted)
	UncleanStops []string `json:",omitempty"` // children that did not stop cleanly on SIGTERM
	Notes        []string `json:",omitempty"`
	Pids         []int    // every process the run started
	Verdict      string
}

// GroupFigures are one consumer group's figures.
type GroupFigures struct {
	Group              string
	Delivered          int // expected messages handled successfully at least once
	DeadLettered       int // expected messages dead-lettered instead (poison and others)
	DeadOther          map[string]int
	Lost               int // expected, neither handled nor dead-lettered
	Early              int // deliveries appended (Redis clock) before their due time
	WrongDue           int // first deliveries at a due time that was not the message's last
	CancelledDelivered int // deliveries of messages Cancel had removed (returned true)
	Unexpected         int // deliveries of messages no producer sent
	Duplicates         int // successful handlings beyond the first, per message
	Bound              int64
	Twins              int // extra messages a re-sent Schedule created: under a second generated id, or the same id promoted twice
	ResentEarly        int // messages delivered before the due time Schedule returned, by a re-sent Schedule's first run
	Calls              int // handler calls
	Failures           int // handler calls that failed (then retried or dead-lettered)
	OptionalDelivered  int // messages with an unknown outcome (schedule or cancel) that were delivered
}

// Recovery is how soon work resumed after a Redis-wide fault ended: the
// first entry appended to the queue stream at or after the end (by the
// Redis clock: its id), and per group the first handling of such an
// entry. -1 when none.
type Recovery struct {
	Kind      string
	At        float64 // seconds into the run
	Down      float64 // seconds the fault lasted
	Promotion float64
	Delivery  map[string]float64
}

// RestartLoss is what the restart from the AOF lost, measured in
// everysec mode (in always mode each of these is a violation): writes
// acknowledged within the window before the kill whose effect is gone.
type RestartLoss struct {
	WindowSeconds float64
	Schedules     int // acknowledged schedules never delivered to any group
	Cancels       int // acknowledged cancels whose message was delivered anyway
	Reschedules   int // acknowledged reschedules delivered at the superseded time
	Duplicates    int // duplicates beyond the bound, when the restart lost writes
	DataLoss      int
}

// Dist is a distribution in milliseconds.
type Dist struct {
	N             int
	P50, P99, Max float64
}

func distOf(v []float64) Dist {
	if len(v) == 0 {
		return Dist{}
	}
	slices.Sort(v)
	q := func(p float64) float64 { return v[min(len(v)-1, int(p*float64(len(v))))] }
	return Dist{N: len(v), P50: q(0.5), P99: q(0.99), Max: v[len(v)-1]}
}

// tokState is what the producers' ledger says about one message.
type tokState struct {
	acked, unknown bool
	poison         bool
	generated      bool
	ids            map[string]bool
	schedEnd       int64   // ns: when Schedule returned
	schedDue       int64   // ms: the due time Schedule returned
	resent         bool    // the Schedule call spanned a connection kill or restart
	due            int64   // ms: the last acknowledged due time
	dueEnd         int64   // ns: when the call that set it returned
	otherDues      []int64 // ms: dues of failed reschedules after it, or re-sent ones
	cancel         string  // "", "1", "0", "E"
	cancelStart    int64
	cancelEnd      int64
	resched        int
}

func (t *tokState) allowed(due int64) bool {
	return due == t.due || slices.Contains(t.otherDues, due)
}

type window struct{ from, to int64 } // ns

func (w window) overlaps(from, to int64) bool { return from <= w.to && to >= w.from }

// check reads the ledgers and judges the run.
func check(ledgerDir string, c *chaos, final *finalRedis) (*Summary, error) {
	recs, torn, err := readLedgers(ledgerDir)
	if err != nil {
		return nil, err
	}
	return judge(recs, torn, c.faults, final, c.fsync, c.p, c.t0)
}

// judge is check on records already read: every rule of the run, in one
// place, so that tests can feed it ledgers with known faults.
func judge(recs []record, torn int, faults []fault, final *finalRedis, fsync string, p plan, t0 time.Time) (*Summary, error) {
	s := &Summary{Mode: p.Mode, Fsync: fsync, Messages: p.Messages, Torn: torn,
		Faults: map[string]int{}, InFlight: map[string]int64{}, FaultList: faults}
	var violations []string
	violate := func(format string, args ...any) {
		s.Violations++
		if len(violations) < 40 {
			violations = append(violations, fmt.Sprintf(format, args...))
		}
	}
	everysec := fsync == "everysec"

	// Connection-breaking faults (a call spanning one may have been
	// re-sent by go-redis) and the window before the restart (what an
	// everysec AOF may not have written).
	var connFaults []window
	var restartWin *window
	for _, f := range faults {
		s.Faults[f.Kind]++
		for g, n := range f.InFlight {
			s.InFlight[g] += n
		}
		switch f.Kind {
		case faultClientKill, faultRestart:
			connFaults = append(connFaults, window{f.Start.UnixNano(), f.End.UnixNano()})
		}
		if f.Kind == faultRestart {
			restartWin = &window{f.Start.Add(-restartLossWindow).UnixNano(), f.Start.UnixNano()}
		}
	}
	spansConnFault := func(from, to int64) bool {
		for _, w := range connFaults {
			if w.overlaps(from, to) {
				return true
			}
		}
		return false
	}
	inRestartWin := func(at int64) bool {
		return everysec && restartWin != nil && at >= restartWin.from && at <= restartWin.to
	}
	if everysec {
		s.Restart = &RestartLoss{WindowSeconds: restartLossWindow.Seconds()}
	}

	toks := map[string]*tokState{}
	tok := func(name string) *tokState {
		t := toks[name]
		if t == nil {
			t = &tokState{ids: map[string]bool{}}
			toks[name] = t
		}
		return t
	}
	var hs []handling
	var occ occurrences                    // the recurring schedule's, see recurring.go
	dead := map[string]map[string]string{} // group -> token -> reason, from the hook
	for _, g := range groups {
		dead[g] = map[string]string{}
	}
	for _, r := range recs {
		switch r.kind() {
		case recScheduled:
			t := tok(r.str(1))
			t.acked = true
			t.ids[r.str(2)] = true
			t.due, t.schedEnd, t.dueEnd, t.schedDue = r.num(3), r.num(6), r.num(6), r.num(3)
			t.resent = spansConnFault(r.num(5), r.num(6))
			t.generated = !strings.HasPrefix(r.str(2), "m:")
		case recUnknown:
			t := tok(r.str(1))
			t.unknown = true
			if id := r.str(2); id != "-" {
				t.ids[id] = true
			}
		case recCancel:
			t := tok(r.str(1))
			t.cancel, t.cancelStart, t.cancelEnd = r.str(3), r.num(4), r.num(5)
		case recReschedule:
			t := tok(r.str(1))
			start, end := r.num(6), r.num(7)
			switch r.str(4) {
			case "ok":
				t.due, t.dueEnd, t.otherDues = r.num(3), end, nil
				t.resched++
			case "nf":
				s.RescheduleNotFound++
				if spansConnFault(start, end) {
					// A first run may have moved it before the connection
					// dropped, and the message been promoted before the
					// re-sent one ran.
					t.otherDues = append(t.otherDues, r.num(5))
				}
			case "E":
				s.RescheduleUnknown++
				t.otherDues = append(t.otherDues, r.num(3))
			}
		case recHandled:
			h := handling{r: r, group: r.str(1), token: r.str(3), id: r.str(4), lane: r.str(5), entry: r.str(6),
				due: r.num(7), attempt: r.num(8), delivers: r.num(9), ok: r.str(10) == "ok", at: r.num(11)}
			hs = append(hs, h)
		case recDead:
			if dead[r.str(1)] != nil {
				dead[r.str(1)][r.str(3)] = r.str(5)
			}
		case recOccurrence, recSchedule:
			occ.add(r)
		case recDataLoss:
			s.DataLoss++
			if everysec {
				s.Restart.DataLoss++
			} else {
				violate("consumer %s of %s reported Redis data loss: %s", r.str(2), r.str(1), r.str(4))
			}
		}
	}
	s.Occurrences = occ.judge(violate)
	for name, t := range toks {
		if t.acked {
			s.Scheduled++
			if t.generated {
				s.Generated++
			}
		} else if t.unknown {
			s.ScheduleUnknown++
		}
		if !t.acked {
			continue
		}
		seq, _ := strconv.Atoi(name[strings.IndexByte(name, '-')+1:])
		t.poison = isPoison(seq)
		if t.poison {
			s.Poison++
		}
		switch t.cancel {
		case "1":
			s.Cancelled++
		case "0":
			s.CancelFalse++
		case "E":
			s.CancelUnknown++
		}
		if t.resched > 0 {
			s.Rescheduled++
		}
		if t.resched > 1 {
			s.RescheduledTwice++
		}
	}

	// Per group: what was handled, by message.
	type perTok struct {
		okByID  map[string]int
		entries map[string]map[string]bool // id -> queue stream entries delivered
		calls   int
		firstQ  bool
	}
	byGroup := map[string]map[string]*perTok{}
	for _, g := range groups {
		byGroup[g] = map[string]*perTok{}
	}
	figs := map[string]*GroupFigures{}
	for _, g := range groups {
		figs[g] = &GroupFigures{Group: g, DeadOther: map[string]int{}, Bound: s.InFlight[g]}
	}
	var late []float64
	resentEarly := map[string]bool{}
	for _, h := range hs {
		gf := figs[h.group]
		if gf == nil {
			violate("a delivery to unknown group %q (%s)", h.group, h.r.file)
			continue
		}
		gf.Calls++
		if !h.ok {
			gf.Failures++
		}
		t := toks[h.token]
		if t == nil || (!t.acked && !t.unknown) {
			gf.Unexpected++
			violate("%s: delivered %q (id %s), which no producer sent", h.group, h.token, h.id)
			continue
		}
		pt := byGroup[h.group][h.token]
		if pt == nil {
			pt = &perTok{okByID: map[string]int{}}
			byGroup[h.group][h.token] = pt
		}
		pt.calls++
		if h.ok {
			pt.okByID[h.id]++
		}
		if h.lane == "q" {
			if pt.entries == nil {
				pt.entries = map[string]map[string]bool{}
			}
			if pt.entries[h.id] == nil {
				pt.entries[h.id] = map[string]bool{}
			}
			pt.entries[h.id][h.entry] = true
		}
		// Never early, by the Redis clock: the entry id's time is when
		// Redis appended it (XADD *), and the handler ran after that.
		appended := stream.EntryTime(h.entry).UnixMilli()
		if appended < h.due {
			gf.Early++
			violate("%s: %s (id %s) appended to %s at %d ms, %d ms before its due time %d", h.group, h.token, h.id, h.lane, appended, h.due-appended, h.due)
		}
		if t.cancel == "1" {
			if inRestartWin(t.cancelEnd) {
				s.Restart.Cancels++
			} else {
				gf.CancelledDelivered++
				violate("%s: %s (id %s) delivered although Cancel returned true at %s", h.group, h.token, h.id, time.Unix(0, t.cancelEnd).Format("15:04:05.000"))
			}
		}
		if h.lane == "q" && t.acked && !t.allowed(h.due) {
			if t.resent && h.due < t.schedDue {
				// go-redis re-sent the schedule script after the connection
				// dropped; the first run's message was promoted before the
				// second run, which created it again, due later (After is
				// resolved from Redis TIME at each run).
				if !resentEarly[h.group+" "+h.token] {
					resentEarly[h.group+" "+h.token] = true
					gf.ResentEarly++
					s.Findings = append(s.Findings, fmt.Sprintf("%s: %s (id %s) delivered with due time %d, %d ms before the due time Schedule returned (%d): the call spanned a connection kill, go-redis re-sent the script after the first run's message had been promoted, and it was created again",
						h.group, h.token, h.id, h.due, t.schedDue-h.due, t.schedDue))
				}
			} else if inRestartWin(t.dueEnd) {
				s.Restart.Reschedules++
			} else {
				gf.WrongDue++
				violate("%s: %s (id %s) delivered with due time %d, but its last acknowledged due time is %d (others possible: %v)", h.group, h.token, h.id, h.due, t.due, t.otherDues)
			}
		}
		if h.lane == "q" && h.attempt == 1 && h.delivers == 1 && !pt.firstQ {
			pt.firstQ = true
			late = append(late, float64(h.at-h.due*1e6)/1e6)
		}
	}
	s.Lateness = distOf(late)

	for name, t := range toks {
		if !t.acked && !t.unknown {
			continue
		}
		required := t.acked && t.cancel != "1" && t.cancel != "E"
		var deliveredSomewhere bool
		for _, g := range groups {
			if pt := byGroup[g][name]; pt != nil && len(pt.okByID) > 0 {
				deliveredSomewhere = true
			}
		}
		if required && t.cancel == "0" && !deliveredSomewhere && spansConnFault(t.cancelStart, t.cancelEnd) {
			s.RetriedCancelFalse++
			required = false
		}
		if required {
			s.Expected++
		}
		for _, g := range groups {
			gf := figs[g]
			pt := byGroup[g][name]
			ok := pt != nil && len(pt.okByID) > 0
			if pt != nil {
				ids := 0
				for id, n := range pt.okByID {
					if n > 0 {
						ids++
					}
					// One message id appended to the queue stream more than
					// once: promotion is exactly once, so only a re-sent
					// Schedule (a second message of the same id) explains it.
					extra := max(0, len(pt.entries[id])-1)
					if extra > 0 && !t.resent {
						violate("%s: %s (id %s) appended to the queue stream %d times (entries %v)", g, name, id, extra+1, keys(pt.entries[id]))
						extra = 0
					}
					gf.Twins += extra
					gf.Duplicates += max(0, n-1-extra)
				}
				if ids > 1 {
					gf.Twins++
				}
			}
			reason, isDead := dead[g][name]
			if !isDead && final != nil {
				reason, isDead = final.deadTokens[g][name]
			}
			switch {
			case !required:
				if ok && t.cancel != "1" {
					gf.OptionalDelivered++
				}
			case t.poison:
				if isDead {
					gf.DeadLettered++
				} else {
					gf.Lost++
					violate("%s: poison %s (ids %v) was not dead-lettered", g, name, keys(t.ids))
				}
			case ok:
				gf.Delivered++
			case isDead:
				gf.DeadLettered++
				gf.DeadOther[reason]++
			case !deliveredSomewhere && inRestartWin(t.schedEnd):
				gf.Lost++ // counted; judged below
			default:
				gf.Lost++
				violate("%s: %s (ids %v, due %d, cancel %q) acknowledged but never handled", g, name, keys(t.ids), t.due, t.cancel)
			}
		}
		if required && !t.poison && !deliveredSomewhere && inRestartWin(t.schedEnd) {
			s.Restart.Schedules++
		}
	}
	for _, g := range groups {
		gf := figs[g]
		if int64(gf.Duplicates) > gf.Bound {
			if everysec && s.Restart.Schedules+s.Restart.Cancels+s.Restart.Reschedules > 0 {
				s.Restart.Duplicates += gf.Duplicates - int(gf.Bound)
			} else {
				violate("%s: %d duplicates, more than the %d entries in flight at the faults", g, gf.Duplicates, gf.Bound)
			}
		}
		s.Groups = append(s.Groups, *gf)
	}
	if final != nil {
		s.Quarantine = final.quarantined
		if final.quarantined > 0 {
			violate("%d entries quarantined (every message sent was valid)", final.quarantined)
		}
	}
	if torn > 0 {
		violate("%d torn ledger lines", torn)
	}
	// What a call that go-redis sent twice did twice. The producer's calls
	// carry tokens (internal/delay/once.go) so that a second run only repeats the
	// first run's reply: any of these is a bug.
	for _, g := range s.Groups {
		if g.ResentEarly > 0 {
			violate("%s: %d messages delivered before the due time Schedule returned (a re-sent Schedule created them again)", g.Group, g.ResentEarly)
		}
		if g.Twins > 0 {
			violate("%s: %d messages created twice by a re-sent Schedule", g.Group, g.Twins)
		}
	}
	if s.RetriedCancelFalse > 0 {
		violate("%d Cancel calls returned false for a message no group received (a re-sent Cancel reported its second run)", s.RetriedCancelFalse)
	}
	s.Recovery = recoveries(faults, hs, t0)
	sort.Strings(violations)
	s.ViolationList = violations
	return s, nil
}

// restartLossWindow is how far before the kill an everysec AOF may be
// missing acknowledged writes: fsync runs every second, and Redis lets a
// write wait up to 2 s more behind a slow fsync; 5 s covers both with room.
const restartLossWindow = 5 * time.Second

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// handling is one handler call, from an H record.
type handling struct {
	r                 record
	group, token, id  string
	lane, entry       string
	due, at           int64 // ms (Redis clock), ns (local clock)
	attempt, delivers int64
	ok                bool
}

func recoveries(faults []fault, hs []handling, t0 time.Time) []Recovery {
	var out []Recovery
	for _, f := range faults {
		if !f.End.After(f.Start) {
			continue
		}
		endMs := f.End.UnixMilli()
		r := Recovery{Kind: f.Kind, At: f.Start.Sub(t0).Seconds(), Down: f.End.Sub(f.Start).Seconds(), Promotion: -1, Delivery: map[string]float64{}}
		for _, g := range groups {
			r.Delivery[g] = -1
		}
		for _, h := range hs {
			appended := stream.EntryTime(h.entry).UnixMilli()
			if h.lane != "q" || appended < endMs {
				continue
			}
			if d := float64(appended-endMs) / 1e3; r.Promotion < 0 || d < r.Promotion {
				r.Promotion = d
			}
			if !h.ok {
				continue
			}
			if d := float64(h.at-f.End.UnixNano()) / 1e9; r.Delivery[h.group] < 0 || d < r.Delivery[h.group] {
				r.Delivery[h.group] = d
			}
		}
		out = append(out, r)
	}
	return out
}

// finish sets the verdict.
func (s *Summary) finish() {
	s.Verdict = "PASS"
	if s.Violations > 0 {
		s.Verdict = fmt.Sprintf("FAIL (%d violations)", s.Violations)
	} else if len(s.Harness) > 0 {
		s.Verdict = "INCOMPLETE (the run itself failed)"
	}
}
