package group

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream/internal/heal"
	"github.com/delaystream/delaystream/internal/scripts"
)

// ackBatch is how many queued acknowledgements make the acker send at once,
// without waiting for the ack delay or a read. It bounds what a crash
// leaves handled but unacknowledged (redelivered after the visibility
// timeout): about ackBatch entries, plus those queued during one XACK
// round trip, where a full ack delay at a high rate would leave many
// more. At a trickle fewer wait, and they still ride with reads.
const ackBatch = 16

// acker batches acknowledgements: an ack waits at most the ack delay (50
// ms, twice a coarser precision, less under a short visibility timeout:
// ackDelayFor) or until
// ackBatch are queued; then one Ack script call per stream (XACK, and the
// count in the queue's history; pipelined when there are two) acknowledges
// them all. Meanwhile the reader takes what is queued
// into its next read's pipeline (take): at a trickle, where a read follows
// each announcement, acknowledgements then cost no round trip of their
// own. A read takes only the acks of streams on the nodes it reads, so on
// a sharded queue each node's acks wait for that node's share of the
// reads; the ack delay is long enough that most of them still find a read
// to ride with. Workers only append to a buffer under a mutex; the acker
// goroutine is woken once per batch, not per ack.
type acker struct {
	r     *runState
	trim  *trimmer      // told which streams were acknowledged
	delay time.Duration // the ack delay: ackDelayFor the visibility timeout and precision
	mu    sync.Mutex
	buf   []ackReq      // queued; guarded by mu
	kick  chan struct{} // a token when buf got its first or its ackBatch-th entry
	stop  chan struct{}
}

func newAcker(r *runState, trim *trimmer) *acker {
	delay := ackDelayFor(r.c.cfg.visibility, r.c.cfg.precision)
	if d := r.c.cfg.ackDelay; d > 0 {
		delay = min(d, r.c.cfg.visibility/4)
	}
	return &acker{r: r, trim: trim, delay: delay, buf: make([]ackReq, 0, ackBatch), kick: make(chan struct{}, 1), stop: make(chan struct{})}
}

// ackReq is one entry to acknowledge; success says whether its handler
// succeeded (counted in Counters.Acked once the XACK went through) or it
// was dropped (counted in Dropped already); msg and attempt are its
// message's, for the group's handled records.
type ackReq struct {
	stream, id string
	success    bool
	msg        string
	attempt    int
}

// add queues the acknowledgement of one entry.
func (a *acker) add(q ackReq) {
	a.mu.Lock()
	a.buf = append(a.buf, q)
	n := len(a.buf)
	a.mu.Unlock()
	if n == 1 || n == ackBatch {
		select {
		case a.kick <- struct{}{}:
		default: // a wake-up is pending already
		}
	}
}

// requeue queues again acknowledgements taken (take) whose sending failed
// before a reply, ahead of those queued since.
func (a *acker) requeue(reqs []ackReq) {
	a.mu.Lock()
	a.buf = append(reqs[:len(reqs):len(reqs)], a.buf...)
	a.mu.Unlock()
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// close flushes what is queued and ends run. Call it after every handler
// has returned.
func (a *acker) close() { close(a.stop) }

// run sends the queued acknowledgements in batches until close.
func (a *acker) run() {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	spare := make([]ackReq, 0, ackBatch)
	for {
		stopping := false
		select {
		case <-a.kick:
			stopping = a.linger(timer)
		case <-a.stop:
			stopping = true
		}
		a.mu.Lock()
		reqs := a.buf
		a.buf = spare[:0]
		a.mu.Unlock()
		a.flush(reqs)
		spare = reqs
		if stopping {
			a.mu.Lock()
			reqs = a.buf // handlers have returned: nothing more comes
			a.mu.Unlock()
			a.flush(reqs)
			return
		}
	}
}

// linger waits until the oldest queued acknowledgement has waited the ack
// delay, ackBatch are queued or the acker is closed (then it reports
// true). A read that takes what is queued (take) restarts the wait with
// the next acknowledgement queued.
func (a *acker) linger(timer *time.Timer) (stopping bool) {
	for {
		a.mu.Lock()
		n := len(a.buf)
		a.mu.Unlock()
		if n == 0 || n >= ackBatch {
			return false // taken by a read (nothing to wait for), or full
		}
		timer.Reset(a.delay)
		select {
		case <-timer.C:
			return false
		case <-a.kick: // full, or the first after a take
			timer.Stop()
		case <-a.stop:
			timer.Stop()
			return true
		}
	}
}

// flush acknowledges reqs: one Ack script call per stream, pipelined when
// there are two.
func (a *acker) flush(reqs []ackReq) {
	if len(reqs) == 0 {
		return
	}
	c := a.r.c
	k := groupAcks(reqs)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if len(k.groups) == 1 {
		keys, args := k.groups[0].call(c, time.Now())
		k.cmds = []*redis.Cmd{scripts.Ack.Run(ctx, c.rdb, keys, args...)}
	} else {
		pipe := c.rdb.Pipeline()
		k.queue(ctx, pipe, c)
		_, _ = pipe.Exec(ctx) // errors are per command
	}
	a.settled(ctx, k)
}

// take moves the queued acknowledgements of the streams for which along
// reports true (all if along is nil) to dst (reset first), for a caller
// that sends them with its own calls: the reader puts them in its read's
// pipeline, so that at a trickle an acknowledgement rides with the next
// read instead of costing a round trip of its own. The caller must pass
// them to groupAcks, queue and settled.
func (a *acker) take(dst []ackReq, along func(stream string) bool) []ackReq {
	a.mu.Lock()
	defer a.mu.Unlock()
	dst = dst[:0]
	if along == nil {
		dst = append(dst, a.buf...)
		a.buf = a.buf[:0]
		return dst
	}
	keep := a.buf[:0]
	var last string // consecutive entries often share a stream: ask once per run
	var ok bool
	for i, q := range a.buf {
		if i == 0 || q.stream != last {
			last, ok = q.stream, along(q.stream)
		}
		if ok {
			dst = append(dst, q)
		} else {
			keep = append(keep, q)
		}
	}
	a.buf = keep
	return dst
}

// ackCall is acknowledgements grouped by stream (entries come from the
// queue's streams and retry lanes: a few groups), one Ack script call each.
type ackCall struct {
	groups    []ackGroup
	cmds      []*redis.Cmd // by group, once queued
	successes int          // of the handlers whose entries these are
}

// ackGroup is one stream's acknowledgements: the entries of handlers that
// succeeded, then those dropped.
type ackGroup struct {
	stream  string
	handled []ackReq
	dropped []ackReq
}

func groupAcks(reqs []ackReq) ackCall {
	var k ackCall
	for _, q := range reqs {
		i := 0
		for i < len(k.groups) && k.groups[i].stream != q.stream {
			i++
		}
		if i == len(k.groups) {
			k.groups = append(k.groups, ackGroup{stream: q.stream, handled: make([]ackReq, 0, len(reqs))})
		}
		if q.success {
			k.successes++
			k.groups[i].handled = append(k.groups[i].handled, q)
		} else {
			k.groups[i].dropped = append(k.groups[i].dropped, q)
		}
	}
	return k
}

// size returns how many entries g acknowledges.
func (g *ackGroup) size() int { return len(g.handled) + len(g.dropped) }

// call returns the Ack script's KEYS and ARGV for g at now
// (scripts/ack.lua): with the group's handled records when it keeps them.
func (g *ackGroup) call(c *core, now time.Time) ([]string, []any) {
	sh := c.shardOf(g.stream)
	keys := sh.ackKeys(g.stream, now, !c.cfg.noHistory)
	n, keep := g.size(), c.cfg.handledRetention > 0
	args := make([]any, 0, 3+n+2+2*n)
	args = append(args, c.group, len(g.handled), n)
	for _, q := range g.handled {
		args = append(args, q.id)
	}
	for _, q := range g.dropped {
		args = append(args, q.id)
	}
	if !keep {
		return keys, args
	}
	records, times := sh.keys.Handled(c.group)
	keys = append(keys[:len(keys):len(keys)], records, times)
	args = append(args, c.cfg.handledRetention.Milliseconds(), c.cfg.consumer)
	for _, qs := range [][]ackReq{g.handled, g.dropped} {
		for _, q := range qs {
			args = append(args, q.msg, q.attempt)
		}
	}
	return keys, args
}

// queue adds k's Ack script calls to pipe (by hash: settled sends again
// on its own a call the server did not have the script for).
func (k *ackCall) queue(ctx context.Context, pipe redis.Pipeliner, c *core) {
	k.cmds = make([]*redis.Cmd, len(k.groups))
	now := time.Now()
	for i := range k.groups {
		keys, args := k.groups[i].call(c, now)
		k.cmds[i] = scripts.Ack.EvalSha(ctx, pipe, keys, args...)
	}
}

// settled counts k's acknowledgements once its XACKs have been sent and
// tells the trimmer, or logs their failure: unacknowledged entries stay
// pending and are redelivered after the visibility timeout (at least
// once, never lost).
func (a *acker) settled(ctx context.Context, k ackCall) {
	r, c := a.r, a.r.c
	for i, cmd := range k.cmds {
		if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			// Not run (the server's script cache was flushed): sent again
			// on its own, which loads the script.
			keys, args := k.groups[i].call(c, time.Now())
			cmd = scripts.Ack.Run(ctx, c.rdb, keys, args...)
			k.cmds[i] = cmd
		}
		if err := cmd.Err(); err != nil {
			// A WRONGTYPE reply names no key: the log names it.
			heal.After(c.rdb, err)
			r.log.Error("xack failed; entries will be redelivered", slog.Any("err", c.explain(ctx, err, c.shardOf(k.groups[i].stream))))
			return
		}
	}
	for i := range k.groups {
		a.trim.settled(k.groups[i].stream, k.groups[i].size())
	}
	c.ctr.acked.Add(uint64(k.successes))
}
