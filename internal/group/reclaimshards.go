package group

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/delaystream/delaystream/internal/heal"
	"github.com/redis/go-redis/v9"
)

// reclaimSweep is how often the reclaimer checks the pending count of
// every quiet stream (one XPENDING each) and passes over those with
// entries pending: a safety net for entries that became pending without
// an announcement (a foreign writer or reader of the group, say).
const reclaimSweep = time.Minute

// activity tracks which streams may have entries pending in the group.
// A stream's pending list gains entries only when entries of the stream
// are read by the group, and the movers announce every append on the
// lane's arrivals channel from the script that appends; so a stream whose
// pending list was found empty while the group had read all of it stays
// so until its next announcement (or a read of this consumer that found
// entries, or a resubscription, after which anything may have been
// missed). The reclaimer skips such quiet streams: an idle consumer makes
// no reclaim calls, while a stream on which any consumer of the group
// holds entries is passed over every interval, so a crashed consumer's
// entries are still taken over within the visibility timeout plus the
// interval. Its methods are safe for concurrent use.
type activity struct {
	mu    sync.Mutex
	gen   []uint64 // bumped whenever stream i may have gained pending entries
	quiet []bool   // stream i's pending list was found empty at gen[i]
}

func newActivity(streams int) *activity {
	return &activity{gen: make([]uint64, streams), quiet: make([]bool, streams)}
}

// touch notes that stream i may have gained pending entries.
func (a *activity) touch(i int) {
	a.mu.Lock()
	a.gen[i]++
	a.quiet[i] = false
	a.mu.Unlock()
}

// touchAll notes that every stream may have gained pending entries.
func (a *activity) touchAll() {
	a.mu.Lock()
	for i := range a.gen {
		a.gen[i]++
		a.quiet[i] = false
	}
	a.mu.Unlock()
}

// state returns stream i's generation and whether it is quiet.
func (a *activity) state(i int) (uint64, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.gen[i], a.quiet[i]
}

// settle marks stream i quiet if nothing touched it since generation gen.
func (a *activity) settle(i int, gen uint64) {
	a.mu.Lock()
	if a.gen[i] == gen {
		a.quiet[i] = true
	}
	a.mu.Unlock()
}

// loopShards is the reclaim loop. Each tick it runs a first XAUTOCLAIM on
// every stream that is not quiet in one pipeline (one round trip per
// node, the room shared between them), continues alone with each stream
// that had more, and checks the streams that were not touched for a whole
// tick (see settleIdle): those with nothing pending and nothing unread
// become quiet and are skipped until they are touched again.
func (rc *reclaimer) loopShards(ctx context.Context, tick *time.Ticker) error {
	streams := rc.r.c.streams()
	last := make([]uint64, len(streams)) // each stream's generation at the previous tick
	for i := range last {
		last[i] = ^uint64(0) // not seen yet
	}
	sweep := time.Now()
	var todo, idle []int
	gens := make([]uint64, len(streams))
	var fails failures // for the log
	// An unsharded queue's two streams are on one server: while it cannot
	// be reached, passes are made every 2, then 4 ticks (a sharded queue's
	// other shards may be on healthy servers: its passes keep the rate).
	backoff := 1
	for ctx.Err() == nil {
		if time.Since(sweep) >= reclaimSweep {
			rc.sweep(ctx, streams)
			sweep = time.Now()
		}
		todo, idle = rc.rd.act.pick(last, gens, todo[:0], idle[:0])
		if rc.r.pause.paused() {
			todo, idle = todo[:0], idle[:0] // paused: no new work, not even a crashed consumer's
		}
		unreachable := false
		if len(todo) > 0 {
			unreachable = rc.passAll(ctx, streams, todo, &fails)
		}
		switch {
		case unreachable && len(streams) == 2:
			backoff = min(2*backoff, 4)
		case len(idle) > 0 && ctx.Err() == nil:
			backoff = 1
			rc.settleIdle(ctx, streams, idle, gens)
		default:
			backoff = 1
		}
		if tick := rc.r.c.cfg.loopTick; tick != nil {
			tick("reclaim")
		}
		for i := 0; i < backoff && ctx.Err() == nil; i++ {
			select {
			case <-ctx.Done():
			case <-tick.C:
			}
		}
	}
	return nil
}

// pick appends to todo the streams that are not quiet, and to idle those
// of them whose generation is still the one in last (untouched for a
// tick: maybe nothing pending), with that generation in gens; it sets
// last to each such stream's generation now. It is for the reclaim loop,
// which owns last and gens.
func (a *activity) pick(last, gens []uint64, todo, idle []int) ([]int, []int) {
	for i := range last {
		gen, quiet := a.state(i)
		if quiet {
			continue
		}
		todo = append(todo, i)
		if gen == last[i] {
			idle = append(idle, i)
			gens[i] = gen
		}
		last[i] = gen
	}
	return todo, idle
}

// passAll makes a pass over the streams todo (passShards) and logs its
// failure or the recovery from failures. It reports whether the pass
// failed on a server that could not be reached (an error that is not a
// Redis reply).
func (rc *reclaimer) passAll(ctx context.Context, streams []string, todo []int, fails *failures) (unreachable bool) {
	r, c := rc.r, rc.r.c
	if err := rc.passShards(ctx, streams, todo); err != nil && ctx.Err() == nil {
		heal.After(c.rdb, err)
		var rerr redis.Error
		unreachable = !errors.As(err, &rerr)
		fails.failed(ctx, r.log, "reclaim failed", err)
	} else if err == nil && fails.n > 0 {
		fails.succeeded(ctx, r.log, "reclaim recovered")
	}
	return unreachable
}

// passShards runs the first XAUTOCLAIM of the streams todo in one
// pipeline, and continues with each stream whose pass did not finish.
func (rc *reclaimer) passShards(ctx context.Context, streams []string, todo []int) error {
	c, rd := rc.r.c, rc.rd
	n := min(rd.free(), max(rd.workers, reclaimBatch))
	if n <= 0 {
		return nil // busy: leave the entries for another consumer
	}
	per := max(n/int64(len(todo)), 1)
	pctx, cancel := context.WithTimeout(ctx, opTimeout)
	pipe := c.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(todo))
	for k, i := range todo {
		cmds[k] = pipe.Do(pctx, "XAUTOCLAIM", streams[i], c.group, c.cfg.consumer, c.cfg.visibility.Milliseconds(), "0-0", "COUNT", per)
	}
	_, _ = pipe.Exec(pctx) // errors are per command
	cancel()
	// Everything claimed is held (so extended) before any of it waits for
	// the flow limits' permits (admit).
	var first error
	results := make([]claimResult, len(todo))
	held := make([][]flight, len(todo))
	for k, i := range todo {
		v, err := cmds[k].Slice()
		if err == nil {
			results[k], err = parseClaim(streams[i], v)
		}
		if err != nil {
			if first == nil {
				first = err
			}
			results[k].next = "0-0" // nothing more from this stream this pass
			continue
		}
		held[k] = rc.take(ctx, streams[i], results[k])
	}
	for k, i := range todo {
		rc.admit(ctx, held[k])
		if res := results[k]; res.next != "0-0" && ctx.Err() == nil {
			if err := rc.claimFrom(ctx, streams[i], res.next, res.full(per)); err != nil && first == nil {
				first = err
			}
		}
	}
	return first
}

// settleIdle reads, for the streams idle (untouched for a tick), the
// group's pending count and last delivered id and the stream's last entry,
// in one pipeline, and marks quiet those with nothing pending and nothing
// unread, unless they were touched meanwhile (gens holds their
// generations). Nothing unread matters: entries appended before the last
// announcement and not read yet (every consumer of the group was busy, or
// none ran) may be read, and left pending, without a new announcement.
func (rc *reclaimer) settleIdle(ctx context.Context, streams []string, idle []int, gens []uint64) {
	c := rc.r.c
	pctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	pipe := c.rdb.Pipeline()
	groups := make([]*redis.XInfoGroupsCmd, len(idle))
	last := make([]*redis.XMessageSliceCmd, len(idle))
	for k, i := range idle {
		groups[k] = pipe.XInfoGroups(pctx, streams[i])
		last[k] = pipe.XRevRangeN(pctx, streams[i], "+", "-", 1)
	}
	_, _ = pipe.Exec(pctx)
	for k, i := range idle {
		gs, err := groups[k].Result()
		if err != nil {
			continue
		}
		xs, err := last[k].Result()
		if err != nil {
			continue
		}
		for _, g := range gs {
			if g.Name == c.group && g.Pending == 0 && (len(xs) == 0 || !idBefore(g.LastDeliveredID, xs[0].ID)) {
				rc.rd.act.settle(i, gens[i])
			}
		}
	}
}

// sweep checks the pending count of every quiet stream, in one pipeline,
// and touches those with entries pending (see reclaimSweep).
func (rc *reclaimer) sweep(ctx context.Context, streams []string) {
	c, act := rc.r.c, rc.rd.act
	var quiet []int
	for i := range streams {
		if _, q := act.state(i); q {
			quiet = append(quiet, i)
		}
	}
	if len(quiet) == 0 {
		return
	}
	pctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	pipe := c.rdb.Pipeline()
	cmds := make([]*redis.XPendingCmd, len(quiet))
	for k, i := range quiet {
		cmds[k] = pipe.XPending(pctx, streams[i], c.group)
	}
	_, _ = pipe.Exec(pctx)
	for k, i := range quiet {
		if p, err := cmds[k].Result(); err != nil || p.Count > 0 {
			act.touch(i)
		}
	}
}

// idBefore reports whether stream entry id a is lower than b ("ms-seq";
// an id that does not parse is lower than any other).
func idBefore(a, b string) bool {
	am, as, aok := parseID(a)
	bm, bs, bok := parseID(b)
	switch {
	case !aok:
		return bok || a < b
	case !bok:
		return false
	}
	return am < bm || am == bm && as < bs
}

// parseID splits a stream entry id into its two numbers.
func parseID(id string) (ms, seq uint64, ok bool) {
	m, s, found := strings.Cut(id, "-")
	if !found {
		return 0, 0, false
	}
	ms, err1 := strconv.ParseUint(m, 10, 64)
	seq, err2 := strconv.ParseUint(s, 10, 64)
	return ms, seq, err1 == nil && err2 == nil
}
