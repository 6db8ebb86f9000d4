package web_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/admin"
	"github.com/delaystream/delaystream/cmd/delaystream/internal/web"
	"github.com/delaystream/delaystream/internal/redistest"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// ChromiumHint is how to get the browser the tests drive.
const chromiumHint = "the web view's browser test needs Chromium: install it with `apt-get install -y chromium` (Debian/Ubuntu; binary /usr/bin/chromium), or set CHROMIUM to its path"

// Screenshots go to $DELAYSTREAM_SCREENSHOTS when set, else to the test's
// artifact directory (kept with `go test -artifacts`). With
// DELAYSTREAM_UPDATE_README_SCREENSHOT=1 the queue page is also written to
// docs/web-queue.png, the README's picture.
const (
	screenshotsEnv = "DELAYSTREAM_SCREENSHOTS"
	readmeEnv      = "DELAYSTREAM_UPDATE_README_SCREENSHOT"
	readmePNG      = "../../../../docs/web-queue.png"
)

const (
	queueName   = "orders"
	previewMax  = 64
	bigFragment = "0123456789abcdefghij"
)

// bigPayload is m03's payload: far longer than the preview limit.
var bigPayload = "BIG:" + strings.Repeat(bigFragment, 200)

// fixture is a queue in a known state, with its groups still running:
//
//   - m00..m07 due at once: billing dead-letters m01 and m03 on their
//     first delivery and acknowledges everything else; audit acknowledges
//     everything but m05, which its handler holds (pending) until the
//     test ends, and keeps handled records;
//   - later-00..later-02 due in an hour (waiting), later-02 with a long
//     payload.
type fixture struct {
	prefix string
	in     *admin.Operator
	rdb    redis.UniversalClient
	q      *delaystream.Queue

	mu      sync.Mutex
	billing map[string]int // deliveries per message id
	audit   map[string]int
	again   chan string // billing's deliveries after the first
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	rdb := redistest.Client(t)
	f := &fixture{prefix: redistest.Prefix(t), billing: map[string]int{}, audit: map[string]int{},
		again: make(chan string, 16)}
	q, err := delaystream.New(rdb, queueName, delaystream.WithPrefix(f.prefix), delaystream.WithDrainTimeout(2*time.Second))
	require.NoError(t, err)
	f.q = q
	in, err := admin.New(rdb, f.prefix)
	require.NoError(t, err)
	f.in, f.rdb = in, rdb

	ctx := context.Background()
	for i := range 8 {
		id := fmt.Sprintf("m%02d", i)
		payload := `{"order":` + strconv.Itoa(5000+i) + `,"action":"cancel"}`
		if id == "m03" {
			payload = bigPayload
		}
		_, err := q.Schedule(ctx, delaystream.Message{ID: id, Payload: []byte(payload)}, delaystream.After(0))
		require.NoError(t, err)
	}
	for i := range 3 {
		id := fmt.Sprintf("later-%02d", i)
		payload := `{"mail":"welcome","user":` + strconv.Itoa(42+i) + `}`
		if i == 2 {
			payload = "LATER:" + strings.Repeat(bigFragment, 100)
		}
		_, err := q.Schedule(ctx, delaystream.Message{ID: id, Payload: []byte(payload)}, delaystream.After(time.Hour))
		require.NoError(t, err)
	}

	release := make(chan struct{})
	_, err = q.Handle("billing", func(ctx context.Context, m *delaystream.Delivery) error {
		f.mu.Lock()
		f.billing[m.ID]++
		n := f.billing[m.ID]
		f.mu.Unlock()
		if n > 1 {
			f.again <- m.ID
			return nil
		}
		if m.ID == "m01" || m.ID == "m03" {
			return delaystream.DeadLetter(errors.New("card declined"))
		}
		return nil
	}, delaystream.WithWorkers(2), delaystream.WithoutTrim())
	require.NoError(t, err)
	_, err = q.Handle("audit", func(ctx context.Context, m *delaystream.Delivery) error {
		f.mu.Lock()
		f.audit[m.ID]++
		f.mu.Unlock()
		if m.ID == "m05" {
			select { // held: stays pending in audit
			case <-release:
			case <-ctx.Done():
			}
		}
		return nil
	}, delaystream.WithWorkers(2), delaystream.WithoutTrim(), delaystream.WithHandledRecords(time.Hour))
	require.NoError(t, err)

	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- q.Run(runCtx) }()
	t.Cleanup(func() {
		close(release)
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Error("queue did not stop within 30s")
		}
	})

	// Wait for the known state.
	require.Eventually(t, func() bool {
		st, err := f.stats()
		if err != nil || st.Waiting != 3 || len(st.Groups) != 2 {
			return false
		}
		a, b := st.Groups[0], st.Groups[1]
		return a.Group == "audit" && a.Pending == 1 && a.Lag == 0 &&
			b.Group == "billing" && b.Pending == 0 && b.Lag == 0 && b.DeadLetters == 2
	}, 60*time.Second, 50*time.Millisecond, "the queue never reached the known state")
	return f
}

// stats reads the queue's figures.
func (f *fixture) stats() (admin.QueueReport, error) {
	rs, err := f.in.Stats(context.Background(), queueName)
	if err != nil {
		return admin.QueueReport{}, err
	}
	return rs[0], nil
}

// deadCount reads how many dead letters billing has.
func (f *fixture) deadCount() (int, error) {
	dls, err := f.in.DeadLetters(context.Background(), queueName, "billing", admin.ListOptions{})
	return len(dls), err
}

func (f *fixture) count(g, id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if g == "billing" {
		return f.billing[id]
	}
	return f.audit[id]
}

// serve starts a web view of f on a loopback httptest server, sampling
// every 200 ms.
func (f *fixture) serve(t *testing.T, opts ...web.Option) (*web.Server, *httptest.Server) {
	t.Helper()
	opts = append([]web.Option{web.WithPreviewBytes(previewMax), web.WithSampleInterval(200 * time.Millisecond)}, opts...)
	srv, err := web.New(f.rdb, f.prefix, opts...)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	ts := httptest.NewServer(srv) // 127.0.0.1
	t.Cleanup(func() {
		ts.Close()
		cancel()
		assert.NoError(t, <-done)
	})
	return srv, ts
}

// browser starts a headless Chromium for t and returns its context.
func browser(t *testing.T) context.Context {
	t.Helper()
	name := os.Getenv("CHROMIUM")
	if name == "" {
		name = "chromium"
	}
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s not found (%v): %s", name, err, chromiumHint)
	}
	profile, err := os.MkdirTemp("", "delaystream-chromium-")
	require.NoError(t, err)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("metrics-recording-only", true),
		chromedp.Flag("mute-audio", true),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1280, 900),
		// chromedp waits 20 s by default for the browser to print its
		// DevTools address, which a loaded machine can take longer than.
		chromedp.WSURLReadTimeout(90 * time.Second),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(func() {
		var helpers []proc
		if c := chromedp.FromContext(bctx); c != nil && c.Browser != nil && c.Browser.Process() != nil {
			helpers = descendants(c.Browser.Process().Pid)
		}
		closed := make(chan struct{})
		go func() {
			_ = chromedp.Cancel(bctx) // closes the browser and waits for it
			cancelBrowser()
			cancelAlloc() // waits for the process to exit
			close(closed)
		}()
		select {
		case <-closed:
		case <-time.After(30 * time.Second):
			t.Errorf("chromium did not close within 30s")
			return
		}
		// Chromium's helpers (zygotes, renderers, the storage and network
		// services) may outlive the browser for a moment, writing its
		// profile (and recreating it): remove it once they are gone.
		assert.Eventually(t, func() bool {
			return !slices.ContainsFunc(helpers, proc.alive)
		}, 30*time.Second, 10*time.Millisecond, "chromium's helper processes did not exit within 30s")
		if err := os.RemoveAll(profile); err != nil {
			t.Logf("remove chromium profile %s: %v", profile, err)
		}
	})
	// Start the browser now, with a generous bound: a loaded machine is
	// slow. (A deadline on the first Run's context would be the browser's
	// lifetime: bound the wait instead.)
	started := make(chan error, 1)
	go func() { started <- chromedp.Run(bctx) }()
	select {
	case err := <-started:
		if err != nil {
			t.Fatalf("start chromium %s: %v (%s)", path, err, chromiumHint)
		}
	case <-time.After(90 * time.Second):
		t.Fatalf("chromium %s did not start within 90s", path)
	}
	return bctx
}

// proc is a process, told apart from a later one given the same id by
// its start time.
type proc struct {
	pid   int
	start string // start time in clock ticks since boot
}

// procStat returns the state, parent and start time of process pid, read
// from /proc (Linux); ok is false if there is no such process.
func procStat(pid int) (state string, parent int, start string, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", 0, "", false
	}
	// "pid (comm) state ppid ...": comm may hold spaces and parentheses;
	// the start time is the 22nd field.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 20 {
		return "", 0, "", false
	}
	parent, err = strconv.Atoi(f[1])
	return f[0], parent, f[19], err == nil
}

// alive reports whether p still runs (a zombie does not).
func (p proc) alive() bool {
	state, _, start, ok := procStat(p.pid)
	return ok && state != "Z" && start == p.start
}

// descendants returns the processes descending from pid: none where
// there is no /proc.
func descendants(pid int) []proc {
	ents, _ := os.ReadDir("/proc")
	children := map[int][]proc{}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if _, parent, start, ok := procStat(p); ok {
			children[parent] = append(children[parent], proc{pid: p, start: start})
		}
	}
	var out []proc
	for next := []int{pid}; len(next) > 0; next = next[1:] {
		for _, c := range children[next[0]] {
			out = append(out, c)
			next = append(next, c.pid)
		}
	}
	return out
}

// step runs actions with a generous timeout.
func step(t *testing.T, bctx context.Context, what string, actions ...chromedp.Action) {
	t.Helper()
	ctx, cancel := context.WithTimeout(bctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Run(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// screenshot saves the whole page as name.png in the screenshot directory
// and returns the PNG.
func screenshot(t *testing.T, bctx context.Context, dir, name string) []byte {
	t.Helper()
	var png []byte
	step(t, bctx, "screenshot "+name, chromedp.FullScreenshot(&png, 100))
	require.NoError(t, os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644))
	t.Logf("screenshot: %s", filepath.Join(dir, name+".png"))
	return png
}

func screenshotDir(t *testing.T) string {
	if d := os.Getenv(screenshotsEnv); d != "" {
		d = filepath.Join(d, t.Name())
		require.NoError(t, os.MkdirAll(d, 0o755))
		return d
	}
	return t.ArtifactDir()
}

// text waits for the element sel and reads its visible text by script.
// The page replaces its refreshed sections in place (every second, when a
// relative time changes), so the text is read from whatever element matches
// at that moment, not from a node looked up before.
func text(sel string, out *string) chromedp.Action {
	return chromedp.Tasks{
		chromedp.WaitReady(sel, chromedp.ByQuery),
		chromedp.Evaluate(fmt.Sprintf(`document.querySelector(%q).innerText`, sel), out),
	}
}

// submit presses the form button sel, waits until the page the action
// redirects to has loaded, and returns its flash message ("" without one).
// A click that found its button replaced by the page's refresh before it
// was dispatched is tried again: nothing was pressed.
func submit(t *testing.T, bctx context.Context, what, sel string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(bctx, 60*time.Second)
	defer cancel()
	for {
		resp, err := chromedp.RunResponse(ctx, chromedp.Click(sel, chromedp.ByQuery))
		if err == nil {
			require.Equal(t, http.StatusOK, int(resp.Status), "%s: the page after the action", what)
			break
		}
		if !staleNode(err) || ctx.Err() != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	var flash string
	step(t, bctx, what+": flash",
		chromedp.Evaluate(`(e => e ? e.innerText : "")(document.getElementById("flash"))`, &flash))
	return flash
}

// staleNode reports whether err is the browser's answer for a node that is
// no longer in the document.
func staleNode(err error) bool {
	var e *cdproto.Error
	return errors.As(err, &e) && strings.Contains(e.Message, "node with given id")
}

// TestBrowser drives the web view in headless Chromium against a real
// redis-server: the figures shown, the dead letters and their bounded
// previews, the chart, and a redrive and a purge through the buttons.
func TestBrowser(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	srv, ts := f.serve(t)
	dir := screenshotDir(t)
	// Let the sampler record a few points, then a bump for the chart: two
	// more messages wait a second and are handled by both groups.
	require.Eventually(t, func() bool { return len(srv.History(f.prefix, queueName).Samples) >= 4 },
		30*time.Second, 50*time.Millisecond)
	for i := range 2 {
		_, err := f.q.Schedule(context.Background(), delaystream.Message{ID: fmt.Sprintf("soon-%d", i),
			Payload: []byte(`{"mail":"reminder"}`)}, delaystream.After(time.Second))
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		seen5 := false
		for _, s := range srv.History(f.prefix, queueName).Samples {
			seen5 = seen5 || s.Waiting == 5
		}
		return seen5 && f.count("billing", "soon-1") == 1 && f.count("audit", "soon-1") == 1 &&
			f.count("billing", "soon-0") == 1 && f.count("audit", "soon-0") == 1
	}, 30*time.Second, 50*time.Millisecond, "the two extra messages were not sampled waiting, then delivered")
	require.Eventually(t, func() bool { // acknowledged, and sampled back at 3
		st, err := f.stats()
		h := srv.History(f.prefix, queueName).Samples
		return err == nil && st.Waiting == 3 && st.StreamLength == 10 && st.Groups[1].Pending == 0 &&
			st.Groups[0].Pending == 1 && h[len(h)-1].Waiting == 3
	}, 30*time.Second, 50*time.Millisecond)
	bctx := browser(t)

	// The prefix's page lists the queue with its figures.
	var waiting, dead, pending, groups string
	step(t, bctx, "queue list",
		chromedp.Navigate(ts.URL+"/"),
		chromedp.WaitVisible(`#queues tr[data-queue="orders"]`, chromedp.ByQuery),
		text(`tr[data-queue="orders"] td.waiting`, &waiting),
		text(`tr[data-queue="orders"] td.dead`, &dead),
		text(`tr[data-queue="orders"] td.pending`, &pending),
		text(`tr[data-queue="orders"] td.groups`, &groups),
	)
	assert.Equal(t, "3", waiting)
	assert.Equal(t, "2", dead)
	assert.Equal(t, "1", pending)
	assert.Equal(t, "2", groups)
	screenshot(t, bctx, dir, "queues")

	// The queue's page.
	queueURL := ts.URL + "/p/" + url.PathEscape(f.prefix) + "/q/" + queueName
	var (
		figWaiting, figOverdue, figStream              string
		billDead, billPending, billLag, billRetry      string
		auditPending, auditLag, auditOldest, auditDead string
		nextIDs, deadIDs                               []string
		bigPreview, bigCut, laterPreview, chartPoints  string
		chartOK                                        bool
		html                                           string
	)
	step(t, bctx, "queue page",
		chromedp.Navigate(queueURL),
		chromedp.WaitVisible(`#groups`, chromedp.ByQuery),
		chromedp.WaitVisible(`#chart svg`, chromedp.ByQuery),
		chromedp.AttributeValue(`#fig-waiting`, "data-value", &figWaiting, nil, chromedp.ByQuery),
		chromedp.AttributeValue(`#fig-overdue`, "data-value", &figOverdue, nil, chromedp.ByQuery),
		chromedp.AttributeValue(`#fig-stream`, "data-value", &figStream, nil, chromedp.ByQuery),
		text(`tr[data-group="billing"] td.dead`, &billDead),
		text(`tr[data-group="billing"] td.pending`, &billPending),
		text(`tr[data-group="billing"] td.lag`, &billLag),
		text(`tr[data-group="billing"] td.retry`, &billRetry),
		text(`tr[data-group="audit"] td.pending`, &auditPending),
		text(`tr[data-group="audit"] td.lag`, &auditLag),
		text(`tr[data-group="audit"] td.dead`, &auditDead),
		chromedp.AttributeValue(`tr[data-group="audit"] td.oldest`, "data-ms", &auditOldest, nil, chromedp.ByQuery),
		chromedp.Evaluate(`[...document.querySelectorAll("#next tr[data-message]")].map(e => e.dataset.message)`, &nextIDs),
		chromedp.Evaluate(`[...document.querySelectorAll("#dead-billing tr[data-entry]")].map(e => e.dataset.message)`, &deadIDs),
		text(`#dead-billing tr[data-message="m03"] .preview`, &bigPreview),
		text(`#dead-billing tr[data-message="m03"] .cut`, &bigCut),
		text(`#next tr[data-message="later-02"] .preview`, &laterPreview),
		chromedp.AttributeValue(`#chart polyline.waiting`, "points", &chartPoints, &chartOK, chromedp.ByQuery),
		chromedp.OuterHTML("html", &html, chromedp.ByQuery),
	)
	assert.Equal(t, "3", figWaiting)
	assert.Equal(t, "0", figOverdue)
	assert.Equal(t, "10", figStream)
	assert.Equal(t, "2", billDead)
	assert.Equal(t, "0", billPending)
	assert.Equal(t, "0", billLag)
	assert.Equal(t, "0", billRetry)
	assert.Equal(t, "1", auditPending)
	assert.Equal(t, "0", auditLag)
	assert.Equal(t, "0", auditDead)
	oldest, err := strconv.Atoi(auditOldest)
	require.NoError(t, err)
	assert.Positive(t, oldest, "audit's oldest pending age")
	assert.Equal(t, []string{"later-00", "later-01", "later-02"}, nextIDs)
	assert.ElementsMatch(t, []string{"m01", "m03"}, deadIDs)
	// Previews are cut at the limit, and the page never holds more.
	assert.True(t, strings.HasPrefix(bigPreview, "BIG:0123"), bigPreview)
	assert.LessOrEqual(t, len(bigPreview), previewMax)
	assert.True(t, strings.HasSuffix(bigPreview, "…"), bigPreview)
	assert.Contains(t, bigCut, strconv.Itoa(len(bigPayload))+" bytes")
	assert.LessOrEqual(t, len(laterPreview), previewMax)
	assert.True(t, strings.HasPrefix(laterPreview, "LATER:0123"), laterPreview)
	assert.NotContains(t, html, strings.Repeat(bigFragment, 4), "a payload beyond the preview limit is on the page")
	assert.Contains(t, html, "card declined")
	require.True(t, chartOK, "chart has no waiting line")
	assert.GreaterOrEqual(t, len(strings.Fields(chartPoints)), 4, "chart points: %q", chartPoints)
	png := screenshot(t, bctx, dir, "queue")
	if os.Getenv(readmeEnv) == "1" {
		require.NoError(t, os.WriteFile(readmePNG, png, 0o644))
		t.Logf("wrote %s", readmePNG)
	}

	// Redrive m01 through its button: billing gets it again, audit not.
	var flash string
	flash = submit(t, bctx, "redrive m01", `#dead-billing tr[data-message="m01"] button.redrive`)
	assert.Equal(t, "Redrove 1 dead letter.", flash)
	select {
	case id := <-f.again:
		assert.Equal(t, "m01", id, "redelivered to billing")
	case <-time.After(30 * time.Second):
		t.Fatal("m01 was not delivered to billing again within 30s of the redrive")
	}
	assert.Equal(t, 2, f.count("billing", "m01"))
	assert.Equal(t, 1, f.count("audit", "m01"), "a redrive in billing must not re-deliver to audit")
	require.Eventually(t, func() bool {
		n, err := f.deadCount()
		return err == nil && n == 1
	}, 10*time.Second, 50*time.Millisecond)
	step(t, bctx, "reload after redrive",
		chromedp.Navigate(queueURL),
		chromedp.WaitVisible(`#groups`, chromedp.ByQuery),
		text(`tr[data-group="billing"] td.dead`, &billDead),
		chromedp.Evaluate(`[...document.querySelectorAll("#dead-billing tr[data-entry]")].map(e => e.dataset.message)`, &deadIDs),
	)
	assert.Equal(t, "1", billDead)
	assert.Equal(t, []string{"m03"}, deadIDs)
	screenshot(t, bctx, dir, "queue-after-redrive")

	// Purge m03 from the group's page, confirming the browser's dialog.
	dialogs := make(chan string, 4)
	chromedp.ListenTarget(bctx, func(ev any) {
		if d, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			dialogs <- d.Message
			go func() { _ = chromedp.Run(bctx, page.HandleJavaScriptDialog(true)) }()
		}
	})
	var rows int
	step(t, bctx, "purge m03",
		chromedp.Navigate(queueURL+"/g/billing"),
		chromedp.WaitVisible(`tr[data-message="m03"] button.purge`, chromedp.ByQuery),
	)
	flash = submit(t, bctx, "purge m03", `tr[data-message="m03"] button.purge`)
	step(t, bctx, "after the purge",
		chromedp.Evaluate(`document.querySelectorAll("tr[data-entry]").length`, &rows),
	)
	assert.Equal(t, "Purged 1 dead letter.", flash)
	assert.Equal(t, 0, rows)
	select {
	case q := <-dialogs:
		assert.Contains(t, q, "for good")
	default:
		t.Error("purge asked no confirmation")
	}
	n, err := f.deadCount()
	require.NoError(t, err)
	assert.Zero(t, n)
	screenshot(t, bctx, dir, "group-after-purge")
}

// TestBrowserReadOnly checks that a read-only view shows the figures but
// no button, and refuses every POST.
func TestBrowserReadOnly(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	_, ts := f.serve(t, web.WithReadOnly())
	bctx := browser(t)
	queueURL := ts.URL + "/p/" + url.PathEscape(f.prefix) + "/q/" + queueName
	var buttons, forms int
	var billDead string
	step(t, bctx, "read-only queue page",
		chromedp.Navigate(queueURL),
		chromedp.WaitVisible(`#read-only`, chromedp.ByQuery),
		chromedp.WaitVisible(`#dead-billing`, chromedp.ByQuery),
		text(`tr[data-group="billing"] td.dead`, &billDead),
		chromedp.Evaluate(`document.querySelectorAll("form[method=post] button").length`, &buttons),
		chromedp.Evaluate(`document.querySelectorAll("form[method=post]").length`, &forms),
	)
	assert.Equal(t, "2", billDead)
	assert.Zero(t, buttons)
	assert.Zero(t, forms)
	step(t, bctx, "read-only group page",
		chromedp.Navigate(queueURL+"/g/billing"),
		chromedp.WaitVisible(`tr[data-message="m01"]`, chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelectorAll("form[method=post] button").length`, &buttons),
	)
	assert.Zero(t, buttons)
	screenshot(t, bctx, screenshotDir(t), "read-only")

	// A POST is refused even with the right form.
	entries := deadEntries(t, f)
	for _, action := range []string{"redrive", "purge"} {
		resp, err := http.PostForm(queueURL+"/g/billing/"+action, url.Values{"csrf": {"x"}, "id": {entries["m01"]}})
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusForbidden, resp.StatusCode, action)
		assert.Contains(t, string(body), "read-only")
	}
	n, err := f.deadCount()
	require.NoError(t, err)
	assert.EqualValues(t, 2, n)
}

// TestBrowserBasicAuth checks that every path wants the credentials, and
// that a browser that sends them sees the pages.
func TestBrowserBasicAuth(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	_, ts := f.serve(t, web.WithBasicAuth("ops", "s3cret"))
	queueURL := ts.URL + "/p/" + url.PathEscape(f.prefix) + "/q/" + queueName
	for _, path := range []string{"/", queueURL[len(ts.URL):], "/static/style.css", "/api/p/" + url.PathEscape(f.prefix) + "/queues"} {
		for _, cred := range [][2]string{{}, {"ops", "wrong"}, {"other", "s3cret"}} {
			req, err := http.NewRequest(http.MethodGet, ts.URL+path, nil)
			require.NoError(t, err)
			if cred[0] != "" {
				req.SetBasicAuth(cred[0], cred[1])
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "%s with %v", path, cred)
			assert.Contains(t, resp.Header.Get("WWW-Authenticate"), "Basic")
		}
		req, err := http.NewRequest(http.MethodGet, ts.URL+path, nil)
		require.NoError(t, err)
		req.SetBasicAuth("ops", "s3cret")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, path)
	}

	bctx := browser(t)
	// Without credentials Chromium gets the 401 and, headless with no one
	// to ask, either fails the navigation or shows the 401's body.
	var unauth string
	ctx, cancel := context.WithTimeout(bctx, 60*time.Second)
	err := chromedp.Run(ctx, chromedp.Navigate(queueURL), chromedp.Text("body", &unauth, chromedp.ByQuery))
	cancel()
	if err != nil {
		assert.Contains(t, err.Error(), "ERR_INVALID_AUTH_CREDENTIALS")
	} else {
		assert.Contains(t, unauth, "authentication required")
	}
	var waiting string
	step(t, bctx, "with credentials",
		network.Enable(),
		network.SetExtraHTTPHeaders(network.Headers{"Authorization": "Basic b3BzOnMzY3JldA=="}), // ops:s3cret
		chromedp.Navigate(queueURL),
		chromedp.WaitVisible(`#fig-waiting`, chromedp.ByQuery),
		chromedp.AttributeValue(`#fig-waiting`, "data-value", &waiting, nil, chromedp.ByQuery),
	)
	assert.Equal(t, "3", waiting)
}

// TestCSRF checks that an action needs the page's token and a same-origin
// request, with a plain HTTP client.
func TestCSRF(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	_, ts := f.serve(t)
	queueURL := ts.URL + "/p/" + url.PathEscape(f.prefix) + "/q/" + queueName
	entries := deadEntries(t, f)

	resp, err := http.Get(queueURL)
	require.NoError(t, err)
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	m := regexp.MustCompile(`name="csrf" value="([0-9a-f]{64})"`).FindSubmatch(page)
	require.NotNil(t, m, "no CSRF token on the page")
	token := string(m[1])

	post := func(form url.Values, header map[string]string) int {
		req, err := http.NewRequest(http.MethodPost, queueURL+"/g/billing/redrive", strings.NewReader(form.Encode()))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for k, v := range header {
			req.Header.Set(k, v)
		}
		c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := c.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	id := entries["m01"]
	cases := []struct {
		name   string
		form   url.Values
		header map[string]string
	}{
		{"no token", url.Values{"id": {id}}, nil},
		{"empty token", url.Values{"id": {id}, "csrf": {""}}, nil},
		{"wrong token", url.Values{"id": {id}, "csrf": {strings.Repeat("0", 64)}}, nil},
		{"cross-site browser", url.Values{"id": {id}, "csrf": {token}}, map[string]string{"Sec-Fetch-Site": "cross-site"}},
		{"foreign origin", url.Values{"id": {id}, "csrf": {token}}, map[string]string{"Origin": "http://evil.example"}},
	}
	for _, c := range cases {
		assert.Equal(t, http.StatusForbidden, post(c.form, c.header), c.name)
	}
	n, err := f.deadCount()
	require.NoError(t, err)
	assert.EqualValues(t, 2, n, "a refused POST changed the dead letters")

	// With the token, from the same origin, it works.
	assert.Equal(t, http.StatusSeeOther, post(url.Values{"id": {id}, "csrf": {token}},
		map[string]string{"Origin": ts.URL, "Sec-Fetch-Site": "same-origin"}))
	n, err = f.deadCount()
	require.NoError(t, err)
	assert.EqualValues(t, 1, n)
	select {
	case got := <-f.again:
		assert.Equal(t, "m01", got)
	case <-time.After(30 * time.Second):
		t.Fatal("m01 was not delivered to billing again")
	}

	// A GET cannot act.
	resp, err = http.Get(queueURL + "/g/billing/purge?csrf=" + token + "&id=" + entries["m03"])
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
}

// TestAPIPreviewLimit checks that the JSON API never carries a payload
// beyond the preview limit.
func TestAPIPreviewLimit(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	_, ts := f.serve(t)
	base := ts.URL + "/api/p/" + url.PathEscape(f.prefix) + "/q/" + queueName
	for _, path := range []string{"/g/billing/dead", "/next"} {
		resp, err := http.Get(base + path)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		assert.NotContains(t, string(body), strings.Repeat(bigFragment, 4), path)
		var items []map[string]any
		require.NoError(t, json.Unmarshal(body, &items), path)
		require.NotEmpty(t, items, path)
		truncated := 0
		for _, it := range items {
			assert.NotContains(t, it, "payload", path)
			p, _ := it["preview"].(string)
			assert.LessOrEqual(t, len(p), previewMax, path)
			if it["truncated"] == true {
				truncated++
			}
		}
		assert.Equal(t, 1, truncated, path)
	}
	resp, err := http.Get(base + "/history")
	require.NoError(t, err)
	var h web.History
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&h))
	resp.Body.Close()
	assert.Equal(t, queueName, h.Queue)
	assert.EqualValues(t, 200, h.IntervalMs)
}

// deadEntries returns billing's dead-letter entry ids by message id.
func deadEntries(t *testing.T, f *fixture) map[string]string {
	t.Helper()
	dls, err := f.in.DeadLetters(context.Background(), queueName, "billing", admin.ListOptions{})
	require.NoError(t, err)
	out := map[string]string{}
	for _, d := range dls {
		out[d.ID] = d.EntryID
	}
	require.Len(t, out, 2)
	return out
}
