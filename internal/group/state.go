package group

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream/internal/history"
	"github.com/delaystream/delaystream/internal/logpace"
	"github.com/delaystream/delaystream/internal/memory"
	"github.com/delaystream/delaystream/internal/shards"
	"github.com/delaystream/delaystream/internal/stream"
)

// opTimeout bounds one Redis call made for a message outcome, so a hung
// connection cannot stall a worker for ever.
const opTimeout = 5 * time.Second

// core is the part of a Consumer its roles share: where it reads, its
// settings, its counters and the entries it holds. New fills it in; it
// lives as long as the Consumer.
type core struct {
	rdb      redis.UniversalClient
	queue    string
	group    string
	layout   *stream.Layout
	shards   []*shard          // by shard number
	byStream map[string]*shard // a shard by its main or retry stream's key
	guard    *shards.Guard
	h        Handler
	cfg      config
	ctr      counters
	held     holdings
	intake   atomic.Pointer[reader] // the running Run's reader, for DebugIntake
}

// shard is the keys of one shard of the queue, as the group uses them.
type shard struct {
	i     int
	main  stream.Lane // the queue's lane: the group reads its stream
	retry stream.Lane // the group's retry lane
	dead  string      // the group's dead letters
	// groups is the record of the groups that read main's stream
	// (stream.Keys.Groups): trimming main waits for every one of them.
	groups string
	// keys are the shard's keys; ackMain and ackRetry the Ack script's
	// KEYS for the main and retry streams (with the history keys).
	keys              stream.Keys
	ackMain, ackRetry *history.Keys
}

// ackKeys returns the Ack script's KEYS for streamKey (one of the shard's
// streams) at now, with the history keys unless counting is off.
func (sh *shard) ackKeys(streamKey string, now time.Time, count bool) []string {
	if !count {
		return []string{streamKey}
	}
	if streamKey == sh.retry.Stream {
		return sh.ackRetry.At(now)
	}
	return sh.ackMain.At(now)
}

// init fills in c, with the keys of every shard of layout.
func (c *core) init(rdb redis.UniversalClient, layout *stream.Layout, group string, h Handler, cfg config) {
	c.rdb, c.queue, c.group, c.layout = rdb, layout.Queue(), group, layout
	c.shards = make([]*shard, layout.Shards())
	c.byStream = make(map[string]*shard, 2*layout.Shards())
	c.guard = shards.NewGuard(layout, "consumer")
	c.h, c.cfg, c.held.batches = h, cfg, make(map[*batch]struct{})
	for i := range c.shards {
		k := layout.Shard(i)
		sh := &shard{i: i, main: k.Main(), retry: k.Retry(group), dead: k.DeadLetters(group), groups: k.Groups(), keys: k}
		sh.ackMain, sh.ackRetry = history.NewKeys(k, sh.main.Stream), history.NewKeys(k, sh.retry.Stream)
		c.shards[i] = sh
		c.byStream[sh.main.Stream] = sh
		c.byStream[sh.retry.Stream] = sh
	}
}

// shardOf returns the shard of a stream key this consumer reads (main or
// retry lane). Every key it holds entries of is one of those.
func (c *core) shardOf(streamKey string) *shard { return c.byStream[streamKey] }

// streams returns the keys of every stream the group reads: each shard's
// main stream and retry lane stream.
func (c *core) streams() []string {
	out := make([]string, 0, 2*len(c.shards))
	for _, sh := range c.shards {
		out = append(out, sh.main.Stream, sh.retry.Stream)
	}
	return out
}

// ensureGroups creates the group on every shard's queue stream and retry
// lane, in one pipeline.
func (c *core) ensureGroups(ctx context.Context) error {
	start := "0"
	if c.cfg.fromNew {
		start = "$"
	}
	type create struct {
		key string
		cmd *redis.StatusCmd
	}
	creates := make([]create, 0, 2*len(c.shards))
	records := make([]*redis.IntCmd, len(c.shards))
	pipe := c.rdb.Pipeline()
	for i, sh := range c.shards {
		creates = append(creates,
			create{sh.main.Stream, pipe.XGroupCreateMkStream(ctx, sh.main.Stream, c.group, start)},
			create{sh.retry.Stream, pipe.XGroupCreateMkStream(ctx, sh.retry.Stream, c.group, "0")})
		records[i] = pipe.SAdd(ctx, sh.groups, c.group) // trimming waits for the groups recorded
	}
	_, _ = pipe.Exec(ctx) // errors are per command
	for _, cr := range creates {
		if err := cr.cmd.Err(); err != nil && !redis.HasErrorPrefix(err, "BUSYGROUP") && !c.groupExists(ctx, err, cr.key) {
			err = stream.ExplainWrongType(ctx, c.rdb, err, stream.KeyType{Key: cr.key, Want: "stream"})
			return fmt.Errorf("create group %s on %s: %w", c.group, cr.key, memory.Explain(ctx, c.rdb, err))
		}
	}
	for i, cmd := range records {
		if err := cmd.Err(); err != nil && !c.groupRecorded(ctx, err, c.shards[i].groups) {
			err = stream.ExplainWrongType(ctx, c.rdb, err, stream.KeyType{Key: c.shards[i].groups, Want: "set"})
			return fmt.Errorf("record group %s in %s: %w", c.group, c.shards[i].groups, memory.Explain(ctx, c.rdb, err))
		}
	}
	return nil
}

// groupExists reports whether err, the failure of creating the group on the
// stream key, is Redis refusing the write for memory while the group exists
// already: a full server (maxmemory with noeviction) refuses XGROUP CREATE
// before it would answer BUSYGROUP, and a consumer of an existing group
// must start on it, to drain it.
func (c *core) groupExists(ctx context.Context, err error, key string) bool {
	if !memory.IsOOM(err) {
		return false
	}
	groups, ierr := c.rdb.XInfoGroups(ctx, key).Result()
	if ierr != nil {
		return false
	}
	for _, g := range groups {
		if g.Name == c.group {
			return true
		}
	}
	return false
}

// groupRecorded reports whether err, the failure of recording the group in
// the set of the queue's groups (key), is Redis refusing the write for
// memory while the group is recorded already (see groupExists).
func (c *core) groupRecorded(ctx context.Context, err error, key string) bool {
	return memory.IsOOM(err) && c.rdb.SIsMember(ctx, key, c.group).Val()
}

// runState is what one Run shares between its roles (reader, reclaimer,
// workers, settler, acker, extender, trimmer); each role keeps its own
// state in its own type.
type runState struct {
	c        *core
	log      *slog.Logger
	workCtx  context.Context // handlers' parent: cancelled only by the drain timeout
	opCtx    context.Context // for recording outcomes: never cancelled (each call has its own timeout)
	handlers sync.WaitGroup  // the workers; extension goes on until they are done
	pause    *pauseState     // the group's pause (pause.go)
	refused  refusals        // settling writes Redis refuses for memory (refused.go)
	calls    PromoteCalls    // the process's promotion of the queue, whose calls the consumer joins (take.go); nil: none
}

// failures tracks a loop's consecutive failed calls.
type failures struct {
	n     int       // consecutive failed calls
	since time.Time // the first of them
	stuck bool      // the last line logged was about a key of the wrong type
	pace  logpace.Pace
}

// failed records a failed call and logs it at Warn if due. A key of the
// wrong type (a *stream.KeyTypeError) is logged at Error, and at once
// when the run of failures turns into one (its first failure may have
// been another, such as the read that found its stream replaced): it
// repeats until someone fixes the key.
func (f *failures) failed(ctx context.Context, log *slog.Logger, msg string, err error, attrs ...slog.Attr) {
	now := time.Now()
	if f.n == 0 {
		f.since = now
	}
	f.n++
	stuck := errors.Is(err, stream.ErrWrongType)
	// The first failure is logged at once, then lines at rising intervals
	// (logpace), with the count, so that an outage of Redis costs a few
	// lines, not one per retry.
	if f.pace.Due(now) || stuck && !f.stuck {
		level := slog.LevelWarn
		if stuck {
			level = slog.LevelError
		}
		attrs = append(attrs, slog.Any("err", err), slog.Int("failures", f.n), slog.Time("since", f.since))
		log.LogAttrs(ctx, level, msg, attrs...)
		f.stuck = stuck
	}
}

// succeeded ends a run of failures, saying so at Info if any was logged
// after the first.
func (f *failures) succeeded(ctx context.Context, log *slog.Logger, msg string) {
	if f.n > 1 {
		log.InfoContext(ctx, msg, slog.Int("failures", f.n), slog.Duration("after", time.Since(f.since)))
	}
	*f = failures{}
}

// jitter returns a random duration between d/2 and d, so that loops
// that failed together do not retry together.
func jitter(d time.Duration) time.Duration {
	return d/2 + rand.N(d/2+1)
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
