package integration

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/integration/internal/harness"
	"github.com/delaystream/delaystream/internal/delay"
	"github.com/delaystream/delaystream/internal/group"
	"github.com/delaystream/delaystream/internal/stream"
)

// errLog is a slog handler that keeps every record's errors, so that a
// test can check what a background loop reported (its logger is where the
// consumer's and the mover's loops report failures).
type errLog struct {
	mu   sync.Mutex
	errs []error
	msgs []string
	max  int // the longest record seen, as text
}

func (l *errLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *errLog) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	var errs []error
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value.Any())
		if err, ok := a.Value.Any().(error); ok {
			errs = append(errs, err)
		}
		return true
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, errs...)
	l.msgs = append(l.msgs, r.Level.String()+" "+b.String())
	l.max = max(l.max, b.Len())
	return nil
}
func (l *errLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *errLog) WithGroup(string) slog.Handler      { return l }

// keyTypeLogged reports whether a logged error is a *stream.KeyTypeError
// naming key.
func (l *errLog) keyTypeLogged(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, err := range l.errs {
		var kte *stream.KeyTypeError
		if errors.As(err, &kte) && kte.Key == key {
			return true
		}
	}
	return false
}

func (l *errLog) dump(t *testing.T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range l.msgs {
		t.Log(m)
	}
}

// acks counts, per group, the successful handler runs of each message id.
type acks struct {
	mu      sync.Mutex
	n       map[string]map[string]int
	changed chan struct{} // closed, and replaced, at each add
}

func newAcks() *acks { return &acks{n: map[string]map[string]int{}, changed: make(chan struct{})} }

func (a *acks) add(group, id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n[group] == nil {
		a.n[group] = map[string]int{}
	}
	a.n[group][id]++
	close(a.changed)
	a.changed = make(chan struct{})
}

// next returns a channel closed at the next add.
func (a *acks) next() <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.changed
}

// missing returns the ids of want that group has not acknowledged.
func (a *acks) missing(group string, want []string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for _, id := range want {
		if a.n[group][id] == 0 {
			out = append(out, id)
		}
	}
	return out
}

// wtQueue is a front-door queue run for a test: its groups count acks, its
// logger keeps errors.
type wtQueue struct {
	q      *delaystream.Queue
	log    *errLog
	acks   *acks
	cons   map[string]*delaystream.Group
	layout *stream.Layout
	dl     map[string]*group.DeadLetters // each group's dead letters, read as a tool does
}

// dead returns group g's dead letters.
func (w *wtQueue) dead(g string) *group.DeadLetters { return w.dl[g] }

// handler acknowledges, except "fail-*" ids on their first attempt (they
// go through the retry lane) and "dead-*" ids in group g1 (dead-lettered).
func (w *wtQueue) handler(name string) delaystream.Handler {
	return func(_ context.Context, m *delaystream.Delivery) error {
		switch {
		case strings.HasPrefix(m.ID, "fail-") && m.Attempt == 1:
			return errors.New("first attempt fails")
		case strings.HasPrefix(m.ID, "dead-") && name == "g1":
			return delaystream.DeadLetter(errors.New("poison"))
		}
		w.acks.add(name, m.ID)
		return nil
	}
}

func startWTQueue(t *testing.T, rdb redis.UniversalClient, prefix, name string, groups []string, opts ...delaystream.GroupOption) *wtQueue {
	t.Helper()
	w := &wtQueue{log: &errLog{}, acks: newAcks(), cons: map[string]*delaystream.Group{}, dl: map[string]*group.DeadLetters{}}
	logger := slog.New(w.log)
	q, err := delaystream.New(rdb, name, delaystream.WithPrefix(prefix), delaystream.WithLogger(logger),
		delaystream.WithDrainTimeout(2*time.Second))
	require.NoError(t, err)
	w.q = q
	w.layout, err = stream.NewLayout(prefix, name, 1)
	require.NoError(t, err)
	for _, g := range groups {
		c, err := q.Handle(g, w.handler(g), append([]delaystream.GroupOption{
			delaystream.WithVisibilityTimeout(500 * time.Millisecond), delaystream.WithReclaimInterval(200 * time.Millisecond),
			delaystream.WithBackoff(delaystream.ConstantBackoff(20 * time.Millisecond)), delaystream.WithTrimInterval(200 * time.Millisecond)}, opts...)...)
		require.NoError(t, err)
		w.cons[g] = c
		w.dl[g], err = group.NewDeadLetters(rdb, name, g, group.WithPrefix(prefix))
		require.NoError(t, err)
	}
	stop := running(t, q.Run)
	t.Cleanup(func() { assert.NoError(t, stop(), "Run of %s", name) })
	return w
}

func (w *wtQueue) schedule(ctx context.Context, t *testing.T, ids ...string) {
	t.Helper()
	for _, id := range ids {
		_, err := w.q.Schedule(ctx, delaystream.Message{ID: id, Payload: []byte(id)}, delaystream.After(0))
		require.NoError(t, err, "schedule %s", id)
	}
}

// waitAcked waits until group acknowledged every id.
func (w *wtQueue) waitAcked(t *testing.T, group string, ids []string, limit time.Duration) {
	t.Helper()
	timeout := time.After(limit)
	for {
		next := w.acks.next() // before the check: an add in between closes it
		miss := w.acks.missing(group, ids)
		if len(miss) == 0 {
			return
		}
		select {
		case <-next:
		case <-timeout:
			w.log.dump(t)
			t.Fatalf("group %s of %s: %d of %d not acknowledged within %s: %v", group, w.q.Name(), len(miss), len(ids), limit, miss)
		}
	}
}

// requireKeyTypeError checks that err names key as holding the wrong type.
func requireKeyTypeError(t *testing.T, err error, key, what string) {
	t.Helper()
	var kte *stream.KeyTypeError
	require.ErrorAs(t, err, &kte, "%s: %v", what, err)
	assert.Equal(t, key, kte.Key, what)
	assert.ErrorIs(t, err, stream.ErrWrongType, what)
}

// wtCase is one key of the layout given a value of another type.
type wtCase struct {
	name   string
	key    func(k stream.Keys, l *stream.Layout) string
	want   string // the type the library keeps there
	shared bool   // the key is the queue's, not group g1's: group g2 stops too
	// meet makes the library meet the key while it is wrong, asserting the
	// synchronous calls' errors, and returns the ids scheduled meanwhile
	// (each must be handled once the key is fixed).
	meet func(ctx context.Context, t *testing.T, env *wtEnv, key string) []string
}

type wtEnv struct {
	rdb    redis.UniversalClient
	prefix string
	a, b   *wtQueue // a: the queue whose key is broken (groups g1, g2); b: another queue (group g)
}

// TestWrongTypeKeys gives each key of an unsharded queue's layout a value
// of another type while the queue runs, and checks that (a) every call and
// loop that meets it reports a *stream.KeyTypeError naming the key, (b)
// another queue, and another group of the same queue when the key is one
// group's, keep delivering meanwhile, and (c) once the key is deleted (or
// restored) work resumes by itself and every message accepted is handled
// by every group.
func TestWrongTypeKeys(t *testing.T) {
	t.Parallel()
	cases := []wtCase{
		{name: "delayed", want: "zset", shared: true,
			key: func(k stream.Keys, _ *stream.Layout) string { return k.Main().Delayed },
			meet: func(ctx context.Context, t *testing.T, env *wtEnv, key string) []string {
				q := env.a.q
				_, err := q.Schedule(ctx, delaystream.Message{ID: "refused", Payload: []byte("x")}, delaystream.After(0))
				requireKeyTypeError(t, err, key, "Schedule")
				_, err = q.Schedule(ctx, delaystream.Message{Payload: []byte("x")}, delaystream.After(0))
				requireKeyTypeError(t, err, key, "Schedule with a generated id")
				_, err = q.Cancel(ctx, "w-1")
				requireKeyTypeError(t, err, key, "Cancel")
				_, err = q.Get(ctx, "w-1")
				requireKeyTypeError(t, err, key, "Get")
				_, err = q.Reschedule(ctx, "w-1", delaystream.After(time.Hour))
				requireKeyTypeError(t, err, key, "Reschedule")
				_, err = q.Stats(ctx)
				requireKeyTypeError(t, err, key, "Stats")
				_, err = q.Len(ctx)
				requireKeyTypeError(t, err, key, "Len")
				_, err = env.a.cons["g1"].Stats(ctx)
				requireKeyTypeError(t, err, key, "group Stats")
				return nil
			}},
		{name: "envelopes", want: "hash", shared: true,
			key: func(k stream.Keys, _ *stream.Layout) string { return k.Main().Envelopes },
			meet: func(ctx context.Context, t *testing.T, env *wtEnv, key string) []string {
				q := env.a.q
				_, err := q.Schedule(ctx, delaystream.Message{ID: "refused", Payload: []byte("x")}, delaystream.After(0))
				requireKeyTypeError(t, err, key, "Schedule")
				_, err = q.Cancel(ctx, "w-1")
				requireKeyTypeError(t, err, key, "Cancel")
				// A generated id needs no envelope hash; the mover meets
				// the key and holds the message until it is fixed.
				res, err := q.Schedule(ctx, delaystream.Message{Payload: []byte("gen")}, delaystream.After(0))
				require.NoError(t, err)
				return []string{res.ID}
			}},
		{name: "stream", want: "stream", shared: true,
			key: func(k stream.Keys, _ *stream.Layout) string { return k.Main().Stream },
			meet: func(ctx context.Context, t *testing.T, env *wtEnv, key string) []string {
				_, err := env.a.cons["g1"].Stats(ctx)
				requireKeyTypeError(t, err, key, "group Stats")
				ids := []string{"p-1", "fail-1", "dead-1"}
				env.a.schedule(ctx, t, ids...) // wait in the delayed set
				return ids
			}},
		{name: "quarantine", want: "stream", shared: true,
			key: func(k stream.Keys, _ *stream.Layout) string { return k.Main().Quarantine },
			meet: func(ctx context.Context, t *testing.T, env *wtEnv, key string) []string {
				// Only a member to quarantine makes the mover write there.
				require.NoError(t, env.rdb.ZAdd(ctx, env.a.layout.Shard(0).Main().Delayed, redis.Z{Score: 0, Member: "\x02foreign"}).Err())
				_, err := env.a.q.Quarantine(ctx, "", 10)
				requireKeyTypeError(t, err, key, "Quarantine")
				ids := []string{"p-1"}
				env.a.schedule(ctx, t, ids...)
				return ids
			}},
		{name: "lease", want: "string", shared: true,
			key: func(k stream.Keys, _ *stream.Layout) string { return k.Main().Lease },
			meet: func(ctx context.Context, t *testing.T, env *wtEnv, _ string) []string {
				ids := []string{"p-1"}
				env.a.schedule(ctx, t, ids...)
				return ids
			}},
		{name: "retry-delayed", want: "zset",
			key: func(k stream.Keys, _ *stream.Layout) string { return k.Retry("g1").Delayed },
			meet: func(ctx context.Context, t *testing.T, env *wtEnv, key string) []string {
				_, err := env.a.dead("g1").RedriveAll(ctx, 0)
				requireKeyTypeError(t, err, key, "Redrive")
				_, err = env.a.cons["g1"].Stats(ctx)
				requireKeyTypeError(t, err, key, "group Stats")
				ids := []string{"fail-1", "p-1"}
				env.a.schedule(ctx, t, ids...)
				return ids
			}},
		{name: "retry-envelopes", want: "hash",
			key: func(k stream.Keys, _ *stream.Layout) string { return k.Retry("g1").Envelopes },
			meet: func(ctx context.Context, t *testing.T, env *wtEnv, key string) []string {
				_, err := env.a.dead("g1").RedriveAll(ctx, 0)
				requireKeyTypeError(t, err, key, "Redrive")
				ids := []string{"fail-1", "p-1"}
				env.a.schedule(ctx, t, ids...)
				return ids
			}},
		{name: "retry-stream", want: "stream",
			key: func(k stream.Keys, _ *stream.Layout) string { return k.Retry("g1").Stream },
			meet: func(ctx context.Context, t *testing.T, env *wtEnv, key string) []string {
				_, err := env.a.cons["g1"].Stats(ctx)
				requireKeyTypeError(t, err, key, "group Stats")
				ids := []string{"fail-1", "p-1", "p-2"}
				env.a.schedule(ctx, t, ids...)
				// The group still reads the queue's stream meanwhile.
				env.a.waitAcked(t, "g1", []string{"p-1", "p-2"}, 20*time.Second)
				return ids
			}},
		{name: "retry-quarantine", want: "stream",
			key: func(k stream.Keys, _ *stream.Layout) string { return k.Retry("g1").Quarantine },
			meet: func(ctx context.Context, t *testing.T, env *wtEnv, _ string) []string {
				require.NoError(t, env.rdb.ZAdd(ctx, env.a.layout.Shard(0).Retry("g1").Delayed, redis.Z{Score: 0, Member: "\x02foreign"}).Err())
				// Wake the retry lane with a retry.
				ids := []string{"fail-1", "p-1"}
				env.a.schedule(ctx, t, ids...)
				return ids
			}},
		{name: "retry-lease", want: "string",
			key: func(k stream.Keys, _ *stream.Layout) string { return k.Retry("g1").Lease },
			meet: func(ctx context.Context, t *testing.T, env *wtEnv, _ string) []string {
				ids := []string{"fail-1", "p-1"}
				env.a.schedule(ctx, t, ids...)
				return ids
			}},
		{name: "dead-letters", want: "stream",
			key: func(k stream.Keys, _ *stream.Layout) string { return k.DeadLetters("g1") },
			meet: func(ctx context.Context, t *testing.T, env *wtEnv, key string) []string {
				dl := env.a.dead("g1")
				_, err := dl.List(ctx, "", 10)
				requireKeyTypeError(t, err, key, "DeadLetters.List")
				_, err = dl.Len(ctx)
				requireKeyTypeError(t, err, key, "DeadLetters.Len")
				_, err = dl.RedriveAll(ctx, 0)
				requireKeyTypeError(t, err, key, "DeadLetters.RedriveAll")
				_, err = env.a.cons["g1"].Stats(ctx)
				requireKeyTypeError(t, err, key, "group Stats")
				ids := []string{"dead-1", "p-1"}
				env.a.schedule(ctx, t, ids...)
				return ids
			}},
		{name: "meta", want: "hash", shared: true,
			key: func(_ stream.Keys, l *stream.Layout) string { return l.Meta() },
			meet: func(ctx context.Context, t *testing.T, env *wtEnv, key string) []string {
				// The running parts checked the record already; a new one
				// (another process) meets it at its first call.
				fresh, err := delay.New(env.rdb, env.a.q.Name(), delay.WithPrefix(env.prefix))
				require.NoError(t, err)
				_, err = fresh.Schedule(ctx, delay.Message{ID: "refused", Payload: []byte("x")}, delay.After(0))
				requireKeyTypeError(t, err, key, "a new producer's Schedule")
				ids := []string{"p-1"}
				env.a.schedule(ctx, t, ids...)
				return ids
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// Each case is small (a few messages on a server of its own),
			// and mostly waits: it runs beside the others.
			wrongTypeCase(t, tc)
		})
	}
}

func wrongTypeCase(t *testing.T, tc wtCase) {
	ctx := context.Background()
	rdb := harness.Redis(t)
	prefix := harness.Prefix(t, rdb)
	var opts []delaystream.GroupOption
	env := &wtEnv{rdb: rdb, prefix: prefix,
		a: startWTQueue(t, rdb, prefix, "a", []string{"g1", "g2"}, opts...),
		b: startWTQueue(t, rdb, prefix, "b", []string{"g"})}
	// Warm up: every group has handled a message, a retry and (g1) a dead
	// letter, so every key exists before it is broken.
	warm := []string{"w-1", "fail-w"}
	env.a.schedule(ctx, t, append(warm, "dead-w")...)
	env.b.schedule(ctx, t, warm...)
	env.a.waitAcked(t, "g1", warm, 20*time.Second)
	env.a.waitAcked(t, "g2", append(warm, "dead-w"), 20*time.Second)
	env.b.waitAcked(t, "g", warm, 20*time.Second)
	// w-1 is scheduled again, to wait, for Cancel/Get to meet the keys.
	_, err := env.a.q.Schedule(ctx, delaystream.Message{ID: "w-1", Payload: []byte("later")}, delaystream.After(time.Hour))
	require.NoError(t, err)

	key := tc.key(env.a.layout.Shard(0), env.a.layout)
	dump, err := rdb.Dump(ctx, key).Result()
	if errors.Is(err, redis.Nil) {
		dump = ""
	} else {
		require.NoError(t, err)
	}
	require.NoError(t, rdb.Del(ctx, key).Err())
	if tc.want == "string" {
		require.NoError(t, rdb.RPush(ctx, key, "foreign").Err())
	} else {
		require.NoError(t, rdb.Set(ctx, key, "foreign", 0).Err())
	}

	pending := tc.meet(ctx, t, env, key)

	// (a) A loop that meets the key reports it by name (the producer's
	// calls were checked by meet). The meta record is met only by parts
	// that start.
	// A lane that nothing wakes (retry-quarantine: the foreign member is
	// the head, so the retry publishes no wake-up) meets the key at its
	// next idle probe: a consumer's movers probe every 30 s.
	if tc.name != "meta" {
		require.Eventually(t, func() bool { return env.a.log.keyTypeLogged(key) }, 45*time.Second, 20*time.Millisecond,
			"a *stream.KeyTypeError naming %s is logged", key)
	}

	// (b) Meanwhile another queue, and the other group when the key is
	// g1's, keep delivering.
	live := []string{"live-1", "live-2"}
	env.b.schedule(ctx, t, live...)
	env.b.waitAcked(t, "g", live, 20*time.Second)
	if !tc.shared {
		env.a.schedule(ctx, t, live...)
		env.a.waitAcked(t, "g2", live, 20*time.Second)
		pending = append(pending, live...)
	}
	assert.False(t, env.b.log.keyTypeLogged(key), "the other queue never meets the key")

	// (c) Fixed (deleted, or the meta record restored), work resumes by
	// itself: everything accepted is handled by both groups.
	require.NoError(t, rdb.Del(ctx, key).Err())
	if tc.name == "meta" {
		require.NoError(t, rdb.Restore(ctx, key, 0, dump).Err())
	}
	after := []string{"after-1", "fail-after"}
	env.a.schedule(ctx, t, after...)
	all := append(pending, after...)
	var handled, dead []string
	for _, id := range all {
		if strings.HasPrefix(id, "dead-") {
			dead = append(dead, id)
		} else {
			handled = append(handled, id)
		}
	}
	env.a.waitAcked(t, "g1", handled, 30*time.Second)
	env.a.waitAcked(t, "g2", all, 30*time.Second)
	if len(dead) > 0 {
		require.Eventually(t, func() bool {
			es, err := env.a.dead("g1").List(ctx, "", 100)
			if err != nil {
				return false
			}
			found := map[string]bool{}
			for _, e := range es {
				found[e.Envelope.ID] = true
			}
			for _, id := range dead {
				if !found[id] {
					return false
				}
			}
			return true
		}, 30*time.Second, 50*time.Millisecond, "dead-lettered ids %v in g1's dead letters", dead)
	}
	switch tc.name {
	case "quarantine", "retry-quarantine":
		l := env.a.layout.Shard(0).Main()
		if tc.name == "retry-quarantine" {
			l = env.a.layout.Shard(0).Retry("g1")
		}
		require.Eventually(t, func() bool {
			n, err := rdb.XLen(ctx, l.Quarantine).Result()
			return err == nil && n == 1
		}, 30*time.Second, 50*time.Millisecond, "the foreign member is quarantined once the key is fixed")
	}
}
