package integration

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/admin"
	"github.com/delaystream/delaystream/integration/internal/harness"
)

// python returns the Python interpreter that has the client's dependencies
// (DELAYSTREAM_PYTHON, else /usr/bin/python3, else python3 on PATH); the
// test fails naming what to install when there is none.
func python(t *testing.T) string {
	t.Helper()
	cands := []string{os.Getenv("DELAYSTREAM_PYTHON"), "/usr/bin/python3", "python3"}
	for _, c := range cands {
		if c == "" {
			continue
		}
		if exec.Command(c, "-c", "import redis, msgpack").Run() == nil {
			return c
		}
	}
	t.Fatalf("no python3 with the redis and msgpack packages: apt-get install -y python3-redis python3-msgpack (or make ensure-clients)")
	return ""
}

// clientArgs are the conformance programs' arguments naming a server or a
// Cluster node, a prefix, a queue and its shard count.
func clientArgs(rdb redis.UniversalClient, prefix, queue string, shards int) []string {
	args := []string{"--prefix", prefix, "--queue", queue, "--shards", strconv.Itoa(shards)}
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		return append(args, "--addr", c.Options().Addrs[0], "--cluster")
	case *redis.Client:
		return append(args, "--addr", c.Options().Addr)
	}
	panic("unknown client")
}

// conformanceDir is where the other languages' conformance programs are.
func conformanceDir(t *testing.T, lang string) string {
	t.Helper()
	dir := map[string]string{"python": "tests", "node": "test"}[lang]
	d, err := filepath.Abs(filepath.Join("..", "clients", lang, dir, "conformance"))
	require.NoError(t, err)
	return d
}

// crossTargets are the servers the cross-language tests run on: a server of
// the test's own with an unsharded queue, and the shared Cluster with a
// queue of three shards.
var crossTargets = []struct {
	name   string
	shards int
	rdb    func(t *testing.T) redis.UniversalClient
}{
	{"single", 1, func(t *testing.T) redis.UniversalClient { return harness.Redis(t) }},
	{"cluster", 3, func(t *testing.T) redis.UniversalClient { return harness.Cluster(t) }},
}

type expected struct {
	ID          string            `json:"id"`
	PayloadHex  string            `json:"payload_hex"`
	Headers     map[string]string `json:"headers"`
	NotBeforeMs int64             `json:"not_before_ms"`
}

type produced struct {
	Expected  []expected `json:"expected"`
	Cancelled []string   `json:"cancelled"`
}

type handledMsg struct {
	payload  []byte
	headers  map[string]string
	at, due  time.Time
	attempts int
}

// nodeClient returns the node binary and fails, naming what to run, when
// the Node.js client is not built (make node-client builds it).
func nodeClient(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is required for the Node.js client's conformance: apt-get install -y nodejs npm")
	}
	dist, err := filepath.Abs(filepath.Join("..", "clients", "node", "dist", "index.js"))
	require.NoError(t, err)
	if _, err := os.Stat(dist); err != nil {
		t.Fatalf("the Node.js client is not built (%v): make node-client", err)
	}
	return node
}

// Messages scheduled by the other languages' producers reach every Go
// group once, with their payloads and headers, none before it was due;
// cancelled ones never.
func TestCrossLanguageProducers(t *testing.T) {
	t.Parallel()
	producers := []struct{ lang, bin, program string }{
		{"python", python(t), filepath.Join(conformanceDir(t, "python"), "produce.py")},
		{"node", nodeClient(t), filepath.Join(conformanceDir(t, "node"), "produce.mjs")},
	}
	for _, tc := range crossTargets {
		for _, pr := range producers {
			t.Run(pr.lang+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				crossProducer(t, tc.rdb(t), tc.shards, pr.bin, pr.program)
			})
		}
	}
}

func crossProducer(t *testing.T, rdb redis.UniversalClient, shards int, bin, program string) {
	prefix := harness.Prefix(t, rdb)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	q, err := delaystream.New(rdb, "xl", delaystream.WithPrefix(prefix), delaystream.WithShards(shards),
		delaystream.WithLogger(testLogger(t)), delaystream.WithDrainTimeout(time.Second))
	require.NoError(t, err)
	var mu sync.Mutex
	got := map[string]map[string][]handledMsg{"g1": {}, "g2": {}}
	for g := range got {
		_, err := q.Handle(g, func(_ context.Context, d *delaystream.Delivery) error {
			mu.Lock()
			defer mu.Unlock()
			got[g][d.ID] = append(got[g][d.ID], handledMsg{payload: d.Payload, headers: d.Headers, at: time.Now(), due: d.Due, attempts: d.Attempt})
			return nil
		})
		require.NoError(t, err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- q.Run(runCtx) }()
	defer func() {
		stop()
		require.NoError(t, <-done)
	}()

	cmd := exec.CommandContext(ctx, bin, append([]string{program}, clientArgs(rdb, prefix, "xl", shards)...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	require.NoError(t, err, program)
	var p produced
	require.NoError(t, json.Unmarshal(out, &p))
	require.Len(t, p.Expected, 41)
	checkProduced(ctx, t, q, &mu, got, p)
}

// checkProduced waits until every expected message reached both groups and
// checks each delivery against what the producer said.
func checkProduced(ctx context.Context, t *testing.T, q *delaystream.Queue, mu *sync.Mutex, got map[string]map[string][]handledMsg, p produced) {
	t.Helper()
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got["g1"]) >= len(p.Expected) && len(got["g2"]) >= len(p.Expected)
	}, 30*time.Second, 10*time.Millisecond, "every message reaches both groups")
	mu.Lock()
	defer mu.Unlock()
	for g, byID := range got {
		assert.Len(t, byID, len(p.Expected), "group %s handled exactly the expected messages", g)
		for _, e := range p.Expected {
			h := byID[e.ID]
			if !assert.Len(t, h, 1, "group %s: %s handled once", g, e.ID) {
				continue
			}
			want, err := hex.DecodeString(e.PayloadHex)
			require.NoError(t, err)
			assert.Equal(t, want, h[0].payload, "%s payload", e.ID)
			if len(e.Headers) == 0 {
				assert.Empty(t, h[0].headers, "%s headers", e.ID)
			} else {
				assert.Equal(t, e.Headers, h[0].headers, "%s headers", e.ID)
			}
			assert.GreaterOrEqual(t, h[0].due.UnixMilli(), e.NotBeforeMs, "%s due no earlier than scheduled", e.ID)
			assert.False(t, h[0].at.Before(time.UnixMilli(e.NotBeforeMs)), "%s handled before it was due", e.ID)
			assert.Equal(t, 1, h[0].attempts)
		}
		for _, id := range p.Cancelled {
			assert.Empty(t, byID[id], "cancelled %s was delivered to %s", id, g)
		}
	}
	for _, id := range p.Cancelled {
		loc, err := q.Locate(ctx, id)
		require.NoError(t, err)
		assert.False(t, loc.Found(), "cancelled %s is nowhere: %+v", id, loc.Places)
	}
}

type pyEvent struct {
	Event      string            `json:"event"`
	ID         string            `json:"id"`
	Attempt    int               `json:"attempt"`
	Deliveries int64             `json:"deliveries"`
	PayloadHex string            `json:"payload_hex"`
	Headers    map[string]string `json:"headers"`
	Entry      string            `json:"entry"`
}

// A Go producer's messages are consumed by the Python consumer, with
// failures, retries and dead letters, beside a Go group; the Python process
// is killed with SIGKILL mid-handler and a Go consumer of its group takes
// the entry over. Every message reaches every group once, and the operator
// tools see the Python consumer's work as a Go consumer's.
func TestCrossLanguageConsumer(t *testing.T) {
	t.Parallel()
	py := python(t)
	for _, tc := range crossTargets {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			crossConsumer(t, py, tc.rdb(t), tc.shards)
		})
	}
}

func crossConsumer(t *testing.T, py string, rdb redis.UniversalClient, shards int) {
	prefix := harness.Prefix(t, rdb)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	ids := []string{"slow:0"}
	for i := range 10 {
		ids = append(ids, "ok:"+strconv.Itoa(i))
	}
	for i := range 5 {
		ids = append(ids, "flaky:"+strconv.Itoa(i))
	}
	for i := range 3 {
		ids = append(ids, "dead:"+strconv.Itoa(i))
	}
	// Group "go" runs in this process throughout, beside the Python
	// consumer of group "py".
	var mu sync.Mutex
	byGroup := map[string]map[string][]int64{"py": {}, "go": {}}
	record := func(_ context.Context, d *delaystream.Delivery) error {
		mu.Lock()
		defer mu.Unlock()
		byGroup[d.Group][d.ID] = append(byGroup[d.Group][d.ID], d.Deliveries)
		return nil
	}
	producer := runGoGroup(ctx, t, rdb, prefix, shards, "go", record)
	for _, id := range ids {
		_, err := producer.Schedule(ctx, delaystream.Message{ID: id, Payload: []byte("go " + id), Headers: map[string]string{"from": "go"}},
			delaystream.After(100*time.Millisecond))
		require.NoError(t, err)
	}

	// The Python consumer of group "py" handles all but slow:0, which it
	// holds until it is killed.
	cmd := exec.Command(py, append([]string{filepath.Join(conformanceDir(t, "python"), "consume.py"), "--group", "py", "--name", "py-1"},
		clientArgs(rdb, prefix, "xc", shards)...)...)
	pyc := startCmd(t, "python consumer", cmd)
	events := map[string][]pyEvent{}
	var slowEntry string
	deadline := time.After(30 * time.Second)
	for slowEntry == "" || len(events["handled"]) < 15 {
		select {
		case l, ok := <-pyc.lines:
			require.True(t, ok, "the python consumer exited: %s", pyc.stderr.String())
			var e pyEvent
			require.NoError(t, json.Unmarshal([]byte(l.text), &e), l.text)
			events[e.Event] = append(events[e.Event], e)
			if e.Event == "started" {
				slowEntry = e.Entry
			}
		case <-deadline:
			t.Fatalf("python consumer: %d handled, slow started %v; stderr:\n%s", len(events["handled"]), slowEntry != "", pyc.stderr.String())
		}
	}
	seen := map[string]int{}
	for _, e := range events["handled"] {
		seen[e.ID]++
		assert.Equal(t, hex.EncodeToString([]byte("go "+e.ID)), e.PayloadHex, "%s payload", e.ID)
		assert.Equal(t, map[string]string{"from": "go"}, e.Headers, "%s headers", e.ID)
		if strings.HasPrefix(e.ID, "flaky:") {
			assert.Equal(t, 2, e.Attempt, "%s succeeded at its second attempt", e.ID)
		}
	}
	for _, id := range ids[1:16] {
		assert.Equal(t, 1, seen[id], "%s handled once by the python consumer", id)
	}

	// What the operator tools see while Python holds slow:0.
	op, err := admin.New(rdb, prefix)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		dl, err := op.DeadLetters(ctx, "xc", "py", admin.ListOptions{})
		return err == nil && len(dl) == 3
	}, 10*time.Second, 20*time.Millisecond, "three dead letters")
	dl, err := op.DeadLetters(ctx, "xc", "py", admin.ListOptions{})
	require.NoError(t, err)
	for _, d := range dl {
		assert.True(t, strings.HasPrefix(d.ID, "dead:"), d.ID)
		assert.Equal(t, delaystream.ReasonHandler, d.Reason)
		assert.Equal(t, "poison message", d.LastError)
		assert.True(t, d.Decoded)
		assert.Equal(t, map[string]string{"from": "go"}, d.Headers)
	}
	loc, err := producer.Locate(ctx, "slow:0")
	require.NoError(t, err)
	require.Len(t, loc.Places, 1, "%+v", loc.Places)
	assert.Equal(t, delaystream.PlacePending, loc.Places[0].Kind)
	assert.Equal(t, "py-1", loc.Places[0].Consumer)
	assert.Equal(t, "py", loc.Places[0].Group)
	groups, err := op.Groups(ctx, "xc")
	require.NoError(t, err)
	live := false
	for _, g := range groups {
		for _, c := range g.ConsumerList {
			if g.Group == "py" && c.Name == "py-1" {
				live = c.Live
			}
		}
	}
	assert.True(t, live, "the python consumer is listed live: %+v", groups)

	// SIGKILL mid-handler; a Go consumer of "py" takes slow:0 over.
	pyc.kill()
	runGoGroup(ctx, t, rdb, prefix, shards, "py", record)
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(byGroup["py"]["slow:0"]) == 1 && len(byGroup["go"]) == len(ids)
	}, 30*time.Second, 10*time.Millisecond, "slow:0 taken over, every message in group go")
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, map[string][]int64{"slow:0": {2}}, byGroup["py"], "group py: only the killed handler's entry, delivered a second time")
	for _, id := range ids {
		assert.Len(t, byGroup["go"][id], 1, "group go: %s once", id)
	}
}

// runGoGroup runs a queue with one group, handled by h, until the test
// ends, and returns the queue.
func runGoGroup(ctx context.Context, t *testing.T, rdb redis.UniversalClient, prefix string, shards int, group string, h delaystream.Handler) *delaystream.Queue {
	t.Helper()
	q, err := delaystream.New(rdb, "xc", delaystream.WithPrefix(prefix), delaystream.WithShards(shards),
		delaystream.WithLogger(testLogger(t)), delaystream.WithDrainTimeout(time.Second))
	require.NoError(t, err)
	_, err = q.Handle(group, h, delaystream.WithVisibilityTimeout(time.Second))
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- q.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		assert.NoError(t, <-done)
	})
	return q
}
