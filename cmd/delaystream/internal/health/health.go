package health

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/admin"
	"github.com/delaystream/delaystream/internal/memory"
)

// Status is the outcome of one check.
type Status string

// The outcomes of a check: only Fail fails /health.
const (
	OK   Status = "ok"
	Warn Status = "warn" // worth a look, not an outage: a paused queue or group, a server nearly full
	Fail Status = "fail"
)

// Check is one check's outcome: what it is about and what it found.
type Check struct {
	Status  Status `json:"status"`
	Subject string `json:"subject"` // "redis <addr>", "queue <name>", "group <queue>/<group>"
	Detail  string `json:"detail"`
}

// Report is the outcome of every check of one /health request.
type Report struct {
	OK     bool    `json:"ok"`
	Checks []Check `json:"checks"`
}

// Limits are the bounds the checks hold the queues to.
type Limits struct {
	// MaxOverdue is how long a queue's earliest waiting message may be
	// past its due time before promotion counts as stalled.
	MaxOverdue time.Duration
	// NearlyFull is the share of maxmemory (0 to 1) from which a server
	// is reported as nearly full (a warning).
	NearlyFull float64
}

// DefaultLimits are the limits of the commands' flags' defaults.
var DefaultLimits = Limits{MaxOverdue: time.Minute, NearlyFull: 0.9}

// Timeout bounds one request's reads from Redis.
const Timeout = 5 * time.Second

// Run checks the servers of the Operators' clients (each once) and every
// queue under their prefixes.
func Run(ctx context.Context, ins []*admin.Operator, l Limits) Report {
	var r Report
	add := func(s Status, subject, format string, args ...any) {
		r.Checks = append(r.Checks, Check{Status: s, Subject: subject, Detail: fmt.Sprintf(format, args...)})
	}
	servers := map[string]bool{}
	for _, in := range ins {
		list, err := in.Memory(ctx)
		if err != nil {
			add(Fail, "redis", "unavailable: %v", err)
			continue
		}
		for _, s := range list {
			if !servers[s.Addr] {
				servers[s.Addr] = true
				checkServer(add, s, l)
			}
		}
	}
	for _, in := range ins {
		checkQueues(ctx, add, in, l)
	}
	r.OK = true
	for _, c := range r.Checks {
		if c.Status == Fail {
			r.OK = false
		}
	}
	return r
}

type adder func(s Status, subject, format string, args ...any)

func checkServer(add adder, s delaystream.RedisMemory, l Limits) {
	subject := "redis " + s.Addr
	switch {
	case !s.Known:
		add(OK, subject, "answers; memory settings unknown (%s)", s.Why)
	case s.Evicts():
		add(Fail, subject, "maxmemory-policy %s can evict the queues' keys (messages are lost): set noeviction", s.Policy)
	case s.Max > 0 && s.Used >= s.Max:
		add(Fail, subject, "full: used %s of maxmemory %s; with noeviction, Schedule is refused until the groups drain",
			memory.Bytes(s.Used), memory.Bytes(s.Max))
	case s.Max > 0 && float64(s.Used) >= l.NearlyFull*float64(s.Max):
		add(Warn, subject, "nearly full: used %s of maxmemory %s", memory.Bytes(s.Used), memory.Bytes(s.Max))
	case s.Max > 0:
		add(OK, subject, "used %s of maxmemory %s, policy %s", memory.Bytes(s.Used), memory.Bytes(s.Max), s.Policy)
	default:
		add(OK, subject, "used %s, no maxmemory", memory.Bytes(s.Used))
	}
}

func checkQueues(ctx context.Context, add adder, in *admin.Operator, l Limits) {
	reports, err := in.Stats(ctx)
	if err != nil {
		add(Fail, "queues", "cannot be read: %v", err)
		return
	}
	for _, q := range reports {
		checkQueue(add, q, l)
		if len(q.Groups) == 0 {
			continue
		}
		groups, err := in.Groups(ctx, q.Queue)
		if err != nil {
			add(Fail, "queue "+q.Queue, "groups cannot be read: %v", err)
			continue
		}
		for _, g := range groups {
			checkGroup(add, q.Queue, g)
		}
	}
}

func checkQueue(add adder, q admin.QueueReport, l Limits) {
	subject := "queue " + q.Queue
	late := q.OverdueBy()
	switch {
	case !q.PausedSince.IsZero():
		add(Warn, subject, "promotion paused since %s; %d waiting, %d overdue", q.PausedSince.UTC().Format(time.RFC3339), q.Waiting, q.Overdue)
	case late > l.MaxOverdue:
		add(Fail, subject, "the earliest waiting message is overdue by %s (over %s): no mover promotes it; is a process with promotion running?",
			late.Round(time.Second), l.MaxOverdue)
	case q.Quarantined > 0:
		add(Warn, subject, "%d entries in quarantine (waiting members promotion could not read); %d waiting", q.Quarantined, q.Waiting)
	default:
		add(OK, subject, "%d waiting, %d overdue", q.Waiting, q.Overdue)
	}
}

func checkGroup(add adder, queue string, g admin.GroupReport) {
	subject := "group " + queue + "/" + g.Group
	live := 0
	for _, c := range g.ConsumerList {
		if c.Live {
			live++
		}
	}
	work := g.Lag > 0 || g.Pending > 0 || g.RetryWaiting > 0
	switch {
	case g.Foreign:
		add(OK, subject, "made by other means: %d consumers, %d pending", g.Consumers, g.Pending)
	case !g.PausedSince.IsZero():
		add(Warn, subject, "paused since %s; %d unread, %d pending", g.PausedSince.UTC().Format(time.RFC3339), max(g.Lag, 0), g.Pending)
	case work && live == 0:
		add(Fail, subject, "no live consumer, with %d unread, %d pending and %d waiting to retry", max(g.Lag, 0), g.Pending, g.RetryWaiting)
	default:
		add(OK, subject, "%d live consumers; %d unread, %d pending, %d dead letters", live, max(g.Lag, 0), g.Pending, g.DeadLetters)
	}
}

// Ping is /healthz: 200 "ok" when Redis answers PING within Timeout,
// else 503 naming the error. It names no queue.
func Ping(rdb redis.UniversalClient) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), Timeout)
		defer cancel()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if err := rdb.Ping(ctx).Err(); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "redis unavailable: %v\n", err)
			return
		}
		fmt.Fprintln(w, "ok")
	})
}

// Handler is /health: it runs every check on the Operators ins returns
// and answers 200 when none fails, else 503, with a line per check
// ("ok    queue orders: 3 waiting, 0 overdue"), or the Report as JSON when
// asked for.
func Handler(ins func() []*admin.Operator, l Limits) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), Timeout)
		defer cancel()
		rep := Run(ctx, ins(), l)
		w.Header().Set("Cache-Control", "no-store")
		code := http.StatusOK
		if !rep.OK {
			code = http.StatusServiceUnavailable
		}
		if r.URL.Query().Get("format") == "json" || strings.Contains(r.Header.Get("Accept"), "application/json") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			_ = json.NewEncoder(w).Encode(rep)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(code)
		for _, c := range rep.Checks {
			fmt.Fprintf(w, "%-5s %s: %s\n", c.Status, c.Subject, c.Detail)
		}
	})
}
