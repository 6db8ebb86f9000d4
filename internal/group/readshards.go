package group

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/delaystream/delaystream/internal/heal"
	"github.com/delaystream/delaystream/internal/shardsub"
	"github.com/redis/go-redis/v9"
)

// arrivalsPoll is how often a consumer of a sharded queue reads every
// shard even without an announcement: announcements are pub/sub messages,
// which a connection that breaks unnoticed can lose (a resubscription
// reads every shard at once). A consumer of an unsharded queue reads its
// two streams every unshardedPoll: that poll is its idle cost (two reads),
// and its one subscription is checked by a PING after 30 s of silence.
const (
	arrivalsPoll  = 5 * time.Second
	unshardedPoll = 30 * time.Second
)

// arrivals tracks which streams of a sharded queue may have entries for
// the group: those announced by the movers (the main lane's and the
// group's retry lanes' arrivals channels), those a read filled to its
// count, and all of them after a (re)subscription or a poll period. Its
// methods are safe for concurrent use.
type arrivals struct {
	mu    sync.Mutex
	dirty []bool        // by stream index (core.streams order: 2i main, 2i+1 retry of shard i)
	n     int           // dirty streams
	later []bool        // by stream index: to be marked when the stray timer fires
	armed bool          // the stray timer runs
	kick  chan struct{} // a token when a stream became dirty
}

func newArrivals(streams int) *arrivals {
	return &arrivals{dirty: make([]bool, streams), later: make([]bool, streams), kick: make(chan struct{}, 1)}
}

// markLater marks stream index i strayDelay from the first markLater
// since the last such mark: every stream marked later in that window is
// marked with it, so that they are read in one round.
func (a *arrivals) markLater(i int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.dirty[i] || a.later[i] {
		return
	}
	a.later[i] = true
	if !a.armed {
		a.armed = true
		time.AfterFunc(strayDelay, a.markStrays)
	}
}

// markStrays marks the streams markLater deferred.
func (a *arrivals) markStrays() {
	a.mu.Lock()
	a.armed = false
	for i, l := range a.later {
		if l {
			a.later[i] = false
			if !a.dirty[i] {
				a.dirty[i] = true
				a.n++
			}
		}
	}
	a.mu.Unlock()
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// mark notes that stream index i may have entries.
func (a *arrivals) mark(i int) {
	a.mu.Lock()
	if !a.dirty[i] {
		a.dirty[i] = true
		a.n++
	}
	a.mu.Unlock()
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// markAll notes that every stream may have entries.
func (a *arrivals) markAll() {
	a.mu.Lock()
	for i := range a.dirty {
		a.dirty[i] = true
	}
	a.n = len(a.dirty)
	a.mu.Unlock()
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// take clears and returns up to max dirty stream indexes, starting the
// search at from (round robin, so that no stream waits behind others).
func (a *arrivals) take(from, max int, out []int) []int {
	a.mu.Lock()
	defer a.mu.Unlock()
	out = out[:0]
	for k := 0; k < len(a.dirty) && len(out) < max && a.n > 0; k++ {
		i := (from + k) % len(a.dirty)
		if a.dirty[i] {
			a.dirty[i] = false
			a.n--
			out = append(out, i)
		}
	}
	return out
}

// listen marks the streams announced on the arrivals channels of every
// shard's main lane and of the group's retry lanes until ctx ends, for the
// reader (a) and the reclaimer (rd.act). A sharded queue's channels are
// shard channels, subscribed with one connection per node that holds
// shards and pinged after 5 s of silence; an unsharded queue's two are
// classic channels on one connection, pinged after 30 s of silence. Every
// (re)subscription marks every stream, since announcements made while it
// was down are lost. A sharded queue's shards that f says another consumer
// of the group owns are marked strayDelay later (affinity.go).
func (rd *reader) listen(ctx context.Context, a *arrivals, f *affinity, lost *lostStreams) error {
	c := rd.r.c
	byChan := make(map[string]int, 2*len(c.shards))
	groups := make([][]string, 0, len(c.shards))
	for _, sh := range c.shards {
		byChan[sh.main.Arrivals] = 2 * sh.i
		byChan[sh.retry.Arrivals] = 2*sh.i + 1
		groups = append(groups, []string{sh.main.Arrivals, sh.retry.Arrivals})
	}

	cfg := shardsub.Config{
		Groups: groups,
		OnMessage: func(ch, _ string) {
			if i, ok := byChan[ch]; ok {
				if f.owns(i / 2) {
					a.mark(i)
				} else {
					a.markLater(i)
				}
				rd.act.touch(i)
			}
		},
		OnReset: func() {
			a.markAll()
			rd.act.touchAll()
		},
		Health: arrivalsPoll,
		Logger: rd.r.log,
	}
	if isCluster(c.rdb) {
		cfg.OnLost = func(groups [][]string) {
			var is []int
			for _, g := range groups {
				for _, ch := range g {
					if i, ok := byChan[ch]; ok {
						is = append(is, i)
					}
				}
			}
			lost.add(is)
		}
	}
	if len(c.shards) == 1 {
		cfg.Classic, cfg.Health = true, unshardedPoll
	}
	return shardsub.Run(ctx, c.rdb, cfg)
}

// readShards is the intake of every queue. XREADGROUP can block on
// several streams only within one slot, and a blocking read holds a
// connection of the client's pool while it waits (with many queues on one
// client, the pool runs dry and every other call waits), and blocks
// briefly anyway because cancelling ctx cannot end it; so the reader waits
// for the movers' announcements (one pub/sub connection per node, outside
// the pool), then reads the announced streams without blocking, in one
// pipeline (one round trip per node), sharing the room between them: a
// shard with a backlog gets its share and is read again next round, and
// cannot starve the others. An unsharded queue is one shard: its idle
// consumer makes one pair of reads per 30 s, and stops at once.
func (rd *reader) readShards(ctx context.Context) error {
	r, c := rd.r, rd.r.c
	streams := c.streams()
	a := newArrivals(len(streams))
	a.markAll()
	f := new(affinity)
	lctx, stop := context.WithCancel(ctx)
	var bg sync.WaitGroup
	defer func() { stop(); bg.Wait() }()
	lost := newLostStreams()
	bg.Go(func() { _ = rd.listen(lctx, a, f, lost) })
	if len(c.shards) > 1 {
		bg.Go(func() { rd.follow(lctx, f, a) })
		bg.Go(func() { _ = rd.present(lctx) })
	}

	poll := time.NewTicker(arrivalsPoll)
	if len(streams) == 2 {
		poll.Reset(unshardedPoll)
	}
	defer poll.Stop()
	// Streams whose read failed (their node is down, failing over) leave
	// the shared pipeline, whose reply waits for its slowest node: after a
	// backoff a goroutine checks them with XLEN, and those that answer are
	// read again; the others go on being read meanwhile.
	backoff := 50 * time.Millisecond
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	var (
		from     int
		picks    []int
		deferred []int
		failing  = make([]bool, len(streams)) // the last read of stream i failed
		nfailing int
		fails    failures   // for the log
		ackBuf   []ackReq   // acknowledgements taken for a read's pipeline
		watch    heal.Watch // the slot of a failing stream
	)
	defer watch.End()
	// On a sharded Cluster each node's share of a round is read on its
	// own (see plan), and replies come back on done; orphans are reads
	// no longer waited for, whose replies the loop still takes.
	async := len(c.shards) > 1 && isCluster(c.rdb)
	done := make(chan *nodeRead, 2*len(streams))
	orphans := 0
	defer func() {
		for ; orphans > 0; orphans-- {
			_, _ = rd.consume(ctx, <-done, streams, failing, &nfailing, &deferred, a) // handed back: ctx is done
		}
	}()
	type probe struct {
		ok, still []int // deferred streams that answered, that did not
		err       error // the first failure
	}
	probed := make(chan probe, 1)
	probing := false
	defer func() {
		if probing {
			<-probed
		}
	}()
	again := func() {
		if probing || len(deferred) == 0 {
			return
		}
		probing = true
		check := slices.Clone(deferred)
		deferred = deferred[:0]
		// A check still trying a failed master ends once the slot moves.
		bctx, unbound := watch.Bound(context.WithoutCancel(ctx))
		go func() {
			defer unbound()
			pctx, cancel := context.WithTimeout(bctx, opTimeout)
			defer cancel()
			pipe := c.rdb.Pipeline()
			cmds := make([]*redis.IntCmd, len(check))
			for k, i := range check {
				cmds[k] = pipe.XLen(pctx, streams[i])
			}
			_, _ = pipe.Exec(pctx)
			var p probe
			for k, i := range check {
				if err := cmds[k].Err(); err != nil {
					p.still = append(p.still, i)
					if p.err == nil {
						p.err = err
					}
				} else {
					p.ok = append(p.ok, i)
				}
			}
			probed <- p
		}()
	}
	checked := func(p probe) {
		probing = false
		for _, i := range p.ok {
			failing[i] = false
			nfailing--
			a.mark(i)
		}
		deferred = append(deferred, p.still...)
		if len(p.still) > 0 {
			if heal.Suggests(p.err) {
				watch.Start(ctx, c.rdb, streams[p.still[0]], "")
			}
			heal.After(c.rdb, p.err)
			retry.Reset(backoff)
			backoff = min(2*backoff, 2*time.Second)
		} else if nfailing == 0 {
			watch.End()
		}
	}
	// down: the subscription of these streams' node failed (a Cluster's
	// only): the node may be down, and a read of them in the shared
	// pipeline could hold every other stream's read for as long as
	// go-redis goes on dialing it. They are checked on their own instead,
	// like streams whose read failed, and read again once they answer.
	down := func(is []int) {
		added := false
		for _, i := range is {
			if !failing[i] {
				failing[i] = true
				nfailing++
				deferred = append(deferred, i)
				added = true
			}
		}
		if added {
			watch.Start(ctx, c.rdb, streams[is[0]], "")
			retry.Reset(backoff)
		}
	}
	// moved: a failing stream's slot has another master now (a replica was
	// promoted): check the failing streams at once.
	moved := func() {
		watch.End()
		backoff = 50 * time.Millisecond
		again()
	}
	ready := make(chan struct{})
	close(ready)
	// event waits for one of the loop's events and acts on it, or with
	// block false takes one that is ready, if any. It reports false once
	// ctx ended.
	event := func(block bool) bool {
		now, kick, tick := ready, (<-chan struct{})(nil), (<-chan time.Time)(nil)
		if block {
			now, kick, tick = nil, a.kick, poll.C
		}
		select {
		case <-ctx.Done():
			return false
		case <-now:
		case <-kick:
		case <-retry.C:
			again()
		case p := <-probed:
			checked(p)
		case <-watch.Moved():
			moved()
		case <-lost.kick:
			down(lost.take())
		case nr := <-done: // an orphaned read's reply
			orphans--
			_, _ = rd.consume(ctx, nr, streams, failing, &nfailing, &deferred, a)
		case <-tick:
			a.markAll()
		}
		return true
	}
	for ctx.Err() == nil {
		n := rd.waitRoom(ctx)
		if n == 0 {
			return nil
		}
		if !event(false) {
			return nil
		}
		picks = a.take(from, int(n), picks)
		if nfailing > 0 && len(picks) > 0 {
			// A failing stream is read again once its check answers.
			if picks = slices.DeleteFunc(picks, func(i int) bool { return failing[i] }); len(picks) == 0 {
				continue // take the other dirty streams, if any
			}
		}
		if len(picks) == 0 {
			if !event(true) {
				return nil
			}
			continue
		}
		from = (picks[len(picks)-1] + 1) % len(streams)
		nrs := rd.plan(ctx, streams, picks, n/int64(len(picks)), &ackBuf)
		var failed error
		failedAt := 0 // the stream of failed
		consume := func(nr *nodeRead) {
			if at, err := rd.consume(ctx, nr, streams, failing, &nfailing, &deferred, a); err != nil && failed == nil {
				failed, failedAt = err, at
			}
		}
		if !async {
			rd.exec(ctx, nrs[0], streams)
			consume(nrs[0])
		} else {
			for _, nr := range nrs {
				go func() {
					rd.exec(ctx, nr, streams)
					done <- nr
				}()
			}
			// Wait for every node's reply, unless a node's subscription
			// is lost meanwhile: then every stream of it that a read
			// waits for is checked on its own (down), and a read of such
			// streams only is no longer waited for (orphaned): its reply,
			// when go-redis gives up on the node, is taken in the loop.
			pending := nrs
			for len(pending) > 0 {
				select {
				case nr := <-done:
					if nr.orphaned {
						orphans--
						consume(nr)
						continue
					}
					pending = slices.DeleteFunc(pending, func(x *nodeRead) bool { return x == nr })
					consume(nr)
				case <-lost.kick:
					down(lost.take())
					pending = slices.DeleteFunc(pending, func(nr *nodeRead) bool {
						if slices.ContainsFunc(nr.picks, func(i int) bool { return !failing[i] }) {
							return false
						}
						nr.orphaned = true
						orphans++
						return true
					})
				}
			}
		}
		if failed == nil {
			if nfailing == 0 {
				watch.End()
				backoff = 50 * time.Millisecond
				if fails.n > 0 {
					fails.succeeded(ctx, r.log, "xreadgroup recovered")
				}
			}
			continue
		}
		if heal.Suggests(failed) {
			watch.Start(ctx, c.rdb, streams[failedAt], "") // before the reload heal.After asks for
		}
		heal.After(c.rdb, failed)
		if redis.HasErrorPrefix(failed, "NOGROUP") {
			rd.groupMissing(ctx, failed)
		} else if ctx.Err() == nil {
			// A WRONGTYPE reply names no key: the log names it.
			fails.failed(ctx, r.log, "xreadgroup failed", c.explain(ctx, failed, c.shardOf(streams[failedAt])), slog.Duration("retry_in", backoff))
		}
		retry.Reset(backoff)
		backoff = min(2*backoff, 2*time.Second)
	}
	return nil
}

// lostStreams passes the streams whose subscription failed from the
// subscription's goroutines to the reader's loop.
type lostStreams struct {
	mu   sync.Mutex
	is   []int
	kick chan struct{} // ready when is is not empty
}

func newLostStreams() *lostStreams { return &lostStreams{kick: make(chan struct{}, 1)} }

func (l *lostStreams) add(is []int) {
	if len(is) == 0 {
		return
	}
	l.mu.Lock()
	l.is = append(l.is, is...)
	l.mu.Unlock()
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

func (l *lostStreams) take() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	is := l.is
	l.is = nil
	return is
}
