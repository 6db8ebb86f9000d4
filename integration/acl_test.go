package integration

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/integration/internal/harness"
	"github.com/delaystream/delaystream/internal/delay"
	"github.com/delaystream/delaystream/internal/group"
	"github.com/delaystream/delaystream/internal/mover"
	"github.com/delaystream/delaystream/internal/redistest"
	"github.com/delaystream/delaystream/internal/scripts"
	"github.com/delaystream/delaystream/internal/stream"
)

// aclDoc is the page whose rules TestACL applies: the ACL SETUSER lines
// between its markers, so the page and the test cannot drift apart.
const aclDoc = "../docs/acl.md"

// The users of docs/acl.md. The consumer's rule is written for group
// "billing"; the test derives the rule of group "audit" from it the way
// the page tells readers to.
const (
	aclProducer = "ds-producer"
	aclMover    = "ds-mover"
	aclBilling  = "ds-consumer-billing"
	aclOperator = "ds-operator"
	aclDocGroup = "billing"
)

// TestACL runs delaystream as Redis users that hold exactly the rules of
// docs/acl.md, on a dedicated server: a producer, a mover, the consumers of
// two groups and a read-only operator, on an unsharded queue and on a queue
// of 4 shards, through every flow (schedule with caller and generated ids,
// batch, cancel, reschedule, get, stats, replica ack; promotion; delivery
// to both groups, retry, dead letters with redrive and purge, reclaim of a
// crashed consumer's entries, extension, trimming, stale-consumer removal;
// the operator's reads). Redis must refuse nothing: ACL LOG stays empty.
// Then it takes single permissions away and checks that each failure
// surfaces (a returned error, a log line or the OnError hook) with Redis's
// refusal, and that ACL LOG names the refused command, key or channel
// (Redis 7.0 does not name a script's refused command in the error itself).
func TestACL(t *testing.T) {
	t.Parallel()
	_, admin := harness.Dedicated(t)
	e := newACLEnv(t, admin)

	t.Run("flows", func(t *testing.T) {
		for _, shards := range []int{1, 4} {
			t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) {
				t.Parallel()
				e.flows(t, fmt.Sprintf("orders%d", shards), shards)
			})
		}
	})
	t.Run("recurring", func(t *testing.T) {
		for _, shards := range []int{1, 4} {
			t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) {
				t.Parallel()
				e.recurring(t, fmt.Sprintf("rec%d", shards), shards)
			})
		}
	})
	// The users of the flows made no refused call, whatever they ran.
	for _, u := range []string{aclProducer, aclMover, aclBilling, "ds-consumer-audit", aclOperator} {
		assert.Empty(t, e.denials(t, u), "ACL LOG entries of %s: the rules of %s miss a permission", u, aclDoc)
	}
	if t.Failed() {
		return
	}
	t.Run("missing", e.missing)
}

// aclEnv is the dedicated server, its admin client and the rules of the page.
type aclEnv struct {
	admin    *redis.Client
	addr     string
	rules    map[string][][]string // user -> its ACL SETUSER lines, each without "ACL SETUSER <user>"
	password string
	redis72  bool // Redis >= 7.2: CLIENT SETINFO exists, and a script's refused command is named
}

func newACLEnv(t *testing.T, admin *redis.Client) *aclEnv {
	ctx := t.Context()
	e := &aclEnv{admin: admin, addr: admin.Options().Addr, rules: readACLRules(t), password: "acl-test-secret"}
	for _, u := range []string{aclProducer, aclMover, aclBilling, aclOperator} {
		require.NotEmpty(t, e.rules[u], "%s has no rule for %s", aclDoc, u)
	}
	info, err := admin.Info(ctx, "server").Result()
	require.NoError(t, err)
	e.redis72 = !strings.Contains(info, "redis_version:7.0.") && !strings.Contains(info, "redis_version:6.")
	e.user(t, aclProducer, aclProducer, "")
	e.user(t, aclMover, aclMover, "")
	e.user(t, aclBilling, aclBilling, aclDocGroup)
	e.user(t, "ds-consumer-audit", aclBilling, "audit")
	e.user(t, aclOperator, aclOperator, "")
	e.user(t, "ds-operator-writes", aclOperator, "") // the operator's refused writes, kept out of its ACL LOG
	return e
}

// readACLRules returns the ACL SETUSER lines between the markers of aclDoc,
// by user.
func readACLRules(t *testing.T) map[string][][]string {
	f, err := os.Open(aclDoc)
	require.NoError(t, err)
	defer f.Close()
	rules := map[string][][]string{}
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "<!-- acl-rules:begin -->":
			in = true
		case line == "<!-- acl-rules:end -->":
			in = false
		case in && strings.HasPrefix(line, "ACL SETUSER "):
			f := strings.Fields(line)
			require.GreaterOrEqual(t, len(f), 4, "rule line %q", line)
			rules[f[2]] = append(rules[f[2]], f[3:])
		}
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, rules, "no ACL SETUSER lines between the markers of %s", aclDoc)
	return rules
}

// user creates (or recreates) user name with the page's rule of user from,
// for consumer group group (the page's "billing" replaced by it), then
// applies extra rules, each one ACL SETUSER call.
func (e *aclEnv) user(t *testing.T, name, from, group string, extra ...string) {
	ctx := context.Background()
	for _, rule := range e.rules[from] {
		args := []any{"ACL", "SETUSER", name}
		for _, r := range rule {
			r = strings.ReplaceAll(r, "<password>", e.password)
			if group != "" {
				r = strings.ReplaceAll(r, aclDocGroup, group)
			}
			args = append(args, r)
		}
		require.NoError(t, e.admin.Do(ctx, args...).Err(), "ACL SETUSER %s from %s", name, aclDoc)
	}
	// The page asks for it on Redis 7.2 and later (7.0 has no such
	// subcommand): go-redis sends CLIENT SETINFO on every connection.
	if e.redis72 {
		require.NoError(t, e.admin.Do(ctx, "ACL", "SETUSER", name, "+client|setinfo").Err())
	}
	for _, x := range extra {
		require.NoError(t, e.admin.Do(ctx, "ACL", "SETUSER", name, x).Err(), "ACL SETUSER %s %s", name, x)
	}
}

// client returns a client that authenticates as user, closed when t ends.
func (e *aclEnv) client(t *testing.T, user string) *redis.Client {
	opt := redistest.Options(t, e.addr)
	opt.Username, opt.Password = user, e.password
	c := redis.NewClient(opt)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// aclDenial is one ACL LOG entry: what Redis refused.
type aclDenial struct {
	Reason  string // "command", "key", "channel"
	Context string // "toplevel", "lua"
	Object  string // the command (lower case, "xgroup|create"), key or channel
}

// denials returns the ACL LOG entries of user.
func (e *aclEnv) denials(t *testing.T, user string) []aclDenial {
	entries, err := e.admin.ACLLog(context.Background(), 128).Result()
	require.NoError(t, err)
	var out []aclDenial
	for _, x := range entries {
		if x.Username == user {
			out = append(out, aclDenial{Reason: x.Reason, Context: x.Context, Object: x.Object})
		}
	}
	return out
}

// refused checks that text (an error, a log line) carries Redis's refusal of
// d and that ACL LOG names d for user. Redis names a refused command in the
// error, except a script's on Redis 7.0; it never names a key or channel.
func (e *aclEnv) refused(t *testing.T, user, text string, d aclDenial) {
	t.Helper()
	switch {
	case d.Reason == "command" && (d.Context == "toplevel" || e.redis72):
		assert.Contains(t, text, "no permissions to run the '"+d.Object+"' command")
	case d.Reason == "command":
		assert.Contains(t, text, "The user executing the script can't run this command or subcommand")
		assert.Regexp(t, `\(refused: (one of [A-Z, ]*)?`+strings.ToUpper(d.Object)+`\b`, text, "the library names the command")
	case d.Reason == "key" && d.Context == "toplevel":
		assert.Regexp(t, "NOPERM (this user has no permissions to access one of the keys|No permissions to access a key)", text)
	case d.Reason == "key":
		assert.Regexp(t, "can't access at least one of the keys|No permissions to access a key", text)
	case d.Reason == "channel" && d.Context == "toplevel":
		assert.Regexp(t, "NOPERM (this user has no permissions to access one of the channels|No permissions to access a channel)", text)
	default:
		assert.Regexp(t, "can't publish to the channel|No permissions to access a channel", text)
		assert.Regexp(t, `\(refused: S?PUBLISH, `, text, "the library names the publish")
	}
	assert.Contains(t, e.denials(t, user), d, "ACL LOG of %s", user)
}

// logTap collects a component's log lines (Warn and above) and the errors
// of its OnError hook, and lets a test wait for one.
type logTap struct {
	mu    sync.Mutex
	lines []string
	grew  chan struct{} // closed (and replaced) when a line arrives
}

func newLogTap() *logTap { return &logTap{grew: make(chan struct{})} }

func (l *logTap) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, string(p))
	close(l.grew)
	l.grew = make(chan struct{})
	return len(p), nil
}

func (l *logTap) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// onError is a mover's OnError hook writing into the tap.
func (l *logTap) onError(lane string, err error, stuck bool) {
	fmt.Fprintf(l, "OnError lane=%s stuck=%t err=%q\n", lane, stuck, err.Error())
}

// wait returns the first line that contains every one of subs, waiting up
// to limit for it.
func (l *logTap) wait(t *testing.T, limit time.Duration, subs ...string) string {
	t.Helper()
	deadline := time.After(limit)
	for {
		l.mu.Lock()
		for _, line := range l.lines {
			if containsAll(line, subs) {
				l.mu.Unlock()
				return line
			}
		}
		grew := l.grew
		l.mu.Unlock()
		select {
		case <-grew:
		case <-deadline:
			t.Fatalf("no log line with %q within %s; lines:\n%s", subs, limit, strings.Join(l.all(), ""))
			return ""
		}
	}
}

func (l *logTap) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.lines)
}

func containsAll(s string, subs []string) bool {
	for _, x := range subs {
		if !strings.Contains(s, x) {
			return false
		}
	}
	return true
}

// permissionWords are in every ACL refusal Redis sends.
var permissionWords = []string{"NOPERM", "no permissions", "can't run this command", "can't access", "can't publish"}

// running starts run (a mover's or consumer's Run) and returns the function
// that stops it and returns Run's error. It is also called when t ends.
func running(t *testing.T, run func(context.Context) error) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(15 * time.Second):
				err = errors.New("Run did not return within 15s of cancel")
			}
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// deliveries records what a group's handler saw.
type deliveries struct {
	mu      sync.Mutex
	ok      map[string]*group.Message // message id -> its successful delivery
	all     []group.Message
	changed chan struct{} // a token per delivery
}

func newDeliveries() *deliveries {
	return &deliveries{ok: map[string]*group.Message{}, changed: make(chan struct{}, 1)}
}

func (d *deliveries) record(m *group.Message, ok bool) {
	d.mu.Lock()
	d.all = append(d.all, *m)
	if ok {
		d.ok[m.ID] = m
	}
	d.mu.Unlock()
	select {
	case d.changed <- struct{}{}:
	default:
	}
}

// waitOK waits until every id in want was handled successfully.
func (d *deliveries) waitOK(t *testing.T, what string, want []string, limit time.Duration) {
	t.Helper()
	deadline := time.After(limit)
	for {
		d.mu.Lock()
		var missing []string
		for _, id := range want {
			if d.ok[id] == nil {
				missing = append(missing, id)
			}
		}
		d.mu.Unlock()
		if len(missing) == 0 {
			return
		}
		select {
		case <-d.changed:
		case <-deadline:
			t.Fatalf("%s: not handled within %s: %q", what, limit, missing)
		}
	}
}

func (d *deliveries) attempts(id string) []int {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []int
	for _, m := range d.all {
		if m.ID == id {
			out = append(out, m.Attempt)
		}
	}
	return out
}

// flows runs every flow of the four roles on queue (of shards shards), each
// role as its user.
func (e *aclEnv) flows(t *testing.T, queue string, shards int) {
	ctx := t.Context()
	prod, mov := e.client(t, aclProducer), e.client(t, aclMover)
	bill, aud, op := e.client(t, aclBilling), e.client(t, "ds-consumer-audit"), e.client(t, aclOperator)
	tap := newLogTap()
	log := tap.logger()
	layout, err := stream.NewLayout(stream.DefaultPrefix, queue, shards)
	require.NoError(t, err)

	// Group audit exists before anything is due: a consumer of it, which
	// later "crashes", creates it (so nothing is trimmed before audit reads).
	for i := range shards {
		require.NoError(t, aud.XGroupCreateMkStream(ctx, layout.Shard(i).Main().Stream, "audit", "0").Err())
	}

	// Billing: the first attempt of "fail-once" fails (retried), "dead"
	// fails until it is redriven, "dead2" always (dead-lettered, purged).
	billed := newDeliveries()
	var redriven atomic.Bool
	deadLettered := make(chan string, 4)
	billing, err := group.New(bill, queue, "billing", func(_ context.Context, m *group.Message) error {
		fail := m.ID == "fail-once" && m.Attempt == 1 || m.ID == "dead" && !redriven.Load() || m.ID == "dead2"
		billed.record(m, !fail)
		if fail {
			return errors.New("billing refused it")
		}
		return nil
	}, group.WithShards(shards), group.WithLogger(log), group.WithoutPromotion(), group.WithMaxAttempts(2),
		group.WithBackoff(group.ConstantBackoff(50*time.Millisecond)),
		group.WithVisibilityTimeout(time.Second), group.WithReclaimInterval(100*time.Millisecond),
		group.WithTrimInterval(100*time.Millisecond), group.WithDrainTimeout(time.Second),
		group.WithHooks(group.Hooks{OnDeadLettered: func(m *group.Message, _ string) {
			select { // a hook must not block
			case deadLettered <- m.ID:
			default:
			}
		}}))
	require.NoError(t, err)
	stopBilling := running(t, billing.Run)

	tl := newTally(17) // every message below that is not cancelled or left waiting
	mv, err := mover.New(mov, queue, mover.WithShards(shards), mover.WithLogger(log),
		mover.WithHooks(mover.Hooks{OnPromote: tl.onPromote, OnError: tap.onError}))
	require.NoError(t, err)
	stopMover := running(t, mv.Run)

	// The producer.
	p, err := delay.New(prod, queue, delay.WithShards(shards))
	require.NoError(t, err)
	want := []string{"a", "move-me", "fail-once", "dead", "dead2", "durable"}
	res, err := p.Schedule(ctx, delay.Message{ID: "a", Payload: []byte("a")}, delay.After(300*time.Millisecond))
	require.NoError(t, err)
	assert.Equal(t, delay.Created, res.Outcome)
	res, err = p.Schedule(ctx, delay.Message{Payload: []byte("generated")}, delay.After(200*time.Millisecond))
	require.NoError(t, err)
	want = append(want, res.ID)
	var items []delay.Item
	for i := range 10 {
		id := ""
		if i%2 == 0 {
			id = fmt.Sprintf("b%d", i)
		}
		items = append(items, delay.Item{Message: delay.Message{ID: id, Payload: []byte{byte(i)}}, When: delay.After(100 * time.Millisecond)})
	}
	results, err := p.ScheduleBatch(ctx, items)
	require.NoError(t, err)
	for _, r := range results {
		require.Equal(t, delay.Created, r.Outcome)
		want = append(want, r.ID)
	}
	for _, id := range []string{"cancel-me", "move-me", "later"} {
		_, err = p.Schedule(ctx, delay.Message{ID: id}, delay.After(time.Hour))
		require.NoError(t, err)
	}
	later, err := p.Schedule(ctx, delay.Message{Payload: []byte("later")}, delay.After(time.Hour))
	require.NoError(t, err)
	res, err = p.Schedule(ctx, delay.Message{ID: "later"}, delay.After(time.Minute))
	require.NoError(t, err)
	assert.Equal(t, delay.Kept, res.Outcome)
	cancelled, err := p.Cancel(ctx, "cancel-me")
	require.NoError(t, err)
	assert.True(t, cancelled)
	_, err = p.Reschedule(ctx, "move-me", delay.After(150*time.Millisecond))
	require.NoError(t, err)
	for _, id := range []string{"fail-once", "dead", "dead2"} {
		_, err = p.Schedule(ctx, delay.Message{ID: id}, delay.After(50*time.Millisecond))
		require.NoError(t, err)
	}
	env, err := p.Get(ctx, "later")
	require.NoError(t, err)
	assert.Equal(t, "later", env.ID)
	env, err = p.Get(ctx, later.ID)
	require.NoError(t, err)
	assert.Equal(t, []byte("later"), env.Payload)
	st, err := p.Stats(ctx)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, st.Waiting, int64(2))
	_, err = p.Len(ctx)
	require.NoError(t, err)
	// Under WithReplicaAck the write waits for WAIT; this server has no
	// replica, so the write is made and reported unconfirmed, not refused.
	durable, err := delay.New(prod, queue, delay.WithShards(shards), delay.WithReplicaAck(1, 10*time.Millisecond))
	require.NoError(t, err)
	_, err = durable.Schedule(ctx, delay.Message{ID: "durable"}, delay.After(50*time.Millisecond))
	require.ErrorIs(t, err, delay.ErrNotReplicated)
	assert.NotContains(t, err.Error(), "NOPERM")
	assert.Len(t, want, len(slices.Compact(slices.Sorted(slices.Values(want)))), "ids are distinct")

	// The mover promotes every due message.
	tl.wait(t, 10*time.Second)

	// A consumer of group audit reads two entries and crashes: they stay
	// pending to it, and the real consumer reclaims them after the
	// visibility timeout.
	stolen := map[string]bool{}
	for i := 0; i < shards && len(stolen) < 2; i++ {
		s := layout.Shard(i).Main().Stream
		got, err := aud.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "audit", Consumer: "crashed",
			Streams: []string{s, ">"}, Count: int64(2 - len(stolen)), Block: -1}).Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		require.NoError(t, err)
		for _, x := range got[0].Messages {
			stolen[s+" "+x.ID] = true // entry ids repeat across shards
		}
	}
	require.Len(t, stolen, 2)
	audited := newDeliveries()
	var reclaimed atomic.Int64
	audit, err := group.New(aud, queue, "audit", func(ctx context.Context, m *group.Message) error {
		// Long enough for the hold of held entries to be extended.
		select {
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
		audited.record(m, true)
		return nil
	}, group.WithShards(shards), group.WithLogger(log), group.WithoutPromotion(), group.WithVisibilityTimeout(500*time.Millisecond),
		group.WithReclaimInterval(100*time.Millisecond), group.WithTrimInterval(100*time.Millisecond),
		group.WithDrainTimeout(time.Second),
		group.WithHooks(group.Hooks{OnReclaimed: func(_ string, n, _ int) { reclaimed.Add(int64(n)) }}))
	require.NoError(t, err)
	stopAudit := running(t, audit.Run)

	// Billing dead-letters "dead" and "dead2"; the operator reads them.
	got := map[string]bool{}
	for len(got) < 2 {
		select {
		case id := <-deadLettered:
			got[id] = true
		case <-time.After(10 * time.Second):
			t.Fatalf("dead letters: got %v, want dead and dead2", got)
		}
	}
	front, err := delaystream.New(op, queue, delaystream.WithShards(shards))
	require.NoError(t, err)
	qs, err := front.Stats(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 2, qs.Waiting, "later and the generated later")
	n, err := front.Len(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 2, n)
	env, err = front.Get(ctx, "later")
	require.NoError(t, err)
	assert.Equal(t, "later", env.ID)
	quarantined, err := front.Quarantine(ctx, "", 10)
	require.NoError(t, err)
	assert.Empty(t, quarantined)
	gs, err := group.ReadStats(ctx, op, queue, "billing", group.WithShards(shards))
	require.NoError(t, err)
	assert.EqualValues(t, 2, gs.DeadLetters)
	_, err = group.ReadShardStats(ctx, op, queue, "audit", group.WithShards(shards))
	require.NoError(t, err)
	opDead, err := group.NewDeadLetters(op, queue, "billing", group.WithShards(shards))
	require.NoError(t, err)
	dl, err := opDead.List(ctx, "", 10)
	require.NoError(t, err)
	require.Len(t, dl, 2)
	one, err := opDead.Get(ctx, dl[0].EntryID)
	require.NoError(t, err)
	assert.Equal(t, dl[0].Envelope.ID, one.Envelope.ID)
	info, err := stream.ReadInfo(ctx, op, layout.Shard(0).Main().Stream)
	require.NoError(t, err)
	assert.Len(t, info.Groups, 2)
	// The operator holds no write command.
	writer, err := delaystream.New(e.client(t, "ds-operator-writes"), queue, delaystream.WithShards(shards))
	require.NoError(t, err)
	_, err = writer.Schedule(ctx, delaystream.Message{ID: "x"}, delaystream.After(time.Minute))
	require.Error(t, err, "the operator scheduled a message")
	_, err = writer.Cancel(ctx, "later")
	require.Error(t, err, "the operator cancelled a message")

	// Billing redrives "dead" (now handled) and purges "dead2".
	dead := billing.DeadLetters()
	ids := map[string]string{}
	list, err := dead.List(ctx, "", 10)
	require.NoError(t, err)
	for _, x := range list {
		ids[x.Envelope.ID] = x.EntryID
	}
	redriven.Store(true)
	moved, err := dead.Redrive(ctx, 0, ids["dead"])
	require.NoError(t, err)
	assert.Equal(t, 1, moved)
	purged, err := dead.Purge(ctx, ids["dead2"])
	require.NoError(t, err)
	assert.EqualValues(t, 1, purged)

	// Both groups get every message: billing all but dead2.
	billed.waitOK(t, "billing", slices.DeleteFunc(slices.Clone(want), func(id string) bool { return id == "dead2" }), 15*time.Second)
	audited.waitOK(t, "audit", want, 15*time.Second)
	assert.Equal(t, []int{1, 2}, billed.attempts("fail-once"), "fail-once: retried once in billing")
	assert.Equal(t, []int{1, 2, 1}, billed.attempts("dead"), "dead: two attempts, then redriven")
	assert.Equal(t, []int{1}, audited.attempts("fail-once"), "audit never sees billing's retries")
	audited.mu.Lock()
	for _, m := range audited.ok {
		if stolen[m.Stream+" "+m.EntryID] {
			assert.GreaterOrEqual(t, m.Deliveries, int64(2), "entry %s %s was reclaimed", m.Stream, m.EntryID)
		}
	}
	audited.mu.Unlock()
	assert.GreaterOrEqual(t, reclaimed.Load(), int64(2), "the crashed consumer's entries were reclaimed")
	left, err := dead.Len(ctx)
	require.NoError(t, err)
	assert.Zero(t, left)
	_, err = dead.RedriveAll(ctx, 0)
	require.NoError(t, err)
	require.NoError(t, dead.PurgeAll(ctx))
	_, err = billing.Stats(ctx)
	require.NoError(t, err)
	_, err = audit.ShardStats(ctx)
	require.NoError(t, err)

	// What a consumer does to stale consumers (after an hour by default),
	// as audit's user: the crashed consumer has nothing pending any more.
	for i := range shards {
		s := layout.Shard(i).Main().Stream
		cs, err := aud.XInfoConsumers(ctx, s, "audit").Result()
		require.NoError(t, err)
		if !slices.ContainsFunc(cs, func(c redis.XInfoConsumer) bool { return c.Name == "crashed" }) {
			continue
		}
		removed, err := scripts.DelConsumer.Run(ctx, aud, []string{s}, "audit", "crashed").Int64()
		require.NoError(t, err)
		assert.EqualValues(t, 1, removed, "crashed removed from %s", s)
	}

	require.NoError(t, stopAudit())
	require.NoError(t, stopBilling())
	require.NoError(t, stopMover())
	for _, line := range tap.all() {
		for _, w := range permissionWords {
			assert.NotContains(t, line, w, "a refused call was logged")
		}
	}
}

// missing takes single permissions away from the page's rules, one user per
// case, and checks how each failure shows up.
func (e *aclEnv) missing(t *testing.T) {
	ctx := t.Context()
	// schedule puts one message due now on queue, as the admin.
	schedule := func(t *testing.T, queue string, shards int) {
		p, err := delay.New(e.admin, queue, delay.WithShards(shards))
		require.NoError(t, err)
		_, err = p.Schedule(ctx, delay.Message{ID: "m1"}, delay.After(0))
		require.NoError(t, err)
	}
	// promoted schedules a message and promotes it, as the admin.
	promoted := func(t *testing.T, queue string, shards int) {
		schedule(t, queue, shards)
		tl := newTally(1)
		mv, err := mover.New(e.admin, queue, mover.WithShards(shards), mover.WithHooks(tl.hooks()))
		require.NoError(t, err)
		stop := running(t, mv.Run)
		tl.wait(t, 5*time.Second)
		require.NoError(t, stop())
	}
	consumer := func(t *testing.T, user, queue string, shards int, tap *logTap) *group.Consumer {
		c, err := group.New(e.client(t, user), queue, "billing", func(context.Context, *group.Message) error { return nil },
			group.WithShards(shards), group.WithLogger(tap.logger()), group.WithReclaimInterval(100*time.Millisecond),
			group.WithoutPromotion()) // the consumer role (docs/acl.md)
		require.NoError(t, err)
		return c
	}

	t.Run("producer without evalsha", func(t *testing.T) {
		e.user(t, "p-evalsha", aclProducer, "", "-evalsha")
		p, err := delay.New(e.client(t, "p-evalsha"), "p1")
		require.NoError(t, err)
		_, err = p.Schedule(ctx, delay.Message{ID: "m1"}, delay.After(time.Minute))
		require.Error(t, err)
		var rerr redis.Error
		require.ErrorAs(t, err, &rerr, "Redis's reply is in the chain")
		e.refused(t, "p-evalsha", err.Error(), aclDenial{"command", "toplevel", "evalsha"})
	})
	t.Run("producer without eval, script cache empty", func(t *testing.T) {
		e.user(t, "p-eval", aclProducer, "", "-eval")
		require.NoError(t, e.admin.ScriptFlush(ctx).Err())
		p, err := delay.New(e.client(t, "p-eval"), "p2")
		require.NoError(t, err)
		_, err = p.Schedule(ctx, delay.Message{ID: "m1"}, delay.After(time.Minute))
		require.Error(t, err)
		e.refused(t, "p-eval", err.Error(), aclDenial{"command", "toplevel", "eval"})
	})
	t.Run("producer without zadd", func(t *testing.T) {
		e.user(t, "p-zadd", aclProducer, "", "-zadd")
		p, err := delay.New(e.client(t, "p-zadd"), "p3")
		require.NoError(t, err)
		_, err = p.Schedule(ctx, delay.Message{ID: "m1"}, delay.After(time.Minute))
		require.Error(t, err)
		e.refused(t, "p-zadd", err.Error(), aclDenial{"command", "lua", "zadd"})
	})
	t.Run("producer without the envelopes key", func(t *testing.T) {
		e.user(t, "p-key", aclProducer, "", "resetkeys", "~ds:1:{*}:q", "~ds:1:{*}:z", "~ds:1:{*}:s")
		p, err := delay.New(e.client(t, "p-key"), "p4")
		require.NoError(t, err)
		_, err = p.Schedule(ctx, delay.Message{ID: "m1"}, delay.After(time.Minute))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "schedule p4", "the error names the queue")
		e.refused(t, "p-key", err.Error(), aclDenial{"key", "toplevel", "ds:1:{p4}:m"})
		n, err := e.admin.Exists(ctx, "ds:1:{p4}:z").Result()
		require.NoError(t, err)
		assert.Zero(t, n, "a refused key refuses the whole call")
	})
	t.Run("producer without its wake channel", func(t *testing.T) {
		e.user(t, "p-channel", aclProducer, "", "resetchannels")
		p, err := delay.New(e.client(t, "p-channel"), "p5")
		require.NoError(t, err)
		_, err = p.Schedule(ctx, delay.Message{ID: "m1"}, delay.After(time.Minute))
		require.Error(t, err)
		e.refused(t, "p-channel", err.Error(), aclDenial{"channel", "lua", "ds:1:{p5}:w"})
		// The script stopped at the publish, after storing the message.
		n, err := e.admin.ZCard(ctx, "ds:1:{p5}:z").Result()
		require.NoError(t, err)
		assert.EqualValues(t, 1, n, "the message was stored before the refused publish")
	})
	t.Run("producer without wait", func(t *testing.T) {
		e.user(t, "p-wait", aclProducer, "", "-wait")
		p, err := delay.New(e.client(t, "p-wait"), "p6", delay.WithReplicaAck(1, 10*time.Millisecond))
		require.NoError(t, err)
		_, err = p.Schedule(ctx, delay.Message{ID: "m1"}, delay.After(time.Minute))
		require.ErrorIs(t, err, delay.ErrNotReplicated)
		e.refused(t, "p-wait", err.Error(), aclDenial{"command", "toplevel", "wait"})
	})

	t.Run("sharded producer without spublish", func(t *testing.T) {
		e.user(t, "p-spublish", aclProducer, "", "-spublish")
		p, err := delay.New(e.client(t, "p-spublish"), "p7", delay.WithShards(4))
		require.NoError(t, err)
		_, err = p.Schedule(ctx, delay.Message{ID: "m1"}, delay.After(time.Minute))
		require.Error(t, err, "a PUBLISH would reach no subscriber of the shard channel")
		e.refused(t, "p-spublish", err.Error(), aclDenial{"command", "lua", "spublish"})
	})
	t.Run("mover without xadd and type", func(t *testing.T) {
		e.user(t, "m-xadd-type", aclMover, "", "-xadd", "-type")
		schedule(t, "m6", 1)
		tap := newLogTap()
		mv, err := mover.New(e.client(t, "m-xadd-type"), "m6", mover.WithLogger(tap.logger()),
			mover.WithHooks(mover.Hooks{OnError: tap.onError}))
		require.NoError(t, err)
		stop := running(t, mv.Run)
		line := tap.wait(t, 5*time.Second, "OnError")
		require.NoError(t, stop())
		e.refused(t, "m-xadd-type", line, aclDenial{"command", "lua", "xadd"})
	})
	t.Run("mover without xadd", func(t *testing.T) {
		e.user(t, "m-xadd", aclMover, "", "-xadd")
		schedule(t, "m1", 1)
		tap := newLogTap()
		mv, err := mover.New(e.client(t, "m-xadd"), "m1", mover.WithLogger(tap.logger()),
			mover.WithHooks(mover.Hooks{OnError: tap.onError}))
		require.NoError(t, err)
		stop := running(t, mv.Run)
		line := tap.wait(t, 5*time.Second, "OnError", "stuck=true")
		assert.Contains(t, line, "promote ds:1:{m1}:z")
		// The hook runs before the log line, which a stop in between
		// would skip (a failure at shutdown is not logged): wait for it.
		tap.wait(t, 5*time.Second, "lane stuck")
		require.NoError(t, stop())
		e.refused(t, "m-xadd", line, aclDenial{"command", "lua", "xadd"})
	})
	t.Run("mover without evalsha", func(t *testing.T) {
		e.user(t, "m-evalsha", aclMover, "", "-evalsha")
		tap := newLogTap()
		mv, err := mover.New(e.client(t, "m-evalsha"), "m2", mover.WithLogger(tap.logger()))
		require.NoError(t, err)
		stop := running(t, mv.Run)
		line := tap.wait(t, 5*time.Second, "checking the queue's shard count failed")
		require.NoError(t, stop())
		e.refused(t, "m-evalsha", line, aclDenial{"command", "toplevel", "evalsha"})
	})
	t.Run("mover without subscribe", func(t *testing.T) {
		// The mover still promotes, found by its idle probes.
		e.user(t, "m-subscribe", aclMover, "", "-subscribe")
		schedule(t, "m3", 1)
		tl := newTally(1)
		tap := newLogTap()
		mv, err := mover.New(e.client(t, "m-subscribe"), "m3", mover.WithLogger(tap.logger()), mover.WithHooks(tl.hooks()))
		require.NoError(t, err)
		stop := running(t, mv.Run)
		line := tap.wait(t, 5*time.Second, "subscription failed; resubscribing")
		tl.wait(t, 5*time.Second)
		require.NoError(t, stop())
		e.refused(t, "m-subscribe", line, aclDenial{"command", "toplevel", "subscribe"})
	})
	t.Run("sharded mover without ssubscribe", func(t *testing.T) {
		e.user(t, "m-ssubscribe", aclMover, "", "-ssubscribe")
		tap := newLogTap()
		mv, err := mover.New(e.client(t, "m-ssubscribe"), "m4", mover.WithShards(4), mover.WithLogger(tap.logger()))
		require.NoError(t, err)
		stop := running(t, mv.Run)
		line := tap.wait(t, 5*time.Second, "subscription failed; resubscribing")
		require.NoError(t, stop())
		e.refused(t, "m-ssubscribe", line, aclDenial{"command", "toplevel", "ssubscribe"})
	})
	t.Run("sharded mover without the movers channel", func(t *testing.T) {
		e.user(t, "m-movers", aclMover, "", "resetchannels", "&ds:1:{*}:w", "&ds:1:{*}:n")
		tap := newLogTap()
		mv, err := mover.New(e.client(t, "m-movers"), "m5", mover.WithShards(4), mover.WithLogger(tap.logger()),
			mover.WithHooks(mover.Hooks{OnError: tap.onError}))
		require.NoError(t, err)
		stop := running(t, mv.Run)
		line := tap.wait(t, 5*time.Second, "OnError", "lane=ds:1:{m5}:o ")
		require.NoError(t, stop())
		e.refused(t, "m-movers", line, aclDenial{"channel", "lua", "ds:1:{m5}:o:w"})
	})

	t.Run("consumer without xgroup create", func(t *testing.T) {
		e.user(t, "c-create", aclBilling, aclDocGroup, "-xgroup|create")
		tap := newLogTap()
		err := consumer(t, "c-create", "c1", 1, tap).Run(ctx)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "create group billing on ds:1:{c1}:s")
		e.refused(t, "c-create", err.Error(), aclDenial{"command", "toplevel", "xgroup|create"})
	})
	t.Run("consumer without xreadgroup", func(t *testing.T) {
		e.user(t, "c-read", aclBilling, aclDocGroup, "-xreadgroup")
		tap := newLogTap()
		stop := running(t, consumer(t, "c-read", "c2", 1, tap).Run)
		line := tap.wait(t, 5*time.Second, "xreadgroup failed")
		require.NoError(t, stop())
		e.refused(t, "c-read", line, aclDenial{"command", "toplevel", "xreadgroup"})
	})
	t.Run("consumer without xack", func(t *testing.T) {
		e.user(t, "c-ack", aclBilling, aclDocGroup, "-xack")
		promoted(t, "c3", 1)
		tap := newLogTap()
		stop := running(t, consumer(t, "c-ack", "c3", 1, tap).Run)
		line := tap.wait(t, 5*time.Second, "xack failed")
		require.NoError(t, stop())
		e.refused(t, "c-ack", line, aclDenial{"command", "lua", "xack"})
	})
	t.Run("consumer without hincrby", func(t *testing.T) {
		// Counting is refused, acknowledging is not: the message is
		// handled and acknowledged, its count is missing, and ACL LOG
		// names the refusal.
		e.user(t, "c-count", aclBilling, aclDocGroup, "-hincrby")
		promoted(t, "c9", 1)
		tap := newLogTap()
		c := consumer(t, "c-count", "c9", 1, tap)
		stop := running(t, c.Run)
		require.Eventually(t, func() bool { return c.Counters().Acked == 1 }, 10*time.Second, 10*time.Millisecond)
		require.NoError(t, stop())
		assert.Contains(t, e.denials(t, "c-count"), aclDenial{"command", "lua", "hincrby"})
		n, err := e.admin.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: "ds:1:{c9}:s", Group: "billing", Start: "-", End: "+", Count: 10}).Result()
		require.NoError(t, err)
		assert.Empty(t, n, "acknowledged")
	})
	t.Run("consumer without xautoclaim", func(t *testing.T) {
		e.user(t, "c-claim", aclBilling, aclDocGroup, "-xautoclaim")
		tap := newLogTap()
		stop := running(t, consumer(t, "c-claim", "c4", 1, tap).Run)
		line := tap.wait(t, 5*time.Second, "reclaim failed")
		require.NoError(t, stop())
		e.refused(t, "c-claim", line, aclDenial{"command", "toplevel", "xautoclaim"})
	})
	t.Run("sharded consumer without its channels", func(t *testing.T) {
		e.user(t, "c-channels", aclBilling, aclDocGroup, "resetchannels")
		tap := newLogTap()
		stop := running(t, consumer(t, "c-channels", "c5", 4, tap).Run)
		line := tap.wait(t, 5*time.Second, "subscription failed; resubscribing")
		require.NoError(t, stop())
		layout, err := stream.NewLayout(stream.DefaultPrefix, "c5", 4)
		require.NoError(t, err)
		// One SSUBSCRIBE names several channels of a node's shards (the
		// lanes' arrivals, its own mover's wake channels, its presence);
		// Redis logs the first it refuses, in whatever order they were sent,
		// and the subscriptions race each other. Any of the consumer's own
		// channels will do, and no other.
		var own []string
		for i := 0; i < 4; i++ {
			k := layout.Shard(i)
			for _, l := range []stream.Lane{k.Main(), k.Retry("billing")} {
				own = append(own, l.Arrivals, l.Wake)
			}
		}
		presence := layout.Shard(0).PresencePrefix("billing")
		assert.Regexp(t, "NOPERM (this user has no permissions to access one of the channels|No permissions to access a channel)", line)
		ds := e.denials(t, "c-channels")
		require.NotEmpty(t, ds, "ACL LOG of c-channels")
		for _, d := range ds {
			assert.Equal(t, "channel", d.Reason, "ACL LOG of c-channels: %+v", d)
			if !strings.HasPrefix(d.Object, presence) {
				assert.Contains(t, own, d.Object, "ACL LOG of c-channels names one of its channels")
			}
		}
	})
	t.Run("consumer without the retry lane's zadd", func(t *testing.T) {
		e.user(t, "c-zadd", aclBilling, aclDocGroup, "-zadd")
		promoted(t, "c6", 1)
		tap := newLogTap()
		c, err := group.New(e.client(t, "c-zadd"), "c6", "billing", func(context.Context, *group.Message) error {
			return errors.New("retry me")
		}, group.WithLogger(tap.logger()), group.WithoutPromotion())
		require.NoError(t, err)
		stop := running(t, c.Run)
		line := tap.wait(t, 5*time.Second, "scheduling retry failed")
		require.NoError(t, stop())
		e.refused(t, "c-zadd", line, aclDenial{"command", "lua", "zadd"})
		p, err := e.admin.XPending(ctx, "ds:1:{c6}:s", "billing").Result()
		require.NoError(t, err)
		assert.EqualValues(t, 1, p.Count, "the message is still pending, not acknowledged without its retry")
	})

	t.Run("operator without xinfo stream", func(t *testing.T) {
		e.user(t, "o-xinfo", aclOperator, "", "-xinfo|stream")
		_, err := group.ReadStats(ctx, e.client(t, "o-xinfo"), "orders1", "billing")
		require.Error(t, err)
		e.refused(t, "o-xinfo", err.Error(), aclDenial{"command", "toplevel", "xinfo|stream"})
	})
	t.Run("operator on a queue never used", func(t *testing.T) {
		// The first call on a queue records its shard count: a write.
		e.user(t, "o-new", aclOperator, "")
		front, err := delaystream.New(e.client(t, "o-new"), "never-used")
		require.NoError(t, err)
		_, err = front.Stats(ctx)
		require.Error(t, err)
		e.refused(t, "o-new", err.Error(), aclDenial{"command", "lua", "hset"})
	})
}

// recurring defines a schedule as the producer, tops it up as the mover
// (a Queue with no groups, whose Run promotes and tops up) and reads it as
// the operator.
func (e *aclEnv) recurring(t *testing.T, queue string, shards int) {
	ctx := t.Context()
	prod, err := delaystream.New(e.client(t, aclProducer), queue, delaystream.WithShards(shards))
	require.NoError(t, err)
	out, err := prod.DefineRecurring(ctx, delaystream.Recurring{ID: "tick", Spec: delaystream.Every(time.Second)})
	require.NoError(t, err)
	require.Equal(t, delaystream.OutcomeCreated, out)
	mov, err := delaystream.New(e.client(t, aclMover), queue, delaystream.WithShards(shards),
		delaystream.WithRecurringHorizon(time.Second))
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mov.Run(runCtx) }()
	op, err := delaystream.New(e.client(t, aclOperator), queue, delaystream.WithShards(shards))
	require.NoError(t, err)
	layout, err := stream.NewLayout(stream.DefaultPrefix, queue, shards)
	require.NoError(t, err)
	// Occurrences beyond the definer's first horizon were written by the
	// mover's top-ups and promoted.
	require.Eventually(t, func() bool {
		var n int64
		for i := range shards {
			l, err := e.admin.XLen(ctx, layout.Shard(i).Main().Stream).Result()
			if err != nil {
				return false
			}
			n += l
		}
		return n >= 4
	}, 30*time.Second, 50*time.Millisecond)
	cancel()
	require.NoError(t, <-done)
	list, err := op.ListRecurring(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.False(t, list[0].Last.IsZero())
	st, err := op.Stats(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 1, st.Recurring)
}
