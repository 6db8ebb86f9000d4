package group

import (
	"context"
	"errors"
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
func (rd *reader) listen(ctx context.Context, a *arrivals, f *affinity) error {
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
	bg.Go(func() { _ = rd.listen(lctx, a, f) })
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
		fails    failures // for the log
		ackBuf   []ackReq // acknowledgements taken for a read's pipeline
	)
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
		go func() {
			pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
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
			heal.After(c.rdb, p.err)
			retry.Reset(backoff)
			backoff = min(2*backoff, 2*time.Second)
		}
	}
	for ctx.Err() == nil {
		n := rd.waitRoom(ctx)
		if n == 0 {
			return nil
		}
		select {
		case <-retry.C:
			again()
		case p := <-probed:
			checked(p)
		default:
		}
		picks = a.take(from, int(n), picks)
		if nfailing > 0 && len(picks) > 0 {
			// A failing stream is read again once its check answers.
			if picks = slices.DeleteFunc(picks, func(i int) bool { return failing[i] }); len(picks) == 0 {
				continue // take the other dirty streams, if any
			}
		}
		if len(picks) == 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-a.kick:
			case <-retry.C:
				again()
			case p := <-probed:
				checked(p)
			case <-poll.C:
				a.markAll()
			}
			continue
		}
		from = (picks[len(picks)-1] + 1) % len(streams)
		per := n / int64(len(picks))
		// Not tied to ctx, like the blocking read: a reply cut short would
		// leave entries pending unseen; what arrives after ctx is done is
		// handed back.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
		pipe := c.rdb.Pipeline()
		// Acknowledgements queued meanwhile go with the read: on a
		// Cluster, those of the streams on the nodes read (the others would
		// cost a round trip to their node now: they wait for a read there,
		// or the acker).
		var acks ackCall
		if ackBuf = rd.settle.ack.take(ackBuf, rd.sameNodes(rctx, streams, picks)); len(ackBuf) > 0 {
			acks = groupAcks(ackBuf)
			acks.queue(rctx, pipe, c.group)
		}
		cmds := make([]*redis.XStreamSliceCmd, len(picks))
		for k, i := range picks {
			cmds[k] = pipe.XReadGroup(rctx, &redis.XReadGroupArgs{
				Group: c.group, Consumer: c.cfg.consumer, Streams: []string{streams[i], ">"},
				Count: per, Block: -1,
			})
		}
		_, _ = pipe.Exec(rctx) // errors are per command
		if acks.cmds != nil {
			rd.settle.ack.settled(rctx, acks)
		}
		cancel()
		var failed error
		failedAt := 0 // the stream of failed
		for k, i := range picks {
			res, err := cmds[k].Result()
			if err != nil && !errors.Is(err, redis.Nil) {
				deferred = append(deferred, i) // read it again after the backoff
				failed, failedAt = err, i
				if !failing[i] {
					failing[i] = true
					nfailing++
				}
				continue
			}
			if failing[i] {
				failing[i] = false
				nfailing--
			}
			for _, s := range res {
				if int64(len(s.Messages)) >= per {
					a.mark(i) // a full read: there may be more
				}
				if len(s.Messages) > 0 {
					rd.act.touch(i) // maybe not announced: now pending
				}
				rd.enqueue(ctx, streams[i], s.Messages, nil)
			}
		}
		if failed == nil {
			if nfailing == 0 {
				backoff = 50 * time.Millisecond
				if fails.n > 0 {
					fails.succeeded(ctx, r.log, "xreadgroup recovered")
				}
			}
			continue
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

// sameNodes returns whether a stream is served by the master of one of the
// picked streams, or nil (every stream) unless the client is a Cluster's.
// The picked streams' masters are looked up at the first question only:
// most reads find no acknowledgement queued and ask none.
func (rd *reader) sameNodes(ctx context.Context, streams []string, picks []int) func(string) bool {
	cc, ok := rd.r.c.rdb.(*redis.ClusterClient)
	if !ok || len(rd.r.c.shards) == 1 {
		return nil
	}
	addr := func(key string) string {
		m, err := cc.MasterForKey(ctx, key)
		if err != nil {
			return ""
		}
		return m.Options().Addr
	}
	var read map[string]bool
	return func(stream string) bool {
		if read == nil {
			read = make(map[string]bool, len(picks))
			for _, i := range picks {
				read[addr(streams[i])] = true
			}
		}
		a := addr(stream)
		return a != "" && read[a]
	}
}
