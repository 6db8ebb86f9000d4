package main

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
)

// recurring define, ls, pause, resume and rm against a real server; the
// schedules are seen by a Queue of the same prefix.
func TestRecurringCommands(t *testing.T) {
	t.Parallel()
	tg := single(t)
	seed(t, tg)

	assert.Contains(t, tg.ok(t, "recurring", "define", "orders", "poll", "--every", "30s", "--payload", "p", "--header", "k=v"), "created poll")
	assert.Contains(t, tg.ok(t, "recurring", "define", "orders", "poll", "--every", "30s", "--payload", "p", "--header", "k=v"), "kept poll")
	r := tg.run(t, "recurring", "define", "orders", "digest", "--cron", "0 9 * * MON", "--zone", "Europe/Berlin", "--missed", "fire-once")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "created digest")
	assert.Contains(t, r.stderr, "must be built with contrib/cron", "the processes of the queue need the parser")

	var rows []recurringRow
	tg.json(t, &rows, "recurring", "ls", "orders")
	require.Len(t, rows, 2)
	assert.Equal(t, "digest", rows[0].ID)
	assert.Equal(t, "cron CRON_TZ=Europe/Berlin 0 9 * * MON", rows[0].Spec)
	assert.Equal(t, "fire-once", rows[0].Missed)
	assert.Equal(t, time.Monday, rows[0].Next.In(mustZone(t, "Europe/Berlin")).Weekday())
	assert.Equal(t, "poll", rows[1].ID)
	assert.Equal(t, "every 30s", rows[1].Spec)
	assert.Equal(t, map[string]string{"k": "v"}, rows[1].Headers)
	assert.False(t, rows[1].Paused)
	assert.WithinDuration(t, time.Now(), rows[1].Next, 31*time.Second)

	q, err := delaystream.New(tg.client(t), "orders", delaystream.WithPrefix(tg.prefix))
	require.NoError(t, err)
	st, err := q.GetRecurring(context.Background(), "poll")
	require.NoError(t, err)
	assert.Equal(t, []byte("p"), st.Payload)

	assert.Contains(t, tg.ok(t, "recurring", "pause", "orders", "poll"), "paused poll")
	text := tg.ok(t, "recurring", "ls", "orders")
	assert.Regexp(t, `(?m)^poll\s+every 30s\s+paused\s+-\s`, text)
	assert.Contains(t, tg.ok(t, "recurring", "resume", "orders", "poll"), "resumed poll")
	assert.Equal(t, 4, tg.run(t, "recurring", "rm", "orders", "poll").code, "rm without --yes and no terminal")
	assert.Contains(t, tg.ok(t, "recurring", "rm", "orders", "poll", "--yes"), "deleted poll")
	assert.Equal(t, 3, tg.run(t, "recurring", "pause", "orders", "poll").code, "unknown schedule: not found")
	assert.Equal(t, 2, tg.run(t, "recurring", "define", "orders", "x", "--every", "30s", "--cron", "* * * * *").code)
	assert.Equal(t, 2, tg.run(t, "recurring", "define", "orders", "x", "--every", "1ms").code)
	tg.json(t, &rows, "recurring", "ls", "orders")
	require.Len(t, rows, 1)
}

func mustZone(t *testing.T, name string) *time.Location {
	loc, err := time.LoadLocation(name)
	require.NoError(t, err)
	return loc
}

// The web view lists a queue's recurring schedules and pauses, resumes
// and deletes them.
func TestServeRecurring(t *testing.T) {
	t.Parallel()
	tg := single(t)
	seed(t, tg)
	tg.ok(t, "recurring", "define", "orders", "poll", "--every", "1m")
	s := startServe(t, tg, nil)
	page := s.url + "/p/" + url.PathEscape(tg.prefix) + "/q/orders"
	code, body := get(t, page, "", "")
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `data-schedule="poll"`)
	assert.Contains(t, body, `<code>every 1m0s</code>`)
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(body)
	require.NotNil(t, m, "a CSRF token on the page")

	post := func(action string) {
		form := url.Values{"csrf": {m[1]}, "return": {"/p/" + url.PathEscape(tg.prefix) + "/q/orders"}}
		c := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := c.PostForm(page+"/r/poll/"+action, form)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, action)
	}
	post("pause")
	// The redirect's status message is a fixed sentence chosen by a code:
	// no text of the query (an older link's schedule=, say) shows. The
	// page's address, query included, is only carried (escaped) in its
	// forms' "return" field, where an action comes back to.
	code, body = get(t, page+"?did=recurring-pause&schedule=Call+555-0100+now", "", "")
	require.Equal(t, http.StatusOK, code)
	shownFlash := regexp.MustCompile(`<p class="flash" id="flash" role="status">([^<]*)</p>`).FindStringSubmatch(body)
	require.NotNil(t, shownFlash, "a status message")
	assert.Equal(t, "Paused the recurring schedule.", shownFlash[1])
	shown := regexp.MustCompile(`<input type="hidden" name="return" value="[^"]*">`).ReplaceAllString(body, "")
	assert.NotContains(t, shown, "555-0100")
	assert.Regexp(t, `class="state">paused<`, body)
	assert.Contains(t, body, `class="recurring-resume"`)
	post("resume")
	_, body = get(t, page, "", "")
	assert.Regexp(t, `class="state">active<`, body)
	post("delete")
	_, body = get(t, page, "", "")
	assert.NotContains(t, body, `data-schedule="poll"`)
	s.stop(t)
}
