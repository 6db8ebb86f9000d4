package web

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"
)

// handlePause pauses or resumes a queue (POST …/q/{queue}/pause|resume)
// or one of its groups (…/g/{group}/pause|resume), posted by a page's
// button with the CSRF token, and redirects back to the page.
func (s *Server) handlePause(w http.ResponseWriter, r *http.Request) {
	in, prefix := s.actionInspector(w, r)
	if in == nil {
		return
	}
	queue, g, action := r.PathValue("queue"), r.PathValue("group"), path.Base(r.URL.Path)
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	ofGroup := strings.Contains(r.Pattern, "/g/{group}/") // a group's route, even with an empty name (refused)
	var err error
	switch {
	case ofGroup && action == "pause":
		_, err = in.Pause(ctx, queue, g)
	case ofGroup:
		_, err = in.Resume(ctx, queue, g)
	case action == "pause":
		_, err = in.PauseQueue(ctx, queue)
	default:
		_, err = in.ResumeQueue(ctx, queue)
	}
	what := "queue"
	if ofGroup {
		what = "group"
	}
	s.logAction(r, action+" "+what, err, slog.String("prefix", prefix), slog.String("queue", queue), slog.String("group", g))
	if err != nil {
		s.respondErr(w, r, err)
		return
	}
	s.redirectBack(w, r, prefix, queue, action+"d-"+what, 0, 0, 0)
}

// PauseAct returns the button that pauses (or, when paused, resumes) the
// queue, or with a group name that group, coming back to this page.
func (b base) PauseAct(group string, paused bool) actionForm {
	f := actionForm{CSRF: b.CSRF, Return: b.Path, All: true}
	f.Action = "/p/" + url.PathEscape(b.Prefix) + "/q/" + url.PathEscape(b.Queue)
	what := "queue " + b.Queue
	if group != "" {
		f.Action += "/g/" + url.PathEscape(group)
		what = "group " + group + " of " + b.Queue
	}
	if paused {
		f.Action += "/resume"
		f.Class, f.Label = "resume", "Resume"
		return f
	}
	f.Action += "/pause"
	f.Class, f.Label = "pause", "Pause"
	f.Confirm = "Pause " + what + " in every process?"
	return f
}
