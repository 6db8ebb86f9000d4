package web

import (
	"context"
	"net/http"
	"time"

	"github.com/delaystream/delaystream/admin"
)

// The JSON API serves the documents of the CLI's --json output (admin's
// structs), except that payloads are replaced by bounded previews. Every
// list is paged as the pages are (see DefaultListLimit): the body is the
// page, a JSON array, and a Link header with rel="next" names the next
// page when there is one.

// NextMessage is a waiting message as the JSON API serves it: admin's
// WaitingMessage without its payload, with a bounded preview.
type NextMessage struct {
	ID       string            `json:"id"`
	Shard    int               `json:"shard"`
	Due      time.Time         `json:"due,omitzero"`
	Overdue  bool              `json:"overdue"`
	Attempt  int               `json:"attempt,omitempty"`
	Created  time.Time         `json:"created,omitzero"`
	Deadline time.Time         `json:"deadline,omitzero"`
	Headers  map[string]string `json:"headers,omitempty"`
	Problem  string            `json:"problem,omitempty"`
	preview
}

// DeadLetter is a dead letter as the JSON API serves it: delaystream's
// DeadLetterEntry without its payload, with a bounded preview.
type DeadLetter struct {
	EntryID    string            `json:"entry_id"`
	Shard      int               `json:"shard"`
	At         time.Time         `json:"at"`
	ID         string            `json:"id"`
	Reason     string            `json:"reason"`
	LastError  string            `json:"last_error"`
	Attempt    int               `json:"attempt"`
	Deliveries int64             `json:"deliveries"`
	Decoded    bool              `json:"decoded"`
	Due        time.Time         `json:"due,omitzero"`
	Created    time.Time         `json:"created,omitzero"`
	Headers    map[string]string `json:"headers,omitempty"`
	preview
}

// QuarantinedEntry is a quarantined entry as the JSON API serves it:
// delaystream's Quarantined without its raw bytes, with a bounded preview
// of them (of the member when it holds no envelope).
type QuarantinedEntry struct {
	EntryID string    `json:"entry_id"`
	Shard   int       `json:"shard"`
	Lane    string    `json:"lane"`
	At      time.Time `json:"at"`
	ID      string    `json:"id"`
	Due     time.Time `json:"due,omitzero"`
	Reason  string    `json:"reason"`
	preview
}

// RecurringSchedule is a recurring schedule as the JSON API serves it:
// its state, not its payload.
type RecurringSchedule struct {
	ID          string    `json:"id"`
	SpecKind    string    `json:"spec_kind"`
	SpecText    string    `json:"spec"`
	Missed      string    `json:"missed"`
	Paused      bool      `json:"paused"`
	Revision    int64     `json:"revision"`
	Next        time.Time `json:"next,omitzero"`
	Last        time.Time `json:"last,omitzero"`
	LastFired   time.Time `json:"last_fired,omitzero"`
	LastWritten time.Time `json:"last_written,omitzero"`
	LateMs      *int64    `json:"late_ms,omitempty"` // how late Last was appended; absent when unknown
}

// APIEndpoint is one entry of the API's index (GET /api/).
type APIEndpoint struct {
	Path  string `json:"path"`            // with {prefix}, {queue}, {group} to fill in
	Query string `json:"query,omitempty"` // the query parameters it takes
	Doc   string `json:"doc"`
}

// apiIndex lists the API's documents, as GET /api/ serves them.
var apiIndex = []APIEndpoint{
	{Path: "/api/p/{prefix}/queues", Query: "after, limit", Doc: "a page of the queues under the prefix, with their figures and their groups'"},
	{Path: "/api/p/{prefix}/q/{queue}", Query: "shards=1", Doc: "one queue's figures (with each shard's)"},
	{Path: "/api/p/{prefix}/q/{queue}/history", Doc: "the waiting and overdue samples of this process, for the chart"},
	{Path: "/api/p/{prefix}/q/{queue}/counts", Doc: "the counts Redis keeps of the queue's work (promoted, quarantined; each group's handled, dropped, retried, dead-lettered): totals, the last minute, hour and day, per minute and per hour"},
	{Path: "/api/p/{prefix}/q/{queue}/locate", Query: "id", Doc: "every place of one message (waiting, ready, pending, retrying, dead-lettered, quarantined, handled)"},
	{Path: "/api/p/{prefix}/q/{queue}/next", Query: "offset, limit", Doc: "a page of the waiting messages, earliest due first, payloads as previews"},
	{Path: "/api/p/{prefix}/q/{queue}/g/{group}/dead", Query: "after (an entry id), limit", Doc: "a page of the group's dead letters, payloads as previews"},
	{Path: "/api/p/{prefix}/q/{queue}/recurring", Query: "after, limit", Doc: "a page of the queue's recurring schedules"},
	{Path: "/api/p/{prefix}/q/{queue}/quarantine", Query: "offset, limit", Doc: "a page of the quarantined entries, as previews"},
	{Path: "/health", Query: "format=json", Doc: "the health checks (servers, promotion, consumers): 503 when one fails"},
	{Path: "/metrics", Doc: "Prometheus metrics of every queue under the prefixes served (as the exporter's), when the server was built with them (delaystream serve)"},
	{Path: "/healthz", Doc: "200 when Redis answers PING, else 503; needs no credentials"},
}

// apiIndexHandler serves the index of the API: the prefixes served and
// the documents.
func (s *Server) apiIndexHandler(w http.ResponseWriter, _ *http.Request) {
	list := make([]APIEndpoint, 0, len(apiIndex))
	for _, e := range apiIndex {
		if e.Path == "/metrics" && s.cfg.metrics == nil {
			continue // not served
		}
		list = append(list, e)
	}
	writeJSON(w, http.StatusOK, struct {
		Prefixes  []string      `json:"prefixes"`
		Endpoints []APIEndpoint `json:"endpoints"`
	}{s.Prefixes(), list})
}

// apiQueues serves a page of the queues' figures (?after=<queue>&limit=).
func (s *Server) apiQueues(w http.ResponseWriter, r *http.Request) {
	servePagedByCursor(s, w, r, queuesAfter, func(_ context.Context, all []admin.QueueReport, p pager) {
		for i := range all {
			all[i].PerShard = nil
		}
		writePage(w, p, all)
	})
}

// apiQueue serves one queue's figures, with those of each shard when
// ?shards=1.
func (s *Server) apiQueue(w http.ResponseWriter, r *http.Request) {
	in, _ := s.inspector(w, r)
	if in == nil {
		return
	}
	ctx, cancel := reqCtx(r)
	defer cancel()
	rs, err := in.Stats(ctx, r.PathValue("queue"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if r.URL.Query().Get("shards") != "1" {
		rs[0].PerShard = nil
	}
	writeJSON(w, http.StatusOK, rs[0])
}

// apiHistory serves the samples kept of one queue's figures.
func (s *Server) apiHistory(w http.ResponseWriter, r *http.Request) {
	in, prefix := s.inspector(w, r)
	if in == nil {
		return
	}
	writeJSON(w, http.StatusOK, s.History(prefix, r.PathValue("queue")))
}

// apiCounts serves the counts Redis keeps of one queue's work.
func (s *Server) apiCounts(w http.ResponseWriter, r *http.Request) {
	in, prefix := s.inspector(w, r)
	if in == nil {
		return
	}
	ctx, cancel := reqCtx(r)
	defer cancel()
	h, err := s.counts.get(ctx, in, prefix, r.PathValue("queue"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, h)
}

// apiNext serves a page of the waiting messages, earliest first
// (?offset=&limit=, default limit 20).
func (s *Server) apiNext(w http.ResponseWriter, r *http.Request) {
	servePagedByOffset(s, w, r, peekCount, s.nextRowsMore, func(_ context.Context, rows []nextRow, _ int, p pager) {
		out := make([]NextMessage, len(rows))
		for i, row := range rows {
			m := row.WaitingMessage
			out[i] = NextMessage{ID: m.ID, Shard: m.Shard, Due: m.Due, Overdue: m.Overdue, Attempt: m.Attempt,
				Created: m.Created, Deadline: m.Deadline, Headers: m.Headers, Problem: m.Problem, preview: row.Shown}
		}
		writePage(w, p, out)
	})
}

// apiDead serves a page of a group's dead letters, oldest first
// (?after=<entry id>&limit=).
func (s *Server) apiDead(w http.ResponseWriter, r *http.Request) {
	in, _ := s.inspector(w, r)
	if in == nil {
		return
	}
	after := r.URL.Query().Get("after")
	if after != "" && !entryIDPattern.MatchString(after) {
		s.failClean(w, r, http.StatusBadRequest, badAfter)
		return
	}
	limit := limitParam(r, DefaultListLimit, MaxListLimit)
	ctx, cancel := reqCtx(r)
	defer cancel()
	dls, next, err := s.deadAfter(ctx, in, r.PathValue("queue"), r.PathValue("group"), after, limit)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := make([]DeadLetter, len(dls))
	for i, d := range dls {
		out[i] = DeadLetter{EntryID: d.EntryID, Shard: d.Shard, At: d.At, ID: d.ID, Reason: d.Reason,
			LastError: d.LastError, Attempt: d.Attempt, Deliveries: d.Deliveries, Decoded: d.Decoded,
			Due: d.Due, Created: d.Created, Headers: d.Headers, preview: s.preview(d.Payload, d.Size)}
	}
	writePage(w, cursorPager(r, after, next, limit), out)
}

// apiRecurring serves a page of the recurring schedules, by id
// (?after=<id>&limit=).
func (s *Server) apiRecurring(w http.ResponseWriter, r *http.Request) {
	servePagedByCursor(s, w, r, queueRecurringAfter(r), func(_ context.Context, rows []recurringRow, p pager) {
		out := make([]RecurringSchedule, len(rows))
		for i, row := range rows {
			st := row.RecurringStatus
			out[i] = RecurringSchedule{ID: st.ID, SpecKind: st.SpecKind, SpecText: st.SpecText, Missed: st.Missed.String(),
				Paused: st.Paused, Revision: st.Revision, Next: st.Next, Last: st.Last, LastFired: st.LastFired,
				LastWritten: st.LastWritten}
			if late, ok := st.Lateness(); ok {
				ms := late.Milliseconds()
				out[i].LateMs = &ms
			}
		}
		writePage(w, p, out)
	})
}

// apiQuarantine serves a page of the quarantine, oldest first
// (?offset=&limit=).
func (s *Server) apiQuarantine(w http.ResponseWriter, r *http.Request) {
	servePagedByOffset(s, w, r, DefaultListLimit, s.quarantineRowsMore, func(_ context.Context, rows []quarantineRow, _ int, p pager) {
		out := make([]QuarantinedEntry, len(rows))
		for i, row := range rows {
			q := row.Quarantined
			out[i] = QuarantinedEntry{EntryID: q.EntryID, Shard: q.Shard, Lane: q.Lane, At: q.At, ID: q.ID, Due: q.Due,
				Reason: q.Reason, preview: row.Shown}
		}
		writePage(w, p, out)
	})
}
