package web

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
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

// recurringRows reads queue's recurring schedules.
func recurringRows(ctx context.Context, in *admin.Inspector, queue string) ([]recurringRow, error) {
	list, err := in.Recurring(ctx, queue, cron.Option())
	if err != nil {
		return nil, err
	}
	rows := make([]recurringRow, len(list))
	for i, st := range list {
		rows[i].RecurringStatus = st
		if late, ok := st.Lateness(); ok {
			rows[i].Late = late.Round(time.Millisecond).String()
		}
	}
	return rows, nil
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
	do := map[string]func(context.Context, string, string) error{
		"pause": in.PauseRecurring, "resume": in.ResumeRecurring, "delete": in.DeleteRecurring}[action]
	if err := do(ctx, queue, id); err != nil {
		s.fail(w, r, err)
		return
	}
	s.cfg.logger.InfoContext(ctx, "web: recurring "+action, slog.String("prefix", prefix), slog.String("queue", queue),
		slog.String("schedule", id))
	back := localPath(r.PostFormValue("return"))
	if back == "" {
		back = "/p/" + url.PathEscape(prefix) + "/q/" + url.PathEscape(queue)
	}
	u, _ := url.Parse(back) // localPath checked it
	q := u.Query()
	for _, k := range []string{"did", "n", "missing", "unrecoverable", "recurring", "schedule"} {
		q.Del(k)
	}
	q.Set("recurring", action)
	q.Set("schedule", id)
	u.RawQuery = q.Encode()
	http.Redirect(w, r, u.String(), http.StatusSeeOther)
}

// recurringFlash is the message after a recurring schedule's action.
func recurringFlash(q url.Values) string {
	verb := map[string]string{"pause": "Paused", "resume": "Resumed", "delete": "Deleted"}[q.Get("recurring")]
	if verb == "" {
		return ""
	}
	return fmt.Sprintf("%s recurring schedule %s.", verb, q.Get("schedule"))
}
