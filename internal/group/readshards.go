package group

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/delaystream/delaystream/internal/flow"
	"github.com/delaystream/delaystream/internal/shardsub"
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
		Groups:    groups,
		OnMessage: func(ch, payload string) { rd.arrival(ch, payload, byChan, a, f) },
		OnReset: func() {
			rd.r.pause.poke() // a notice may have been lost
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

// arrival acts on a message of the arrivals channels (byChan: channel ->
// stream index): a pause or flow-limit notice pokes what waits for it; an
// announcement marks its stream for the reader (a, f as in listen) and the
// reclaimer, unless it names this consumer, which read the stream in the
// announcing promote call's pipeline (take.go): then only the reclaimer
// looks.
func (rd *reader) arrival(ch, payload string, byChan map[string]int, a *arrivals, f *affinity) {
	c := rd.r.c
	if payload == flow.Notice {
		rd.r.pause.poke() // the group's pause may have changed
		return
	}
	if g, ok := strings.CutPrefix(payload, flow.SlotsNotice); ok {
		if g == c.group && rd.lim != nil {
			rd.lim.poke() // another consumer freed slots
		}
		return
	}
	if _, who, ok := strings.Cut(payload, "\n"); ok && who == c.group+"\n"+c.cfg.consumer {
		// This consumer read the stream in the announcing promote
		// call's pipeline (take.go).
		if i, ok := byChan[ch]; ok {
			rd.act.touch(i)
		}
		return
	}
	if i, ok := byChan[ch]; ok {
		if f.owns(i / 2) {
			a.mark(i)
		} else {
			a.markLater(i)
		}
		rd.act.touch(i)
	}
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
	c := rd.r.c
	streams := c.streams()
	a := newArrivals(len(streams))
	a.markAll()
	f := new(affinity)
	lctx, stop := context.WithCancel(ctx)
	var bg sync.WaitGroup
	defer func() { stop(); bg.Wait() }()
	lost := newLostStreams()
	bg.Go(func() { _ = rd.listen(lctx, a, f, lost) })
	// Every consumer keeps its presence, by which operators tell live
	// consumers from gone ones; on a sharded queue the consumers also
	// split the shards by it.
	bg.Go(func() { _ = rd.present(lctx) })
	if len(c.shards) > 1 {
		bg.Go(func() { rd.follow(lctx, f, a) })
	}
	if p := rd.r.calls; p != nil {
		t := newTaker(ctx, rd, a, f)
		p.Join(t)
		defer func() { p.Leave(t); t.close() }()
	}
	l := newReadLoop(rd, streams, a, lost)
	defer l.close(ctx)
	return l.run(ctx)
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
