package group

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/delaystream/delaystream/internal/heal"
	"github.com/redis/go-redis/v9"
)

// arrivalsPoll is how often a consumer of a sharded queue reads every
// shard even without an announcement: announcements are pub/sub messages,
// which a connection that breaks unnoticed can lose (a resubscription
// reads every shard at once).
const arrivalsPoll = 5 * time.Second

// arrivals tracks which streams of a sharded queue may have entries for
// the group: those announced by the movers (the main lane's and the
// group's retry lanes' arrivals channels), those a read filled to its
// count, and all of them after a (re)subscription or a poll period. Its
// methods are safe for concurrent use.
type arrivals struct {
	mu    sync.Mutex
	dirty []bool        // by stream index (core.streams order: 2i main, 2i+1 retry of shard i)
	n     int           // dirty streams
	kick  chan struct{} // a token when a stream became dirty
}

func newArrivals(streams int) *arrivals {
	return &arrivals{dirty: make([]bool, streams), kick: make(chan struct{}, 1)}
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

// listen marks the streams announced on the queue's and the group's
// arrivals channels until ctx ends or ps is closed.
func (rd *reader) listen(ctx context.Context, ps *redis.PubSub, a *arrivals) {
	c := rd.r.c
	mainCh := c.layout.Arrivals("")
	ch := ps.ChannelWithSubscriptions(redis.WithChannelHealthCheckInterval(arrivalsPoll))
	for {
		select {
		case <-ctx.Done():
			return
		case msg, ok := <-ch:
			if !ok {
				return
			}
			switch msg := msg.(type) {
			case *redis.Message:
				i, err := strconv.Atoi(msg.Payload)
				if err != nil || i < 0 || i >= len(c.shards) {
					continue // not ours to read
				}
				if msg.Channel == mainCh {
					a.mark(2 * i)
				} else {
					a.mark(2*i + 1)
				}
			case *redis.Subscription:
				// A (re)subscription: announcements made while the
				// connection was down are lost, so read everything.
				if msg.Kind == "subscribe" {
					a.markAll()
				}
			}
		}
	}
}

// readShards is the intake of a sharded queue. XREADGROUP can block on
// several streams only within one slot, and a blocking read per shard
// would hold a connection per shard; so the reader waits for the movers'
// announcements (one pub/sub connection), then reads the announced
// streams without blocking, in one pipeline (one round trip per node),
// sharing the room between them: a shard with a backlog gets its share
// and is read again next round, and cannot starve the others.
func (rd *reader) readShards(ctx context.Context) error {
	r, c := rd.r, rd.r.c
	streams := c.streams()
	a := newArrivals(len(streams))
	a.markAll()
	ps := c.rdb.Subscribe(ctx, c.layout.Arrivals(""), c.layout.Arrivals(c.group))
	defer ps.Close()
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	go rd.listen(lctx, ps, a)

	poll := time.NewTicker(arrivalsPoll)
	defer poll.Stop()
	backoff := 50 * time.Millisecond
	var (
		from  int
		picks []int
	)
	for ctx.Err() == nil {
		n := rd.waitRoom(ctx)
		if n == 0 {
			return nil
		}
		picks = a.take(from, int(n), picks)
		if len(picks) == 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-a.kick:
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
		cmds := make([]*redis.XStreamSliceCmd, len(picks))
		for k, i := range picks {
			cmds[k] = pipe.XReadGroup(rctx, &redis.XReadGroupArgs{
				Group: c.group, Consumer: c.cfg.consumer, Streams: []string{streams[i], ">"},
				Count: per, Block: -1,
			})
		}
		_, _ = pipe.Exec(rctx) // errors are per command
		cancel()
		var failed error
		for k, i := range picks {
			res, err := cmds[k].Result()
			if err != nil && !errors.Is(err, redis.Nil) {
				a.mark(i) // read it again after the backoff
				failed = err
				continue
			}
			for _, s := range res {
				if int64(len(s.Messages)) >= per {
					a.mark(i) // a full read: there may be more
				}
				rd.enqueue(ctx, streams[i], s.Messages, nil)
			}
		}
		if failed == nil {
			backoff = 50 * time.Millisecond
			continue
		}
		heal.After(c.rdb, failed)
		if redis.HasErrorPrefix(failed, "NOGROUP") {
			r.log.WarnContext(ctx, "group missing; recreating it", slog.Any("err", failed))
			if err := c.ensureGroups(ctx); err != nil && ctx.Err() == nil {
				r.log.ErrorContext(ctx, "recreating group failed", slog.Any("err", err))
			}
		} else if ctx.Err() == nil {
			r.log.WarnContext(ctx, "xreadgroup failed", slog.Any("err", failed), slog.Duration("retry_in", backoff))
		}
		sleepCtx(ctx, backoff)
		backoff = min(2*backoff, 2*time.Second)
	}
	return nil
}
