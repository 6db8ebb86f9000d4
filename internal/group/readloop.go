package group

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/delaystream/delaystream/internal/heal"
	"github.com/redis/go-redis/v9"
)

// Backoff of a stream whose read failed: the first check comes after
// minReadBackoff, each failure after doubles the pause up to
// maxReadBackoff.
const (
	minReadBackoff = 50 * time.Millisecond
	maxReadBackoff = 2 * time.Second
)

// readLoop is the state of one readShards call: which streams to read
// next, which are failing and waiting for a check, the replies of node
// reads still to be taken, and the timers of the loop. Only the loop's
// goroutine uses it.
//
// Streams whose read failed (their node is down, failing over) leave the
// shared pipeline, whose reply waits for its slowest node: after a backoff
// a goroutine checks them with XLEN (probe), and those that answer are
// read again; the others go on being read meanwhile.
type readLoop struct {
	rd      *reader
	streams []string      // core.streams order: 2i main, 2i+1 retry of shard i
	dirty   *arrivals     // the streams that may have entries
	lost    *lostStreams  // the streams whose subscription failed
	poll    *time.Ticker  // marks every stream dirty (arrivalsPoll, unshardedPoll)
	ready   chan struct{} // closed: what event takes when nothing else is ready

	next  int   // where the next round starts its search of dirty streams
	picks []int // the streams read this round

	failing  []bool // by stream index: its last read failed, it waits for a check
	nFailing int
	toCheck  []int       // failing streams not checked yet
	retry    *time.Timer // the next check
	backoff  time.Duration
	probing  bool // a check runs; its result comes on probed
	probed   chan streamProbe
	watch    heal.Watch // the slot of a failing stream
	fails    failures   // for the log
	ackBuf   []ackReq   // acknowledgements taken for a round's pipelines
	got      int64      // entries the round's reads queued (for the flow limits)

	// On a sharded Cluster each node's share of a round is read on its
	// own (see plan), and replies come back on done; orphans are reads
	// no longer waited for, whose replies the loop still takes.
	async   bool
	done    chan *nodeRead
	orphans int
}

// streamProbe is the result of a check of failing streams.
type streamProbe struct {
	ok, still []int // the streams that answered, that did not
	err       error // the first failure
}

// readFailure is the first failed read of a round and its stream.
type readFailure struct {
	at  int // stream index
	err error
}

// note records err, the failure of stream at, unless one was recorded.
func (f *readFailure) note(at int, err error) {
	if err != nil && f.err == nil {
		f.at, f.err = at, err
	}
}

func newReadLoop(rd *reader, streams []string, dirty *arrivals, lost *lostStreams) *readLoop {
	c := rd.r.c
	l := &readLoop{
		rd: rd, streams: streams, dirty: dirty, lost: lost,
		poll:    time.NewTicker(arrivalsPoll),
		ready:   make(chan struct{}),
		failing: make([]bool, len(streams)),
		retry:   time.NewTimer(time.Hour),
		backoff: minReadBackoff,
		probed:  make(chan streamProbe, 1),
		async:   len(c.shards) > 1 && isCluster(c.rdb),
		done:    make(chan *nodeRead, 2*len(streams)),
	}
	if len(streams) == 2 {
		l.poll.Reset(unshardedPoll)
	}
	l.retry.Stop()
	close(l.ready)
	return l
}

// close waits for a running check, takes the replies of orphaned reads
// (handed back: ctx is done) and stops the watch and the timers.
func (l *readLoop) close(ctx context.Context) {
	if l.probing {
		<-l.probed
	}
	for ; l.orphans > 0; l.orphans-- {
		_, _ = l.consume(ctx, <-l.done)
	}
	l.watch.End()
	l.retry.Stop()
	l.poll.Stop()
}

// run reads rounds of dirty streams while there is room, until ctx ends.
func (l *readLoop) run(ctx context.Context) error {
	for ctx.Err() == nil {
		if ok, waited := l.rd.r.pause.await(ctx); !ok {
			return nil
		} else if waited {
			l.dirty.markAll() // resumed: read whatever arrived meanwhile
		}
		n := l.rd.waitRoom(ctx)
		// event's select may take a ready event over ctx's end: once
		// Run is cancelled no new read starts.
		if n == 0 || !l.event(ctx, false) || ctx.Err() != nil {
			return nil
		}
		read, skipped := l.pick(n)
		if !read {
			if !skipped && !l.event(ctx, true) {
				return nil
			}
			continue // skipped: take the other dirty streams, if any
		}
		granted := int64(-1)
		if l.rd.lim != nil {
			if granted = l.limit(ctx, n); granted == 0 {
				continue // ctx ended or paused: the picks are marked again
			}
			n = granted
		}
		l.next = (l.picks[len(l.picks)-1] + 1) % len(l.streams)
		l.got = 0
		avail, ok := l.claim(n, granted)
		if !ok {
			continue
		}
		nrs := l.rd.plan(ctx, l.streams, l.picks, avail/int64(len(l.picks)), &l.ackBuf)
		var failed readFailure
		if l.async {
			l.sendEach(ctx, nrs, &failed)
		} else {
			l.rd.exec(ctx, nrs[0], l.streams)
			failed.note(l.consume(ctx, nrs[0]))
		}
		l.ended(ctx, failed)
		l.rd.readDone()
		if granted > 0 {
			l.rd.lim.settle(granted, l.got)
		}
	}
	return nil
}

// claim claims the room of the round's read of up to n entries (claimRead)
// and returns it. When a promote call's read for this consumer took the
// room meanwhile (take.go), it marks the picks to be read once there is
// room again, gives back the flow limits' grant and reports false.
func (l *readLoop) claim(n, granted int64) (int64, bool) {
	avail := l.rd.claimRead(n)
	if avail >= int64(len(l.picks)) {
		return avail, true
	}
	l.rd.readDone()
	for _, i := range l.picks {
		l.dirty.mark(i)
	}
	if granted > 0 {
		l.rd.lim.settle(granted, 0)
	}
	return 0, false
}

// limit waits for the group's flow limits to grant up to n permits for
// the picked streams and returns how many they granted; with fewer than
// the picks, the picks beyond are marked to be read later. With 0 (ctx
// ended, or the group was paused meanwhile) every pick is marked again.
func (l *readLoop) limit(ctx context.Context, n int64) int64 {
	granted := l.rd.lim.acquire(ctx, n)
	keep := min(int64(len(l.picks)), granted)
	for _, i := range l.picks[keep:] {
		l.dirty.mark(i)
	}
	l.picks = l.picks[:keep]
	return granted
}

// pick takes up to n dirty streams into l.picks, leaving out the failing
// ones (a failing stream is read again once its check answers). It
// reports whether any are left to read and, if not, whether failing
// streams were left out.
func (l *readLoop) pick(n int64) (read, skipped bool) {
	l.picks = l.dirty.take(l.next, int(n), l.picks)
	if l.nFailing > 0 && len(l.picks) > 0 {
		if l.picks = slices.DeleteFunc(l.picks, func(i int) bool { return l.failing[i] }); len(l.picks) == 0 {
			return false, true
		}
	}
	return len(l.picks) > 0, false
}

// event waits for one of the loop's events and acts on it, or with
// block false takes one that is ready, if any. It reports false once
// ctx ended.
func (l *readLoop) event(ctx context.Context, block bool) bool {
	now, kick, tick := l.ready, (<-chan struct{})(nil), (<-chan time.Time)(nil)
	if block {
		now, kick, tick = nil, l.dirty.kick, l.poll.C
	}
	select {
	case <-ctx.Done():
		return false
	case <-now:
	case <-kick:
	case <-l.retry.C:
		l.probe(ctx)
	case p := <-l.probed:
		l.checked(ctx, p)
	case <-l.watch.Moved():
		l.moved(ctx)
	case <-l.lost.kick:
		l.down(ctx, l.lost.take())
	case nr := <-l.done: // an orphaned read's reply
		l.orphans--
		_, _ = l.consume(ctx, nr)
	case <-tick:
		l.dirty.markAll()
	}
	return true
}

// sendEach reads each node's share of a round on its own and waits for
// every node's reply, unless a node's subscription is lost meanwhile:
// then every stream of it that a read waits for is checked on its own
// (down), and a read of such streams only is no longer waited for
// (orphaned): its reply, when go-redis gives up on the node, is taken in
// the loop. failed notes the round's first failure.
func (l *readLoop) sendEach(ctx context.Context, nrs []*nodeRead, failed *readFailure) {
	rd, streams, done := l.rd, l.streams, l.done
	for _, nr := range nrs {
		go func() {
			rd.exec(ctx, nr, streams)
			done <- nr
		}()
	}
	pending := nrs
	for len(pending) > 0 {
		select {
		case nr := <-l.done:
			if nr.orphaned {
				l.orphans--
				failed.note(l.consume(ctx, nr))
				continue
			}
			pending = slices.DeleteFunc(pending, func(x *nodeRead) bool { return x == nr })
			failed.note(l.consume(ctx, nr))
		case <-l.lost.kick:
			l.down(ctx, l.lost.take())
			pending = l.orphan(pending)
		}
	}
}

// orphan drops from pending the reads whose streams are all failing,
// marking them orphaned.
func (l *readLoop) orphan(pending []*nodeRead) []*nodeRead {
	return slices.DeleteFunc(pending, func(nr *nodeRead) bool {
		if slices.ContainsFunc(nr.picks, func(i int) bool { return !l.failing[i] }) {
			return false
		}
		nr.orphaned = true
		l.orphans++
		return true
	})
}

// ended acts on a round's outcome: after a round without failures, with
// no stream failing, it resets the backoff and ends the watch; after a
// failed one it asks the client to heal, recreates a missing group or
// logs the failure, and schedules a check of the failing streams.
func (l *readLoop) ended(ctx context.Context, failed readFailure) {
	r, c := l.rd.r, l.rd.r.c
	if failed.err == nil {
		if l.nFailing == 0 {
			l.watch.End()
			l.backoff = minReadBackoff
			if l.fails.n > 0 {
				l.fails.succeeded(ctx, r.log, "xreadgroup recovered")
			}
		}
		return
	}
	if heal.Suggests(failed.err) {
		l.watch.Start(ctx, c.rdb, l.streams[failed.at], "") // before the reload heal.After asks for
	}
	heal.After(c.rdb, failed.err)
	if redis.HasErrorPrefix(failed.err, "NOGROUP") {
		l.rd.groupMissing(ctx, failed.err)
	} else if ctx.Err() == nil {
		// A WRONGTYPE reply names no key: the log names it.
		l.fails.failed(ctx, r.log, "xreadgroup failed", c.explain(ctx, failed.err, c.shardOf(l.streams[failed.at])), slog.Duration("retry_in", l.backoff))
	}
	l.retryLater()
}

// retryLater schedules the next check after the backoff, and doubles it.
func (l *readLoop) retryLater() {
	l.retry.Reset(l.backoff)
	l.backoff = min(2*l.backoff, maxReadBackoff)
}

// probe starts a check of the failing streams not checked yet, unless one
// runs: a goroutine sends them an XLEN each, in one pipeline, and its
// result comes on probed.
func (l *readLoop) probe(ctx context.Context) {
	if l.probing || len(l.toCheck) == 0 {
		return
	}
	l.probing = true
	check := slices.Clone(l.toCheck)
	l.toCheck = l.toCheck[:0]
	// A check still trying a failed master ends once the slot moves.
	bctx, unbound := l.watch.Bound(context.WithoutCancel(ctx))
	rdb, streams, probed := l.rd.r.c.rdb, l.streams, l.probed
	go func() {
		defer unbound()
		probed <- probeStreams(bctx, rdb, streams, check)
	}()
}

// probeStreams sends an XLEN of each stream of check, in one pipeline.
func probeStreams(ctx context.Context, rdb redis.UniversalClient, streams []string, check []int) streamProbe {
	pctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	pipe := rdb.Pipeline()
	cmds := make([]*redis.IntCmd, len(check))
	for k, i := range check {
		cmds[k] = pipe.XLen(pctx, streams[i])
	}
	_, _ = pipe.Exec(pctx)
	var p streamProbe
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
	return p
}

// checked takes a check's result: the streams that answered are read
// again; the others wait for the next check, after the backoff.
func (l *readLoop) checked(ctx context.Context, p streamProbe) {
	rdb := l.rd.r.c.rdb
	l.probing = false
	for _, i := range p.ok {
		l.failing[i] = false
		l.nFailing--
		l.dirty.mark(i)
	}
	l.toCheck = append(l.toCheck, p.still...)
	if len(p.still) > 0 {
		if heal.Suggests(p.err) {
			l.watch.Start(ctx, rdb, l.streams[p.still[0]], "")
		}
		heal.After(rdb, p.err)
		l.retryLater()
	} else if l.nFailing == 0 {
		l.watch.End()
	}
}

// down takes streams whose node's subscription failed (a Cluster's only):
// the node may be down, and a read of them in the shared pipeline could
// hold every other stream's read for as long as go-redis goes on dialing
// it. They are checked on their own instead, like streams whose read
// failed, and read again once they answer.
func (l *readLoop) down(ctx context.Context, is []int) {
	added := false
	for _, i := range is {
		if !l.failing[i] {
			l.failing[i] = true
			l.nFailing++
			l.toCheck = append(l.toCheck, i)
			added = true
		}
	}
	if added {
		l.watch.Start(ctx, l.rd.r.c.rdb, l.streams[is[0]], "")
		l.retry.Reset(l.backoff)
	}
}

// moved: a failing stream's slot has another master now (a replica was
// promoted): check the failing streams at once.
func (l *readLoop) moved(ctx context.Context) {
	l.watch.End()
	l.backoff = minReadBackoff
	l.probe(ctx)
}
