package web

import (
	"context"
	"net/http"
	"time"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/admin"
)

// locatePage is the places of one message id in a queue (delaystream.Queue.Locate).
type locatePage struct {
	base
	ID  string
	Loc *delaystream.Location // nil until an id is asked for
	Now time.Time
}

// handleLocate finds a message by id (?id=) and shows every place of it:
// waiting, ready or pending in a group, retrying, dead-lettered,
// quarantined, handled (by a group that keeps handled records).
func (s *Server) handleLocate(w http.ResponseWriter, r *http.Request) {
	in, _ := s.inspector(w, r)
	if in == nil {
		return
	}
	p := locatePage{base: s.base(r, "Find a message"), ID: r.URL.Query().Get("id"), Now: time.Now()}
	if p.ID != "" {
		ctx, cancel := reqCtx(r)
		defer cancel()
		loc, err := locate(ctx, in, r.PathValue("queue"), p.ID)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		p.Loc = &loc
	}
	s.render(w, r, http.StatusOK, "locate", p)
}

// apiLocate serves the places of one message id (?id=) as JSON.
func (s *Server) apiLocate(w http.ResponseWriter, r *http.Request) {
	in, _ := s.inspector(w, r)
	if in == nil {
		return
	}
	id := r.URL.Query().Get("id")
	if id == "" {
		s.failClean(w, r, http.StatusBadRequest, "id is required.")
		return
	}
	ctx, cancel := reqCtx(r)
	defer cancel()
	loc, err := locate(ctx, in, r.PathValue("queue"), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, loc)
}

// locate returns every place of message id in queue.
func locate(ctx context.Context, in *admin.Operator, queue, id string) (delaystream.Location, error) {
	q, err := in.Queue(ctx, queue)
	if err != nil {
		return delaystream.Location{}, err
	}
	return q.Locate(ctx, id)
}
