package group

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream/internal/heal"
	"github.com/delaystream/delaystream/internal/scripts"
	"github.com/delaystream/delaystream/internal/stream"
)

// trimmer trims the queue stream and the retry lane and removes stale
// consumers (see loop). The roles that settle entries tell it how many
// entries of which streams they settled.
type trimmer struct {
	r       *runState
	settles []atomic.Int64 // per stream, in core.streams order: entries this consumer settled since its last trim of it
	kick    chan struct{}  // a token when a stream's count reached trimVolume
}

func newTrimmer(r *runState) *trimmer {
	return &trimmer{r: r, settles: make([]atomic.Int64, 2*len(r.c.shards)), kick: make(chan struct{}, 1)}
}

// settled notes that this consumer settled n entries of streamKey, so its
// next trim pass trims that stream; once trimVolume entries of a stream
// are settled, the pass comes at once rather than at the interval.
func (t *trimmer) settled(streamKey string, n int) {
	sh := t.r.c.shardOf(streamKey)
	i := 2 * sh.i
	if streamKey == sh.retry.Stream {
		i++
	}
	if k := int64(n); k > 0 {
		if v := t.settles[i].Add(k); v < trimVolume || v-k >= trimVolume {
			return // below the volume, or reached before
		}
		select {
		case t.kick <- struct{}{}:
		default:
		}
	}
}

// trimVolume is how many settled entries of a stream bring its trim
// forward: under a heavy load the stream is trimmed as fast as the groups
// acknowledge (a large burst drained quickly would otherwise wait for
// passes every trim interval, each bounded, and hold most of the burst in
// the stream), while a light load is trimmed once per interval.
const trimVolume = 10_000

// trimSoon is the pause before the next pass when the last one left a
// stream only partly trimmed (its bound, or a failure).
const trimSoon = 100 * time.Millisecond

// loop trims the queue stream and the retry lane below the oldest entry
// some group still needs, and removes stale consumers without pending
// entries. It trims a stream at most every trim interval, and only when
// this consumer settled (acknowledged, dropped, retried or dead-lettered)
// entries of it since its last trim of it, which is what moves the
// threshold; so an idle consumer makes no trim calls. A stream of which
// it settled trimVolume entries is trimmed at once, and one a bounded
// pass left partly trimmed again after trimSoon. Every trimIdleEvery
// (or trim interval, if longer), the first time one such period after
// start, it trims both streams anyway, for what other groups' progress, a
// retention or a removed group freed; stale consumers are removed on the
// same schedule.
func (t *trimmer) loop(ctx context.Context) error {
	r, c := t.r, t.r.c
	idleEvery := max(c.cfg.trimEvery, trimIdleEvery)
	t.pause(ctx, time.Duration(rand.Int64N(int64(c.cfg.trimEvery))))
	lastStale, lastFull, lastPass := time.Now(), time.Now(), time.Now()
	again := make([]bool, len(t.settles)) // left partly trimmed by the last pass
	var fails failures
	for ctx.Err() == nil {
		full := time.Since(lastFull) >= idleEvery
		if full {
			lastFull = time.Now()
		}
		// Brought forward by volume: only the streams that reached it.
		early := time.Since(lastPass) < c.cfg.trimEvery
		lastPass = time.Now()
		soon, failed := t.pass(ctx, full, early, again)
		if failed != nil {
			fails.failed(ctx, r.log, "trim failed", failed)
		} else if fails.n > 0 {
			fails.succeeded(ctx, r.log, "trim recovered")
		}
		if time.Since(lastStale) >= min(c.cfg.staleConsumer/4, idleEvery) {
			lastStale = time.Now()
			t.removeStaleAll(ctx)
		}
		if tick := c.cfg.loopTick; tick != nil {
			tick("trim")
		}
		wait := c.cfg.trimEvery
		if soon && failed == nil {
			wait = trimSoon
		}
		t.pause(ctx, wait)
	}
	return nil
}

// pass trims the streams due: every stream when full, those of which this
// consumer settled entries since its last trim of them (when early, only
// those that reached trimVolume), and those the last pass left partly
// trimmed (again, which it updates). It reports whether a stream was left
// partly trimmed, and the last failure.
func (t *trimmer) pass(ctx context.Context, full, early bool, again []bool) (soon bool, failed error) {
	c := t.r.c
	for i, s := range c.streams() {
		// Clear before trimming: what is settled meanwhile is trimmed
		// on the next pass.
		n := t.settles[i].Swap(0)
		if (n == 0 || early && n < trimVolume) && !full && !again[i] {
			t.settles[i].Add(n)
			continue
		}
		groups := "" // the retry lane is this group's alone
		if sh := c.shardOf(s); s == sh.main.Stream {
			groups = sh.groups
		}
		_, more, err := trim(ctx, c.rdb, s, groups, c.cfg.retention)
		if again[i] = more; more { // failed or bounded: go on soon
			soon = true
		}
		if err != nil && ctx.Err() == nil {
			heal.After(c.rdb, err)
			failed = err
		}
	}
	return soon, failed
}

// removeStaleAll removes the stale consumers of every stream, logging
// failures.
func (t *trimmer) removeStaleAll(ctx context.Context) {
	r, c := t.r, t.r.c
	for _, s := range c.streams() {
		if err := t.removeStale(ctx, s); err != nil && ctx.Err() == nil {
			r.log.WarnContext(ctx, "removing stale consumers failed", slog.String("stream", s), slog.Any("err", err))
		}
	}
}

// pause waits for d, ctx's end, or a stream's volume (see settled).
func (t *trimmer) pause(ctx context.Context, d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
	case <-timer.C:
	case <-t.kick:
	}
}

// errGroupMissing is the error of a trim that a group recorded for the
// stream (stream.Keys.Groups) but missing from it held back.
var errGroupMissing = errors.New("delaystream: not trimmed while a recorded group is missing from the stream")

// trimIdleEvery is how often a consumer that settled nothing still trims
// (and removes stale consumers). What such a pass frees is rare (a
// retention that ran out, a removed group: a slower group's progress is
// trimmed by its own consumers after their acknowledgements), and each
// costs a few commands per stream, for every consumer of every group, so
// it is rare too.
const trimIdleEvery = 10 * time.Minute

// Trimming is bounded: one script call removes at most trimLimit entries,
// one trim pass makes at most trimPasses calls; the rest waits for the next
// pass.
const (
	trimLimit  = 1000
	trimPasses = 100
)

// trim runs the trim script on one stream and returns how many entries it
// removed, and whether the bound on one pass stopped it before the threshold.
// groups is the record of the groups that read the stream ("" for a retry
// lane): while one of them is missing from the stream, nothing is trimmed
// and the error says which.
func trim(ctx context.Context, rdb redis.UniversalClient, key, groups string, retention time.Duration) (int64, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	keys := []string{key}
	types := []stream.KeyType{{Key: key, Want: "stream"}}
	if groups != "" {
		keys = append(keys, groups)
		types = append(types, stream.KeyType{Key: groups, Want: "set"})
	}
	var total int64
	for pass := 0; pass < trimPasses; pass++ {
		v, err := scripts.Trim.Run(ctx, rdb, keys, retention.Milliseconds(), trimLimit).Slice()
		if err != nil {
			err = stream.ExplainWrongType(ctx, rdb, scripts.Explain(err), types...)
			return total, true, fmt.Errorf("trim %s: %w", key, err)
		}
		if len(v) > 3 {
			return total, true, fmt.Errorf("trim %s: %w: %v (its consumers recreate it when they next read; group.Forget removes a group for good)", key, errGroupMissing, v[3])
		}
		n, _ := v[0].(int64)
		total += n
		if more, _ := v[2].(int64); more == 0 {
			return total, false, nil
		}
	}
	return total, true, nil
}

// removeStale removes the group's consumers on streamKey that have been
// idle for the stale-consumer age and hold no pending entries.
func (t *trimmer) removeStale(ctx context.Context, streamKey string) error {
	r, c := t.r, t.r.c
	cs, err := c.rdb.XInfoConsumers(ctx, streamKey, c.group).Result()
	if err != nil {
		return err
	}
	for _, x := range cs {
		if x.Name == c.cfg.consumer || x.Pending > 0 || x.Idle < c.cfg.staleConsumer {
			continue
		}
		removed, err := scripts.DelConsumer.Run(ctx, c.rdb, []string{streamKey}, c.group, x.Name).Int64()
		if err != nil {
			return err
		}
		if removed == 1 {
			r.log.InfoContext(ctx, "removed stale consumer", slog.String("stream", streamKey), slog.String("stale", x.Name), slog.Duration("idle", x.Idle))
		}
	}
	return nil
}
