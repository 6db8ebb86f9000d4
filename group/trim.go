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
	"github.com/delaystream/delaystream/stream"
)

// trimmer trims the queue stream and the retry lane and removes stale
// consumers (see loop). The roles that settle entries tell it which
// streams they settled entries of.
type trimmer struct {
	r   *runState
	due []atomic.Bool // per stream, in core.streams order: this consumer settled entries since its last trim
}

func newTrimmer(r *runState) *trimmer {
	return &trimmer{r: r, due: make([]atomic.Bool, 2*len(r.c.shards))}
}

// settled notes that this consumer acknowledged entries of streamKey, so
// its next trim pass trims that stream.
func (t *trimmer) settled(streamKey string) {
	sh := t.r.c.shardOf(streamKey)
	if streamKey == sh.retry.Stream {
		t.due[2*sh.i+1].Store(true)
	} else {
		t.due[2*sh.i].Store(true)
	}
}

// loop trims the queue stream and the retry lane below the oldest entry
// some group still needs, and removes stale consumers without pending
// entries. It trims a stream at most every trim interval, and only when
// this consumer settled (acknowledged, dropped, retried or dead-lettered)
// entries of it since its last trim of it, which is what moves the
// threshold; so an idle consumer makes no trim calls. Every trimIdleEvery
// (or trim interval, if longer), the first time one such period after
// start, it trims both streams anyway, for what other groups' progress, a
// retention or a removed group freed; stale consumers are removed on the
// same schedule.
func (t *trimmer) loop(ctx context.Context) error {
	r, c := t.r, t.r.c
	idleEvery := max(c.cfg.trimEvery, trimIdleEvery)
	sleepCtx(ctx, time.Duration(rand.Int64N(int64(c.cfg.trimEvery))))
	lastStale, lastFull := time.Now(), time.Now()
	var fails failures
	for ctx.Err() == nil {
		var failed error
		full := time.Since(lastFull) >= idleEvery
		if full {
			lastFull = time.Now()
		}
		for i, s := range c.streams() {
			// Clear before trimming: what is settled meanwhile is trimmed
			// on the next pass.
			if !t.due[i].Swap(false) && !full {
				continue
			}
			groups := "" // the retry lane is this group's alone
			if sh := c.shardOf(s); s == sh.main.Stream {
				groups = sh.groups
			}
			_, more, err := trim(ctx, c.rdb, s, groups, c.cfg.retention)
			if more { // failed or bounded: go on at the next pass
				t.due[i].Store(true)
			}
			if err != nil && ctx.Err() == nil {
				heal.After(c.rdb, err)
				failed = err
			}
		}
		if failed != nil {
			fails.failed(ctx, r.log, "trim failed", failed)
		} else if fails.n > 0 {
			fails.succeeded(ctx, r.log, "trim recovered")
		}
		if time.Since(lastStale) >= min(c.cfg.staleConsumer/4, idleEvery) {
			lastStale = time.Now()
			for _, s := range c.streams() {
				if err := t.removeStale(ctx, s); err != nil && ctx.Err() == nil {
					r.log.WarnContext(ctx, "removing stale consumers failed", slog.String("stream", s), slog.Any("err", err))
				}
			}
		}
		sleepCtx(ctx, c.cfg.trimEvery)
	}
	return nil
}

// errGroupMissing is the error of a trim that a group recorded for the
// stream (stream.Keys.Groups) but missing from it held back.
var errGroupMissing = errors.New("not trimmed while a recorded group is missing from the stream")

// trimIdleEvery is how often a consumer that settled nothing still trims
// (and removes stale consumers). What such a pass frees is rare (a
// retention that ran out, a removed group: a slower group's progress is
// trimmed by its own consumers after their acknowledgements), and each
// costs about 6 commands per stream, so it is rare too: every consumer of
// 3 groups × 3 running it once a minute cost 1.5 commands/s in all.
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
