package web

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/admin"
	"github.com/delaystream/delaystream/contrib/cron"
)

// recurringRow is a recurring schedule on the queue page.
type recurringRow struct {
	delaystream.RecurringStatus
	Late string // how late the last occurrence fired; "" when unknown
}

// recurringAfter reads up to limit recurring schedules of queue whose ids
// sort after after, and returns them with the id to start the next page
// after ("" when none is left). It lists the ids (one HSCAN pass) and reads
// the states of the page's schedules only; one deleted meanwhile is left
// out.
func recurringAfter(ctx context.Context, in *admin.Operator, queue, after string, limit int) ([]recurringRow, string, error) {
	ids, err := in.RecurringIDs(ctx, queue)
	if err != nil {
		return nil, "", err
	}
	i, _ := slices.BinarySearch(ids, after)
	if i < len(ids) && ids[i] == after {
		i++
	}
	ids = ids[i:]
	next := ""
	if len(ids) > limit {
		ids = ids[:limit]
		next = ids[limit-1]
	}
	q, err := in.Queue(ctx, queue, cron.Option())
	if err != nil {
		return nil, "", err
	}
	rows := make([]recurringRow, 0, len(ids))
	for _, id := range ids {
		st, err := q.GetRecurring(ctx, id)
		if errors.Is(err, delaystream.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, "", err
		}
		row := recurringRow{RecurringStatus: st}
		if late, ok := st.Lateness(); ok {
			row.Late = late.Round(time.Millisecond).String()
		}
		rows = append(rows, row)
	}
	return rows, next, nil
}

// RecurAct returns the form of action ("pause", "resume" or "delete") on
// recurring schedule id, coming back to this page.
func (b base) RecurAct(id, action string) actionForm {
	f := actionForm{CSRF: b.CSRF, Return: b.Path, ID: id, Class: "recurring-" + action,
		Action: "/p/" + url.PathEscape(b.Prefix) + "/q/" + url.PathEscape(b.Queue) + "/r/" + url.PathEscape(id) + "/" + action}
	switch action {
	case "pause":
		f.Label = "Pause"
	case "resume":
		f.Label = "Resume"
	case "delete":
		f.Label = "Delete"
		f.Confirm = "Delete recurring schedule " + id + " and its waiting occurrences?"
	}
	return f
}

// handleRecurringAction pauses, resumes or deletes a recurring schedule
// and redirects back with a flash.
func (s *Server) handleRecurringAction(w http.ResponseWriter, r *http.Request) {
	action := r.PathValue("action")
	if action != "pause" && action != "resume" && action != "delete" {
		http.NotFound(w, r)
		return
	}
	in, prefix := s.actionInspector(w, r)
	if in == nil {
		return
	}
	queue, id := r.PathValue("queue"), r.PathValue("id")
	ctx, cancel := context.WithTimeout(r.Context(), time.Minute)
	defer cancel()
	q, err := in.Queue(ctx, queue)
	if err == nil {
		do := map[string]func(context.Context, string) error{
			"pause": q.PauseRecurring, "resume": q.ResumeRecurring, "delete": q.DeleteRecurring}[action]
		err = do(ctx, id)
	}
	s.logAction(r, "recurring "+action, err, slog.String("prefix", prefix), slog.String("queue", queue),
		slog.String("schedule", id))
	if err != nil {
		s.respondErr(w, r, err)
		return
	}
	s.redirectBack(w, r, prefix, queue, "recurring-"+action, 0, 0, 0)
}
