package group

import (
	"context"
	"errors"

	"github.com/delaystream/delaystream/internal/heal"
	"github.com/redis/go-redis/v9"
)

// nodeRead is one node's share of a round of reads: XREADGROUPs of the
// streams it serves, and the acknowledgements of its streams that ride
// with them, in one pipeline.
type nodeRead struct {
	addr  string // "" unless the client is a Cluster's
	picks []int  // stream indexes
	per   int64  // COUNT of each read
	cmds  []*redis.XStreamSliceCmd
	acks  ackCall
	// orphaned: the reader stopped waiting for the reply (the node's
	// subscription was lost while it was awaited). The reader's loop only.
	orphaned bool
}

func isCluster(rdb redis.UniversalClient) bool {
	_, ok := rdb.(*redis.ClusterClient)
	return ok
}

// plan splits a round's picks by the master that serves them (one share
// unless the queue is sharded on a Cluster) and takes along the queued
// acknowledgements of the streams those masters serve, each with its
// node's share (the others would cost a round trip to their node now:
// they wait for a read there, or the acker). buf is reused between rounds.
func (rd *reader) plan(ctx context.Context, streams []string, picks []int, per int64, buf *[]ackReq) []*nodeRead {
	c := rd.r.c
	if !isCluster(c.rdb) || len(c.shards) == 1 {
		nr := &nodeRead{picks: picks, per: per}
		if *buf = rd.settle.ack.take(*buf, nil); len(*buf) > 0 {
			nr.acks = groupAcks(*buf)
		}
		return []*nodeRead{nr}
	}
	addr := func(key string) string { return heal.MasterOf(ctx, c.rdb, key) }
	var nrs []*nodeRead
	byAddr := func(a string) *nodeRead {
		for _, nr := range nrs {
			if nr.addr == a {
				return nr
			}
		}
		return nil
	}
	for _, i := range picks {
		a := addr(streams[i])
		nr := byAddr(a)
		if nr == nil {
			nr = &nodeRead{addr: a, per: per}
			nrs = append(nrs, nr)
		}
		nr.picks = append(nr.picks, i)
	}
	var ackAddr map[string]string // stream -> master, of the acknowledgements queued
	*buf = rd.settle.ack.take(*buf, func(stream string) bool {
		if ackAddr == nil {
			ackAddr = make(map[string]string)
		}
		a := addr(stream)
		ackAddr[stream] = a
		return a != "" && byAddr(a) != nil
	})
	if len(*buf) == 0 {
		return nrs
	}
	mine := make(map[*nodeRead][]ackReq, len(nrs))
	for _, q := range *buf {
		nr := byAddr(ackAddr[q.stream])
		if nr == nil {
			// Not a read's node (cannot happen unless the map changed
			// between lookups): any share's pipeline routes it to its
			// node, a Cluster pipeline being per key.
			nr = nrs[0]
		}
		mine[nr] = append(mine[nr], q)
	}
	for nr, qs := range mine {
		nr.acks = groupAcks(qs)
	}
	return nrs
}

// exec sends nr's pipeline. Not tied to ctx, like a blocking read: a reply
// cut short would leave entries pending unseen; what arrives after ctx is
// done is handed back.
func (rd *reader) exec(ctx context.Context, nr *nodeRead, streams []string) {
	c := rd.r.c
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
	defer cancel()
	pipe := c.rdb.Pipeline()
	if nr.acks.groups != nil {
		nr.acks.queue(rctx, pipe, c)
	}
	nr.cmds = make([]*redis.XStreamSliceCmd, len(nr.picks))
	for k, i := range nr.picks {
		nr.cmds[k] = pipe.XReadGroup(rctx, &redis.XReadGroupArgs{
			Group: c.group, Consumer: c.cfg.consumer, Streams: []string{streams[i], ">"},
			Count: nr.per, Block: -1,
		})
	}
	_, _ = pipe.Exec(rctx) // errors are per command
}

// consume takes nr's reply: it settles the acknowledgements, queues the
// entries read, marks the streams whose read was full (there may be more)
// and records the streams whose read failed as failing, to be checked and
// read again after a backoff. It returns the first failure and the index
// of its stream. A stream that went failing while its read was awaited (its node's
// subscription was lost) is already being checked: its entries are
// queued, and its failure is not counted again.
func (l *readLoop) consume(ctx context.Context, nr *nodeRead) (int, error) {
	rd, streams := l.rd, l.streams
	if nr.acks.cmds != nil {
		// Not tied to ctx either: a call sent again (NOSCRIPT) after Run
		// was cancelled must still go through.
		rd.settle.ack.settled(rd.r.opCtx, nr.acks)
	}
	var failed error
	failedAt := 0
	for k, i := range nr.picks {
		res, err := nr.cmds[k].Result()
		if err != nil && errors.Is(err, redis.Nil) {
			err = nil
		}
		if l.failing[i] {
			if err == nil {
				for _, s := range res {
					l.got += int64(len(s.Messages))
					rd.enqueue(ctx, streams[i], s.Messages, nil)
				}
			}
			continue
		}
		if err != nil {
			l.toCheck = append(l.toCheck, i) // read it again after the backoff
			l.failing[i] = true
			l.nFailing++
			if failed == nil {
				failed, failedAt = err, i
			}
			continue
		}
		for _, s := range res {
			if int64(len(s.Messages)) >= nr.per {
				l.dirty.mark(i) // a full read: there may be more
			}
			if len(s.Messages) > 0 {
				rd.act.touch(i) // maybe not announced: now pending
			}
			l.got += int64(len(s.Messages))
			rd.enqueue(ctx, streams[i], s.Messages, nil)
		}
	}
	return failedAt, failed
}
