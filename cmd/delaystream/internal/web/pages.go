package web

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/admin"
)

//go:embed templates
var templateFS embed.FS

// pages are the parsed templates, one set per page.
type pages struct {
	byName map[string]*template.Template
}

var pageNames = []string{"index", "queues", "queue", "group", "next", "recurring", "quarantine", "locate", "error"}

func parsePages() (*pages, error) {
	p := &pages{byName: map[string]*template.Template{}}
	for _, n := range pageNames {
		t, err := template.New(n).Funcs(funcs).ParseFS(templateFS,
			"templates/layout.html", "templates/parts.html", "templates/"+n+".html")
		if err != nil {
			return nil, fmt.Errorf("web: template %s: %w", n, err)
		}
		p.byName[n] = t
	}
	return p, nil
}

// base is what every page's layout shows.
type base struct {
	Title    string
	Prefix   string // "" on the index
	Queue    string
	Group    string
	Prefixes []string
	ReadOnly bool
	CSRF     string
	Path     string // the page's own path and query, where actions return
	Flash    string
	Error    string
	Evicting []delaystream.RedisMemory // Redis servers that may evict the queues' keys
	// RefreshMs is how often the page's tables and figures are read
	// again (app.js): the sample interval, at least 1 s.
	RefreshMs int64
}

// render executes page into a buffer first, so that a failing template
// yields a clean 500 instead of half a page.
func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, page string, data any) {
	var buf bytes.Buffer
	if err := s.pages.byName[page].ExecuteTemplate(&buf, "layout", data); err != nil {
		s.cfg.logger.ErrorContext(r.Context(), "web: render failed", slog.String("page", page), slog.Any("err", err))
		http.Error(w, "internal error: could not render the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = buf.WriteTo(w)
}

func (s *Server) base(r *http.Request, title string) base {
	b := base{Title: title, Prefix: r.PathValue("prefix"), Queue: r.PathValue("queue"),
		Group: r.PathValue("group"), Prefixes: s.cfg.prefixes, ReadOnly: s.cfg.readOnly, CSRF: s.token,
		Path: r.URL.EscapedPath()}
	if r.URL.RawQuery != "" {
		b.Path += "?" + r.URL.RawQuery
	}
	b.Flash = flash(r.URL.Query())
	b.Evicting = s.evicting(r.Context())
	b.RefreshMs = max(s.cfg.sampleInterval, time.Second).Milliseconds()
	return b
}

// flashCodes are the status messages shown after an action redirected
// back to a page, by the code the redirect carries ("did"): fixed
// sentences, into which only counts are put ("n", "missing",
// "unrecoverable", read as numbers), never text of the request. A code
// not here shows nothing.
var flashCodes = map[string]func(n, missing, unrecoverable int) string{
	"redrive": func(n, missing, unrecoverable int) string {
		return counted("Redrove", n, "dead letter", "dead letters", missing) +
			also(unrecoverable, " could not be redriven (no valid envelope): purge them instead.")
	},
	"purge": func(n, missing, _ int) string {
		return counted("Purged", n, "dead letter", "dead letters", missing)
	},
	"restore": func(n, missing, unrecoverable int) string {
		return counted("Restored", n, "quarantined entry", "quarantined entries", missing) +
			also(unrecoverable, " could not be restored (no message id or valid envelope): delete them instead.")
	},
	"rm": func(n, missing, _ int) string {
		return counted("Deleted", n, "quarantined entry", "quarantined entries", missing)
	},
	"paused-queue":     fixed("Paused the queue: nothing is promoted until it is resumed."),
	"resumed-queue":    fixed("Resumed the queue."),
	"paused-group":     fixed("Paused the group: its consumers take no new entries until it is resumed."),
	"resumed-group":    fixed("Resumed the group."),
	"recurring-pause":  fixed("Paused the recurring schedule."),
	"recurring-resume": fixed("Resumed the recurring schedule."),
	"recurring-delete": fixed("Deleted the recurring schedule and its waiting occurrences."),
}

// flashKeys are the query parameters of a flash message, removed from a
// page's links (a redirect after another action, the next page of a list).
var flashKeys = []string{"did", "n", "missing", "unrecoverable"}

// flash is the message shown after an action redirected back (see
// flashCodes); "" when the query carries none.
func flash(q url.Values) string {
	msg, ok := flashCodes[q.Get("did")]
	if !ok {
		return ""
	}
	return msg(count(q.Get("n")), count(q.Get("missing")), count(q.Get("unrecoverable")))
}

// count reads a count of a flash message: a number from 0 to 1e9, else 0.
func count(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > 1e9 {
		return 0
	}
	return n
}

func fixed(msg string) func(int, int, int) string {
	return func(int, int, int) string { return msg }
}

// counted says "<verb> <n> <what>." and how many of those asked for no
// longer existed.
func counted(verb string, n int, one, many string, missing int) string {
	what := many
	if n == 1 {
		what = one
	}
	return fmt.Sprintf("%s %d %s.", verb, n, what) + also(missing, " no longer existed.")
}

// also is " <n><rest>" when n > 0, else "".
func also(n int, rest string) string {
	if n <= 0 {
		return ""
	}
	return " " + strconv.Itoa(n) + rest
}

// inspector returns the Operator of the request's prefix and the prefix,
// or answers 404 and returns nil.
func (s *Server) inspector(w http.ResponseWriter, r *http.Request) (*admin.Operator, string) {
	prefix := r.PathValue("prefix")
	in := s.ins[prefix]
	if in == nil {
		s.fail(w, r, fmt.Errorf("this prefix is not served here: %w", delaystream.ErrNotFound))
	}
	return in, prefix
}

// statusOf maps an admin error to an HTTP status.
func statusOf(err error) int {
	switch {
	case errors.Is(err, delaystream.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, delaystream.ErrInvalidOption), errors.Is(err, delaystream.ErrInvalidName),
		errors.Is(err, delaystream.ErrInvalidMessage):
		return http.StatusBadRequest
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout
	}
	return http.StatusBadGateway
}

// fail shows err on an error page (or as JSON under /api/), and logs it
// when the fault is not the request's (5xx).
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	if statusOf(err) >= 500 {
		s.cfg.logger.WarnContext(r.Context(), "web: request failed", slog.String("path", r.URL.Path), slog.Any("err", err))
	}
	s.respondErr(w, r, err)
}

// respondErr shows err on an error page (or as JSON under /api/), logging
// nothing: for a failure its caller has logged.
func (s *Server) respondErr(w http.ResponseWriter, r *http.Request, err error) {
	code := statusOf(err)
	if strings.HasPrefix(r.URL.Path, "/api/") {
		writeJSON(w, code, map[string]string{"error": err.Error()})
		return
	}
	b := s.base(r, http.StatusText(code))
	b.Error = err.Error()
	s.render(w, r, code, "error", struct{ base }{b})
}

// failClean answers code with msg, a sentence about the request (no
// error chain).
func (s *Server) failClean(w http.ResponseWriter, r *http.Request, code int, msg string) {
	if strings.HasPrefix(r.URL.Path, "/api/") {
		writeJSON(w, code, map[string]string{"error": msg})
		return
	}
	b := s.base(r, http.StatusText(code))
	b.Error = msg
	s.render(w, r, code, "error", struct{ base }{b})
}

// entryIDPattern matches a dead-letter entry id: "<ms>-<seq>", with
// "@<shard>" on a sharded queue.
var entryIDPattern = regexp.MustCompile(`^\d+-\d+(@\d+)?$`)

// reqCtx bounds the Redis reads of one request.
func reqCtx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), 10*time.Second)
}

func (s *Server) handleIndex(w http.ResponseWriter, r *http.Request) {
	if len(s.cfg.prefixes) == 1 {
		http.Redirect(w, r, "/p/"+url.PathEscape(s.cfg.prefixes[0])+"/", http.StatusFound)
		return
	}
	s.render(w, r, http.StatusOK, "index", struct{ base }{s.base(r, "Prefixes")})
}

// queuesPage lists a page of the queues of one prefix.
type queuesPage struct {
	base
	Queues []admin.QueueReport
	Pager  pager
}

// handleQueues serves the queues of a prefix page by page
// (?after=<queue>&limit=).
func (s *Server) handleQueues(w http.ResponseWriter, r *http.Request) {
	servePagedByCursor(s, w, r, queuesAfter, func(_ context.Context, all []admin.QueueReport, pg pager) {
		s.render(w, r, http.StatusOK, "queues", queuesPage{base: s.base(r, "Queues under "+r.PathValue("prefix")), Queues: all,
			Pager: pg})
	})
}

// queuesAfter returns the figures of up to limit queues of in whose names
// sort after after, and the name to start the next page after ("" when
// none is left). It finds the names first (admin.Operator.Queues), then
// reads the figures of the page's queues only.
func queuesAfter(ctx context.Context, in *admin.Operator, after string, limit int) ([]admin.QueueReport, string, error) {
	qs, err := in.Queues(ctx)
	if err != nil {
		return nil, "", err
	}
	var names []string
	for _, q := range qs {
		if q.Name > after {
			names = append(names, q.Name)
		}
	}
	next := ""
	if len(names) > limit {
		names = names[:limit]
		next = names[limit-1]
	}
	if len(names) == 0 {
		return []admin.QueueReport{}, "", nil // Stats of no name would read every queue
	}
	all, err := in.Stats(ctx, names...)
	return all, next, err
}

// queuePage is one queue: its figures, chart, and the first few of each of
// its lists (next due messages, each group's dead letters, recurring
// schedules, quarantine), each with a link to all of it.
type queuePage struct {
	base
	Stats       admin.QueueReport
	Chart       chart
	Counts      countsSection
	IntervalMs  int64
	Next        []nextRow
	Groups      []groupSection
	Quarantine  []quarantineRow
	Recurring   []recurringRow
	PeekCount   int
	QuarCount   int
	SampleSince time.Time
}

// nextRow is a waiting message with its bounded preview.
type nextRow struct {
	admin.WaitingMessage
	Shown preview
}

// groupSection is a group's figures and its first dead letters.
type groupSection struct {
	admin.GroupReport
	Dead []deadRow
}

// deadRow is a dead letter with its bounded preview.
type deadRow struct {
	delaystream.DeadLetterEntry
	Shown preview
}

// quarantineRow is a quarantined entry with its bounded preview.
type quarantineRow struct {
	delaystream.Quarantined
	Shown preview
}

func (s *Server) handleQueue(w http.ResponseWriter, r *http.Request) {
	in, prefix := s.inspector(w, r)
	if in == nil {
		return
	}
	queue := r.PathValue("queue")
	ctx, cancel := reqCtx(r)
	defer cancel()
	rs, err := in.Stats(ctx, queue)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	st := rs[0]
	p := queuePage{base: s.base(r, queue), Stats: st, IntervalMs: s.cfg.sampleInterval.Milliseconds(),
		PeekCount: peekCount, QuarCount: queueQuarCount, Chart: newChart(s.hist.get(prefix, queue))}
	if h, err := s.counts.get(ctx, in, prefix, queue); err != nil {
		s.cfg.logger.WarnContext(r.Context(), "web: counts not read", slog.String("queue", queue), slog.Any("err", err))
		p.Counts.Err = "The counts could not be read from Redis."
	} else {
		p.Counts = newCountsSection(h)
	}
	if p.Next, err = s.nextRows(ctx, in, queue, 0, peekCount); err != nil {
		s.fail(w, r, err)
		return
	}
	for _, g := range st.Groups {
		sec := groupSection{GroupReport: g}
		if g.DeadLetters > 0 && !g.Foreign {
			dls, err := in.DeadLetters(ctx, queue, g.Group, s.listOpts(admin.ListOptions{Limit: queueDeadCount}))
			if err != nil {
				s.fail(w, r, err)
				return
			}
			sec.Dead = s.deadRows(dls)
		}
		p.Groups = append(p.Groups, sec)
	}
	if st.Recurring > 0 {
		if p.Recurring, _, err = recurringAfter(ctx, in, queue, "", queueRecurring); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	if st.Quarantined > 0 {
		if p.Quarantine, err = s.quarantineRows(ctx, in, queue, 0, queueQuarCount); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	if ms := s.started.Load(); ms > 0 {
		p.SampleSince = time.UnixMilli(ms)
	}
	s.render(w, r, http.StatusOK, "queue", p)
}

// listOpts returns o reading at most ReadBytes of each payload: enough
// for the previews, never a whole large payload.
func (s *Server) listOpts(o admin.ListOptions) admin.ListOptions {
	o.MaxPayloadBytes = ReadBytes(s.cfg.previewBytes)
	return o
}

// deadAfter reads up to limit dead letters of group on queue whose entry
// ids follow after, payloads cut as listOpts cuts them, and returns them
// with the entry id to start the next page after ("" when none follows).
func (s *Server) deadAfter(ctx context.Context, in *admin.Operator, queue, group, after string, limit int) ([]delaystream.DeadLetterEntry, string, error) {
	dls, err := in.DeadLetters(ctx, queue, group, s.listOpts(admin.ListOptions{After: after, Limit: limit + 1}))
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(dls) > limit {
		dls = dls[:limit]
		next = dls[len(dls)-1].EntryID
	}
	return dls, next, nil
}

// deadRows returns dls with their previews.
func (s *Server) deadRows(dls []delaystream.DeadLetterEntry) []deadRow {
	out := make([]deadRow, len(dls))
	for i, d := range dls {
		out[i] = deadRow{DeadLetterEntry: d, Shown: s.preview(d.Payload, d.Size)}
	}
	return out
}

// handleChart serves the chart alone (an HTML fragment holding an inline
// SVG), which the page's script fetches to refresh it.
func (s *Server) handleChart(w http.ResponseWriter, r *http.Request) {
	in, prefix := s.inspector(w, r)
	if in == nil {
		return
	}
	c := newChart(s.hist.get(prefix, r.PathValue("queue")))
	var buf bytes.Buffer
	if err := s.pages.byName["queue"].ExecuteTemplate(&buf, "chart", c); err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = buf.WriteTo(w)
}

// groupPage is one group: its figures, consumers and a page of dead
// letters.
type groupPage struct {
	base
	Stats admin.GroupReport
	Rows  []deadRow
	Now   time.Time // the Redis clock
	After string    // this page starts after this entry id ("" first page)
	Pager pager
}

// badAfter is the answer to an "after" that is no dead-letter entry id: a
// fixed sentence, which does not repeat the request.
const badAfter = "after is not a dead-letter entry id (<ms>-<seq>, with @<shard> on a sharded queue)."

func (s *Server) handleGroup(w http.ResponseWriter, r *http.Request) {
	in, _ := s.inspector(w, r)
	if in == nil {
		return
	}
	queue, g := r.PathValue("queue"), r.PathValue("group")
	after := r.URL.Query().Get("after")
	if after != "" && !entryIDPattern.MatchString(after) {
		s.failClean(w, r, http.StatusBadRequest, badAfter)
		return
	}
	limit := limitParam(r, groupDeadCount, MaxListLimit)
	ctx, cancel := reqCtx(r)
	defer cancel()
	groups, err := in.Groups(ctx, queue)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	p := groupPage{base: s.base(r, queue+" / "+g), After: after}
	p.Stats.Group = g
	for _, gs := range groups {
		if gs.Group == g {
			p.Stats = gs
		}
	}
	next := ""
	if !p.Stats.Foreign { // a group delaystream did not make has no dead letters of its own
		var dls []delaystream.DeadLetterEntry
		if dls, next, err = s.deadAfter(ctx, in, queue, g, after, limit); err != nil {
			s.fail(w, r, err)
			return
		}
		p.Rows = s.deadRows(dls)
	}
	p.Pager = cursorPager(r, after, next, limit)
	if p.Now, err = s.rdb.Time(ctx).Result(); err != nil {
		s.fail(w, r, err)
		return
	}
	s.render(w, r, http.StatusOK, "group", p)
}

// handleAction runs a redrive or purge posted by a page's button: the form
// must carry the CSRF token, and the server must not be read-only. It
// answers with a redirect back to the page (303 See Other).
func (s *Server) handleAction(w http.ResponseWriter, r *http.Request) {
	action := r.PathValue("action")
	if action != "redrive" && action != "purge" {
		http.NotFound(w, r)
		return
	}
	in, prefix := s.actionInspector(w, r)
	if in == nil {
		return
	}
	queue, g := r.PathValue("queue"), r.PathValue("group")
	sel := admin.ActionOptions{IDs: r.PostForm["id"], All: r.PostFormValue("all") == "1"}
	ctx, cancel := context.WithTimeout(r.Context(), time.Minute)
	defer cancel()
	do := in.Purge
	if action == "redrive" {
		do = in.Redrive
	}
	res, err := do(ctx, queue, g, sel)
	s.logAction(r, action, err, slog.String("prefix", prefix), slog.String("queue", queue), slog.String("group", g),
		slog.Bool("all", sel.All), slog.Int("ids", len(sel.IDs)), slog.Int("done", res.Done), slog.Int("matched", res.Matched))
	if err != nil {
		s.respondErr(w, r, err)
		return
	}
	s.redirectBack(w, r, prefix, queue, action, res.Done, len(res.NotFound), len(res.Unrecoverable))
}

// logAction logs an action the web view performed (or tried to), with who
// asked for it (see actor) and attrs: at Info when it succeeded, at Warn
// with err when it failed.
func (s *Server) logAction(r *http.Request, action string, err error, attrs ...slog.Attr) {
	attrs = append(s.actor(r), attrs...)
	if err != nil {
		s.cfg.logger.LogAttrs(r.Context(), slog.LevelWarn, "web: "+action+" failed", append(attrs, slog.Any("err", err))...)
		return
	}
	s.cfg.logger.LogAttrs(r.Context(), slog.LevelInfo, "web: "+action, attrs...)
}

// actor says who asked for an action: the remote address of the request
// (a proxy's, behind one) and, with basic auth, the user it proved to be.
func (s *Server) actor(r *http.Request) []slog.Attr {
	attrs := []slog.Attr{slog.String("remote", r.RemoteAddr)}
	if s.cfg.auth {
		if u, _, ok := r.BasicAuth(); ok {
			attrs = append(attrs, slog.String("user", u))
		}
	}
	return attrs
}

// checkPost refuses (and answers) an action posted to a read-only server,
// with a bad form or without this process's CSRF token, and reports
// whether the action may go on. A refusal is logged with who posted it.
func (s *Server) checkPost(w http.ResponseWriter, r *http.Request) bool {
	refuse := func(code int, why, msg string) bool {
		s.cfg.logger.LogAttrs(r.Context(), slog.LevelWarn, "web: action refused",
			append(s.actor(r), slog.String("path", r.URL.Path), slog.String("why", why))...)
		http.Error(w, msg, code)
		return false
	}
	if s.cfg.readOnly {
		return refuse(http.StatusForbidden, "read-only", "read-only: actions are disabled (--read-only)")
	}
	r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
	if err := r.ParseForm(); err != nil {
		return refuse(http.StatusBadRequest, "bad form", "bad form")
	}
	if !s.checkToken(r) {
		return refuse(http.StatusForbidden, "csrf token", "missing or invalid CSRF token: reload the page and try again")
	}
	return true
}

// localPath returns p when it is a path of this server ("/..." but not
// "//host" or "/\host"), else "".
func localPath(p string) string {
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || strings.HasPrefix(p, "/\\") {
		return ""
	}
	u, err := url.Parse(p)
	if err != nil || u.Scheme != "" || u.Host != "" {
		return ""
	}
	return p
}

// writeJSON writes v as indented JSON.
func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// actionForm is one redrive or purge button and its form.
type actionForm struct {
	Action  string // the form's URL
	CSRF    string
	Return  string // the page to come back to
	ID      string // the dead letter's entry id; "" with All
	All     bool
	Class   string
	Label   string
	Confirm string // the question asked before posting ("" for none)
}

// Act returns the form of action ("redrive", "purge", "redrive-all" or
// "purge-all") on dead letter id of group, coming back to this page.
func (b base) Act(group, action, id string) actionForm {
	f := actionForm{CSRF: b.CSRF, Return: b.Path, ID: id, Class: action}
	verb := action
	if all, ok := strings.CutSuffix(action, "-all"); ok {
		verb, f.All, f.ID = all, true, ""
	}
	f.Action = "/p/" + url.PathEscape(b.Prefix) + "/q/" + url.PathEscape(b.Queue) + "/g/" + url.PathEscape(group) + "/" + verb
	switch action {
	case "redrive":
		f.Label = "Redrive"
	case "purge":
		f.Label = "Purge"
		f.Confirm = "Delete dead letter " + id + " of " + group + " for good?"
	case "redrive-all":
		f.Label = "Redrive all"
		f.Confirm = "Redrive every dead letter of " + group + "?"
	case "purge-all":
		f.Label = "Purge all"
		f.Confirm = "Delete every dead letter of " + group + " for good?"
	}
	return f
}

// QAct returns the form of a quarantine action ("restore" or "rm") on
// entry id of the page's queue.
func (b base) QAct(action, id string) actionForm {
	f := actionForm{CSRF: b.CSRF, Return: b.Path, ID: id, Class: "q-" + action,
		Action: "/p/" + url.PathEscape(b.Prefix) + "/q/" + url.PathEscape(b.Queue) + "/quarantine/" + action}
	if action == "restore" {
		f.Label = "Restore"
		f.Confirm = "Schedule the message of quarantined entry " + id + " again?"
	} else {
		f.Label = "Delete"
		f.Confirm = "Delete quarantined entry " + id + " for good?"
	}
	return f
}

// handleQuarantineAction runs a restore or delete of a quarantined entry
// posted by a queue page's button, with the checks of handleAction.
func (s *Server) handleQuarantineAction(w http.ResponseWriter, r *http.Request) {
	action := r.PathValue("action")
	if action != "restore" && action != "rm" {
		http.NotFound(w, r)
		return
	}
	in, prefix := s.actionInspector(w, r)
	if in == nil {
		return
	}
	queue, ids := r.PathValue("queue"), r.PostForm["id"]
	ctx, cancel := context.WithTimeout(r.Context(), time.Minute)
	defer cancel()
	var res admin.ActionResult
	var err error
	if action == "restore" {
		res, err = in.RestoreQuarantined(ctx, queue, 0, ids...)
	} else {
		res, err = in.DeleteQuarantined(ctx, queue, ids...)
	}
	s.logAction(r, "quarantine "+action, err, slog.String("prefix", prefix), slog.String("queue", queue),
		slog.Int("ids", len(ids)), slog.Int("done", res.Done))
	if err != nil {
		s.respondErr(w, r, err)
		return
	}
	s.redirectBack(w, r, prefix, queue, action, res.Done, len(res.NotFound), len(res.Unrecoverable))
}

// actionInspector checks a posted action (not read-only, a form within
// bounds, the CSRF token) and returns the Operator of its prefix, or
// answers and returns nil.
func (s *Server) actionInspector(w http.ResponseWriter, r *http.Request) (*admin.Operator, string) {
	if !s.checkPost(w, r) {
		return nil, ""
	}
	return s.inspector(w, r)
}

// redirectBack answers an action with a redirect to the page it came from,
// with the code and counts of its flash message (see flashCodes).
func (s *Server) redirectBack(w http.ResponseWriter, r *http.Request, prefix, queue, did string, done, missing, unrecoverable int) {
	back := localPath(r.PostFormValue("return"))
	if back == "" {
		back = "/p/" + url.PathEscape(prefix) + "/q/" + url.PathEscape(queue)
	}
	u, _ := url.Parse(back) // localPath checked it
	q := u.Query()
	for _, k := range flashKeys {
		q.Del(k)
	}
	q.Del("recurring") // an older release's flash
	q.Del("schedule")
	q.Set("did", did)
	if _, counts := countedCodes[did]; counts {
		q.Set("n", strconv.Itoa(done))
		if missing > 0 {
			q.Set("missing", strconv.Itoa(missing))
		}
		if unrecoverable > 0 {
			q.Set("unrecoverable", strconv.Itoa(unrecoverable))
		}
	}
	if did == "purge" || did == "rm" || done > 0 {
		q.Del("after") // the page's first entry may be gone
		q.Del("offset")
	}
	u.RawQuery = q.Encode()
	http.Redirect(w, r, u.String(), http.StatusSeeOther)
}

// countedCodes are the flash codes that report counts.
var countedCodes = map[string]bool{"redrive": true, "purge": true, "restore": true, "rm": true}

// deadTable is a table of dead letters of one group.
type deadTable struct {
	base
	GroupName string
	Rows      []deadRow
	Now       time.Time
}

// Dead returns the table of rows, dead letters of group, as of now.
func (b base) Dead(group string, rows []deadRow, now time.Time) deadTable {
	return deadTable{base: b, GroupName: group, Rows: rows, Now: now}
}
