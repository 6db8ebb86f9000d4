package web

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/delaystream/delaystream/admin"
)

// maxOffset bounds the "offset" of the lists paged by offset (waiting
// messages, quarantine): each page reads the items before it again (a
// delayed set is read by rank, several lanes are merged), so a page
// starts at most this far in. The waiting messages beyond it are still
// counted on the queue page; page through them with the CLI
// (`delaystream peek`) or let them be promoted.
const maxOffset = admin.MaxPeek - MaxListLimit

// pager is the links of a paged list: to its first page ("" on the first
// page) and to the page after this one ("" on the last).
type pager struct {
	First string
	Next  string
	Limit int
}

// limitParam reads the "limit" query parameter: def when absent or not a
// number above 0, at most most.
func limitParam(r *http.Request, def, most int) int {
	n, err := strconv.Atoi(r.URL.Query().Get("limit"))
	if err != nil || n < 1 {
		return def
	}
	return min(n, most)
}

// offsetParam reads the "offset" query parameter: 0 when absent; ok is
// false when it is not a number from 0 to maxOffset.
func offsetParam(r *http.Request) (offset int, ok bool) {
	v := r.URL.Query().Get("offset")
	if v == "" {
		return 0, true
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > maxOffset {
		return 0, false
	}
	return n, true
}

// badOffset is the answer to an offset offsetParam refuses: a fixed
// sentence, which does not repeat the request.
var badOffset = fmt.Sprintf("offset must be a number from 0 to %d.", maxOffset)

// pageURL returns the path of r with its query, less any flash message's
// parameters, and with the parameters of set set (removed when "").
func pageURL(r *http.Request, set map[string]string) string {
	q := r.URL.Query()
	for _, k := range flashKeys {
		q.Del(k)
	}
	for k, v := range set {
		if v == "" {
			q.Del(k)
		} else {
			q.Set(k, v)
		}
	}
	u := *r.URL
	u.RawQuery = q.Encode()
	return u.RequestURI()
}

// cursorPager is the pager of a list paged by "after": this page starts
// after after, and the next one after next ("" when none follows).
func cursorPager(r *http.Request, after, next string, limit int) pager {
	p := pager{Limit: limit}
	if after != "" {
		p.First = pageURL(r, map[string]string{"after": ""})
	}
	if next != "" {
		p.Next = pageURL(r, map[string]string{"after": next})
	}
	return p
}

// offsetPager is the pager of a list paged by "offset": this page starts
// at offset, and more is true when items follow it.
func offsetPager(r *http.Request, offset, limit int, more bool) pager {
	p := pager{Limit: limit}
	if offset > 0 {
		p.First = pageURL(r, map[string]string{"offset": ""})
	}
	if more && offset+limit <= maxOffset {
		p.Next = pageURL(r, map[string]string{"offset": strconv.Itoa(offset + limit)})
	}
	return p
}

// writePage answers with a page of a JSON list, the list itself as the
// body, and the link to the next page, when there is one, in a Link header
// (RFC 8288).
func writePage(w http.ResponseWriter, p pager, page any) {
	if p.Next != "" {
		w.Header().Set("Link", "<"+p.Next+`>; rel="next"`)
	}
	writeJSON(w, http.StatusOK, page)
}

// servePagedByOffset serves a page of a list of the queue in r's path
// paged by "offset" (?offset=&limit=, def items when no limit is given):
// it reads the page with read and hands it to serve, with where it starts
// and its pager, under the request's bounded context. It answers a prefix
// not served, an offset offsetParam refuses and a failed read itself.
func servePagedByOffset[R any](s *Server, w http.ResponseWriter, r *http.Request, def int,
	read func(ctx context.Context, in *admin.Operator, queue string, offset, limit int) ([]R, bool, error),
	serve func(ctx context.Context, rows []R, offset int, p pager)) {
	in, _ := s.inspector(w, r)
	if in == nil {
		return
	}
	offset, ok := offsetParam(r)
	if !ok {
		s.failClean(w, r, http.StatusBadRequest, badOffset)
		return
	}
	limit := limitParam(r, def, MaxListLimit)
	ctx, cancel := reqCtx(r)
	defer cancel()
	rows, more, err := read(ctx, in, r.PathValue("queue"), offset, limit)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	serve(ctx, rows, offset, offsetPager(r, offset, limit, more))
}

// servePagedByCursor serves a page of a list paged by "after"
// (?after=&limit=, DefaultListLimit items when no limit is given): it
// reads the page with read, which returns the item to start the next page
// after ("" when none follows), and hands it to serve with its pager,
// under the request's bounded context. It answers a prefix not served and
// a failed read itself.
func servePagedByCursor[R any](s *Server, w http.ResponseWriter, r *http.Request,
	read func(ctx context.Context, in *admin.Operator, after string, limit int) ([]R, string, error),
	serve func(ctx context.Context, rows []R, p pager)) {
	in, _ := s.inspector(w, r)
	if in == nil {
		return
	}
	after, limit := r.URL.Query().Get("after"), limitParam(r, DefaultListLimit, MaxListLimit)
	ctx, cancel := reqCtx(r)
	defer cancel()
	rows, next, err := read(ctx, in, after, limit)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	serve(ctx, rows, cursorPager(r, after, next, limit))
}

// queueRecurringAfter is recurringAfter of the queue in r's path.
func queueRecurringAfter(r *http.Request) func(ctx context.Context, in *admin.Operator, after string, limit int) ([]recurringRow, string, error) {
	return func(ctx context.Context, in *admin.Operator, after string, limit int) ([]recurringRow, string, error) {
		return recurringAfter(ctx, in, r.PathValue("queue"), after, limit)
	}
}

// nextRowsMore reads the waiting messages of queue from offset on, up to
// limit of them, each with its preview. more reports whether more wait
// after them.
func (s *Server) nextRowsMore(ctx context.Context, in *admin.Operator, queue string, offset, limit int) (rows []nextRow, more bool, err error) {
	msgs, err := in.Peek(ctx, queue, s.listOpts(admin.ListOptions{Limit: min(offset+limit+1, admin.MaxPeek)}))
	if err != nil {
		return nil, false, err
	}
	msgs = msgs[min(offset, len(msgs)):]
	if more = len(msgs) > limit; more {
		msgs = msgs[:limit]
	}
	rows = make([]nextRow, len(msgs))
	for i, m := range msgs {
		rows[i] = nextRow{WaitingMessage: m, Shown: s.preview(m.Payload, m.Size)}
	}
	return rows, more, nil
}

// nextRows is nextRowsMore without more.
func (s *Server) nextRows(ctx context.Context, in *admin.Operator, queue string, offset, limit int) ([]nextRow, error) {
	rows, _, err := s.nextRowsMore(ctx, in, queue, offset, limit)
	return rows, err
}

// quarantineRowsMore reads the quarantined entries of queue from offset on,
// up to limit of them, each with a preview of its envelope (or member,
// when it has none). more reports whether more follow them.
func (s *Server) quarantineRowsMore(ctx context.Context, in *admin.Operator, queue string, offset, limit int) (rows []quarantineRow, more bool, err error) {
	qs, err := in.Quarantine(ctx, queue, s.listOpts(admin.ListOptions{Limit: offset + limit + 1}))
	if err != nil {
		return nil, false, err
	}
	qs = qs[min(offset, len(qs)):]
	if more = len(qs) > limit; more {
		qs = qs[:limit]
	}
	rows = make([]quarantineRow, len(qs))
	for i, q := range qs {
		rows[i] = quarantineRow{Quarantined: q, Shown: s.preview(q.Content(), q.Size)}
	}
	return rows, more, nil
}

// quarantineRows is quarantineRowsMore without more.
func (s *Server) quarantineRows(ctx context.Context, in *admin.Operator, queue string, offset, limit int) ([]quarantineRow, error) {
	rows, _, err := s.quarantineRowsMore(ctx, in, queue, offset, limit)
	return rows, err
}

// nextList is a page of a queue's waiting messages, earliest first.
type nextList struct {
	base
	Rows   []nextRow
	Now    time.Time // the Redis clock
	Offset int
	Pager  pager
}

// handleNextList serves the waiting messages of a queue page by page
// (?offset=&limit=).
func (s *Server) handleNextList(w http.ResponseWriter, r *http.Request) {
	servePagedByOffset(s, w, r, DefaultListLimit, s.nextRowsMore, func(ctx context.Context, rows []nextRow, offset int, pg pager) {
		p := nextList{base: s.base(r, r.PathValue("queue")+" / waiting"), Rows: rows, Offset: offset, Pager: pg}
		var err error
		if p.Now, err = s.rdb.Time(ctx).Result(); err != nil {
			s.fail(w, r, err)
			return
		}
		s.render(w, r, http.StatusOK, "next", p)
	})
}

// recurringList is a page of a queue's recurring schedules, by id.
type recurringList struct {
	base
	Rows  []recurringRow
	Now   time.Time // the Redis clock
	Pager pager
}

// handleRecurringList serves the recurring schedules of a queue page by
// page (?after=<id>&limit=).
func (s *Server) handleRecurringList(w http.ResponseWriter, r *http.Request) {
	servePagedByCursor(s, w, r, queueRecurringAfter(r), func(ctx context.Context, rows []recurringRow, pg pager) {
		p := recurringList{base: s.base(r, r.PathValue("queue")+" / recurring schedules"), Rows: rows, Pager: pg}
		var err error
		if p.Now, err = s.rdb.Time(ctx).Result(); err != nil {
			s.fail(w, r, err)
			return
		}
		s.render(w, r, http.StatusOK, "recurring", p)
	})
}

// quarantineList is a page of a queue's quarantine, oldest first.
type quarantineList struct {
	base
	Rows   []quarantineRow
	Offset int
	Pager  pager
}

// handleQuarantineList serves the quarantine of a queue page by page
// (?offset=&limit=).
func (s *Server) handleQuarantineList(w http.ResponseWriter, r *http.Request) {
	servePagedByOffset(s, w, r, DefaultListLimit, s.quarantineRowsMore, func(_ context.Context, rows []quarantineRow, offset int, pg pager) {
		s.render(w, r, http.StatusOK, "quarantine", quarantineList{base: s.base(r, r.PathValue("queue")+" / quarantine"),
			Rows: rows, Offset: offset, Pager: pg})
	})
}

// The tables of the lists, shown on the queue page (its first few rows)
// and on each list's own pages.
type (
	// nextTable is a table of waiting messages as of Now.
	nextTable struct {
		base
		Rows []nextRow
		Now  time.Time
	}
	// recurTable is a table of recurring schedules as of Now.
	recurTable struct {
		base
		Rows []recurringRow
		Now  time.Time
	}
	// quarTable is a table of quarantined entries.
	quarTable struct {
		base
		Rows []quarantineRow
	}
)

// NextTable returns the table of waiting messages rows as of now.
func (b base) NextTable(rows []nextRow, now time.Time) nextTable {
	return nextTable{base: b, Rows: rows, Now: now}
}

// RecurTable returns the table of recurring schedules rows as of now.
func (b base) RecurTable(rows []recurringRow, now time.Time) recurTable {
	return recurTable{base: b, Rows: rows, Now: now}
}

// QuarTable returns the table of quarantined entries rows.
func (b base) QuarTable(rows []quarantineRow) quarTable {
	return quarTable{base: b, Rows: rows}
}
