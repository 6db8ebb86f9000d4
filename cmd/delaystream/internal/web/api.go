package web

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/delaystream/delaystream/admin"
)

// The JSON API serves the documents of the CLI's --json output (admin's
// structs), except that payloads are replaced by bounded previews.

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

// DeadLetter is a dead letter as the JSON API serves it: admin's
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

func (s *Server) apiQueues(w http.ResponseWriter, r *http.Request) {
	in, _ := s.inspector(w, r)
	if in == nil {
		return
	}
	ctx, cancel := reqCtx(r)
	defer cancel()
	all, err := in.Stats(ctx)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	for i := range all {
		all[i].PerShard = nil
	}
	writeJSON(w, http.StatusOK, all)
}

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

func (s *Server) apiHistory(w http.ResponseWriter, r *http.Request) {
	in, prefix := s.inspector(w, r)
	if in == nil {
		return
	}
	writeJSON(w, http.StatusOK, s.History(prefix, r.PathValue("queue")))
}

// limitParam reads the "limit" query parameter: def when absent, clamped
// to 1..max.
func limitParam(r *http.Request, def, most int) int {
	n, err := strconv.Atoi(r.URL.Query().Get("limit"))
	if err != nil || n < 1 {
		return def
	}
	return min(n, most)
}

func (s *Server) apiNext(w http.ResponseWriter, r *http.Request) {
	in, _ := s.inspector(w, r)
	if in == nil {
		return
	}
	ctx, cancel := reqCtx(r)
	defer cancel()
	msgs, err := in.Peek(ctx, r.PathValue("queue"), admin.ListOptions{Limit: limitParam(r, peekCount, 1000)})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := make([]NextMessage, len(msgs))
	for i, m := range msgs {
		out[i] = NextMessage{ID: m.ID, Shard: m.Shard, Due: m.Due, Overdue: m.Overdue, Attempt: m.Attempt,
			Created: m.Created, Deadline: m.Deadline, Headers: m.Headers, Problem: m.Problem, preview: s.preview(m.Payload)}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) apiDead(w http.ResponseWriter, r *http.Request) {
	in, _ := s.inspector(w, r)
	if in == nil {
		return
	}
	after := r.URL.Query().Get("after")
	if after != "" && !entryIDPattern.MatchString(after) {
		s.failClean(w, r, http.StatusBadRequest, fmt.Sprintf("after=%q is not a dead-letter entry id (<ms>-<seq>, with @<shard> on a sharded queue).", after))
		return
	}
	ctx, cancel := reqCtx(r)
	defer cancel()
	dls, err := in.DeadLetters(ctx, r.PathValue("queue"), r.PathValue("group"),
		admin.ListOptions{After: after, Limit: limitParam(r, 100, 1000)})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := make([]DeadLetter, len(dls))
	for i, d := range dls {
		out[i] = DeadLetter{EntryID: d.EntryID, Shard: d.Shard, At: d.At, ID: d.ID, Reason: d.Reason,
			LastError: d.LastError, Attempt: d.Attempt, Deliveries: d.Deliveries, Decoded: d.Decoded,
			Due: d.Due, Created: d.Created, Headers: d.Headers, preview: s.preview(d.Payload)}
	}
	writeJSON(w, http.StatusOK, out)
}
