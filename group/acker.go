package group

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream/internal/heal"
)

// ackBatch is how many queued acknowledgements make the acker send at once,
// without waiting for the ack delay.
const ackBatch = 512

// acker batches acknowledgements: an ack waits at most the ack delay (2 ms)
// or until ackBatch are queued; then one XACK per stream (pipelined when
// there are two) acknowledges them all. Workers only append to a buffer
// under a mutex; the acker goroutine is woken once per batch, not per ack.
type acker struct {
	r    *runState
	trim *trimmer // told which streams were acknowledged
	mu   sync.Mutex
	buf  []ackReq      // queued; guarded by mu
	kick chan struct{} // a token when buf got its first or its ackBatch-th entry
	stop chan struct{}
}

func newAcker(r *runState, trim *trimmer) *acker {
	return &acker{r: r, trim: trim, buf: make([]ackReq, 0, ackBatch), kick: make(chan struct{}, 1), stop: make(chan struct{})}
}

// ackReq is one entry to acknowledge; success says whether its handler
// succeeded (counted in Counters.Acked once the XACK went through) or it
// was dropped (counted in Dropped already).
type ackReq struct {
	stream, id string
	success    bool
}

// add queues the acknowledgement of one entry.
func (a *acker) add(streamKey, id string, success bool) {
	a.mu.Lock()
	a.buf = append(a.buf, ackReq{stream: streamKey, id: id, success: success})
	n := len(a.buf)
	a.mu.Unlock()
	if n == 1 || n == ackBatch {
		select {
		case a.kick <- struct{}{}:
		default: // a wake-up is pending already
		}
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
			a.mu.Lock()
			n := len(a.buf)
			a.mu.Unlock()
			if n > 0 && n < ackBatch {
				timer.Reset(a.r.c.cfg.ackDelay)
				select {
				case <-timer.C:
				case <-a.kick: // full
					timer.Stop()
				case <-a.stop:
					timer.Stop()
					stopping = true
				}
			}
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

// flush acknowledges reqs: one XACK per stream, pipelined when there are two.
func (a *acker) flush(reqs []ackReq) {
	if len(reqs) == 0 {
		return
	}
	r, c := a.r, a.r.c
	// Group by stream: entries come from the queue stream and the retry
	// lane, so there are one or two groups.
	type group struct {
		stream string
		ids    []string
	}
	var groups []group
	successes := 0
	for _, q := range reqs {
		if q.success {
			successes++
		}
		i := 0
		for i < len(groups) && groups[i].stream != q.stream {
			i++
		}
		if i == len(groups) {
			groups = append(groups, group{stream: q.stream, ids: make([]string, 0, len(reqs))})
		}
		groups[i].ids = append(groups[i].ids, q.id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	var err error
	failedOn := groups[0].stream // the stream of err
	if len(groups) == 1 {
		err = c.rdb.XAck(ctx, groups[0].stream, c.group, groups[0].ids...).Err()
	} else {
		pipe := c.rdb.Pipeline()
		cmds := make([]*redis.IntCmd, len(groups))
		for k, g := range groups {
			cmds[k] = pipe.XAck(ctx, g.stream, c.group, g.ids...)
		}
		_, err = pipe.Exec(ctx)
		for k, cmd := range cmds {
			if cmd.Err() != nil {
				failedOn = groups[k].stream
				break
			}
		}
	}
	if err != nil {
		// Unacknowledged entries stay pending and are redelivered after the
		// visibility timeout: at-least-once, never lost. A WRONGTYPE reply
		// names no key: the log names it.
		heal.After(r.c.rdb, err)
		r.log.Error("xack failed; entries will be redelivered", slog.Any("err", c.explain(ctx, err, c.shardOf(failedOn))))
		return
	}
	for _, g := range groups {
		a.trim.settled(g.stream, len(g.ids))
	}
	c.ctr.acked.Add(uint64(successes))
}
